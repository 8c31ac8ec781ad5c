#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "loader/chunk_store.hpp"
#include "loader/stream.hpp"

namespace tezip {

// The exchange failed on some rank (a rank died or hangs past the timeout, a damaged chunk, a full
// store): raised on every rank that is alive, with what each failing rank said.
struct ExchangeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One chunk changing hands between epoch - 1 and epoch.
struct ChunkMove {
  std::size_t chunk = 0, from = 0, to = 0;
  bool owned = false;  // a block `to` owns now (the others are GOPs its clips read on into)
};
// The chunks each rank needs in `epoch` and did not in epoch - 1, each sent by its owner of
// epoch - 1 (or, for a GOP only read on into, the lowest rank that held it). The same on every rank.
std::vector<ChunkMove> chunk_moves(const StreamPlan& plan, std::uint64_t epoch);

// What bringing a store to one epoch moved on this rank (compressed bytes).
struct ExchangeStats {
  std::uint64_t epoch = 0;
  std::uint64_t sent_bytes = 0, received_bytes = 0, staged_bytes = 0;  // staged: read from the source
  std::size_t sent_chunks = 0, received_chunks = 0, staged_chunks = 0, dropped_chunks = 0;
  std::size_t sent_owned_chunks = 0;  // of the sent: blocks their receiver now owns
  double seconds = 0;                 // the exchange itself
  double waited_seconds = 0;          // what prepare() waited for it (~0 when it ran in the background)
};

// Without MPI: makes the store hold what this rank needs in `epoch`, staging what it lacks from
// the source (the global file), dropping the rest. Enough for exchange = 0 or one rank.
ExchangeStats prepare_from_source(ChunkStore& store, const StreamPlan& plan, std::uint64_t epoch);

struct ExchangeOptions {
  double timeout_s = 300;   // for every wait on other ranks
  bool background = true;   // exchange epoch e + 1 while e is consumed (needs MPI_THREAD_MULTIPLE)
};

// Whether this build has the MPI module (libtezip_mpi.so, loaded on first use of MPI).
bool built_with_mpi();

// Keeps this rank's store holding what the plan's epoch needs by sending chunks between ranks over
// MPI (docs/distributed.md). Every rank of the communicator makes one and calls prepare() with the
// same plan; its rank and world_size are the communicator's. The constructor loads the MPI module;
// MPI is initialised with MPI_THREAD_MULTIPLE when no one has (and finalised at exit); the exchange
// talks on a duplicate of the communicator. Without MPI in the build, or without its module, the
// constructor says so (std::runtime_error).
class ChunkExchange {
 public:
  static constexpr std::int64_t kWorld = -1;
  // `comm`: a communicator's Fortran handle (MPI_Comm_c2f; mpi4py: comm.py2f()), or kWorld.
  explicit ChunkExchange(std::shared_ptr<ChunkStore> store, std::int64_t comm = kWorld, const ExchangeOptions& options = {});
  ~ChunkExchange();  // waits for a background exchange (bounded by the timeout)
  ChunkExchange(const ChunkExchange&) = delete;
  ChunkExchange& operator=(const ChunkExchange&) = delete;

  // Collective. Brings the store to `epoch`: from epoch - 1 on every rank, by the moves of
  // chunk_moves (already done when it ran in the background); otherwise each rank stages what it
  // lacks from the source. Drops what the epoch does not need, then starts epoch + 1's exchange
  // in the background. Raises ExchangeError on every live rank when any rank fails.
  ExchangeStats prepare(const StreamPlan& plan, std::uint64_t epoch);
  // Waits for the background exchange (before MPI_Finalize; the destructor and tezip's own
  // finalisation call it). Its outcome is kept for the next prepare().
  void finish();
  const std::shared_ptr<ChunkStore>& store() const;
  int rank() const;
  int size() const;
  bool background() const;  // false when MPI gives less than MPI_THREAD_MULTIPLE

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tezip
