#pragma once
// The boundary between tezip's core and MPI: the collectives of a batch job (batch/mpi_context.hpp)
// and the chunk exchange between ranks (loader/exchange.hpp) live in a separate shared library,
// libtezip_mpi.so, which the core loads with dlopen() the first time an MPI launcher's process
// needs them. Open MPI's libraries cost some 5 ms of CPU to map and relocate, in every process that
// links them: a `tezip verify`, a DataLoader worker, `import tezip` (docs/performance.md, "The process
// start"). Internal: not installed; users call mpi_context.hpp and exchange.hpp.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loader/exchange.hpp"

namespace tezip {

// One ChunkExchange's work over MPI (the module's MpiExchange); ChunkExchange forwards to it.
class ExchangeBackend {
 public:
  virtual ~ExchangeBackend() = default;  // waits for a background exchange (bounded by the timeout)
  virtual ExchangeStats prepare(const StreamPlan& plan, std::uint64_t epoch) = 0;
  virtual void finish() = 0;
  virtual const std::shared_ptr<ChunkStore>& store() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual bool background() const = 0;
};

// What the MPI module exports, as one table: the core and the module are built together, and
// `abi` (compiler and tezip version) refuses a module from another build.
struct MpiModule {
  const char* abi;
  // MPI_COMM_WORLD for MpiContext. join_world initialises MPI unless someone already has (then it
  // returns false: that job is theirs); it sets rank, size and the ranks on this node.
  bool (*join_world)(int& rank, int& size, int& local_size);
  void (*leave_world)();
  bool (*world_all_ok)(bool ok);
  bool (*world_root_ok)(bool ok);
  std::vector<double> (*world_gather)(std::span<const double> values, int rank, int size);
  // ChunkExchange's constructor: initialises MPI with MPI_THREAD_MULTIPLE when no one has.
  std::unique_ptr<ExchangeBackend> (*open_exchange)(std::shared_ptr<ChunkStore> store, std::int64_t comm,
                                                    const ExchangeOptions& options);
};

// The string both sides compile in; they must match exactly.
#define TEZIP_MPI_MODULE_ABI "tezip " TEZIP_VERSION_STRING "; " __VERSION__
// The module's one exported symbol.
#define TEZIP_MPI_MODULE_ENTRY "tezip_mpi_module_v1"

// Loads the module on first use (thread-safe) from $TEZIP_MPI_MODULE, else from the folder of
// libtezip itself. Throws std::runtime_error saying what `purpose` needs when the build has no MPI
// or the module is absent or unusable.
const MpiModule& mpi_module(const std::string& purpose);

// The core's helpers that the module's exchange shares (loader/exchange.cpp).
// "fp=<plan fingerprint> epoch=<e>": the tag of a store that holds what epoch e of the plan needs.
std::string exchange_epoch_tag(const StreamPlan& plan, std::uint64_t epoch);
// Drops from the store what `needed` (sorted) lacks, counting it in `stats`.
void drop_unneeded_chunks(ChunkStore& store, const std::vector<std::size_t>& needed, ExchangeStats& stats);

}  // namespace tezip
