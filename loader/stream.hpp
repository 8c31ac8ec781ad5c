#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loader/reader.hpp"

namespace tezip {

class ChunkStore;
class ChunkExchange;
struct ExchangeStats;

// How ranks are given equal sample counts (DDP hangs when one rank runs out before the others).
enum class Balance : std::uint8_t {
  // Every rank delivers as many samples as the largest shard: a shorter shard appends repeats of
  // its own first samples, in its own epoch order, marked `repeated`. Nothing is lost.
  Repeat,
  // Every rank delivers as many samples as the smallest shard: a longer shard stops early, and the
  // samples it drops (the last ones of its epoch order) are not delivered this epoch.
  Drop,
};

struct StreamOptions {
  std::size_t clip_len = 1;  // frames per sample; 1: single frames
  std::size_t stride = 1;    // a sample starts every `stride` frames of a sequence (at 0, stride, ...)
  std::size_t rank = 0;
  std::size_t world_size = 1;
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  // 0: sequential (blocks and samples in archive order). n >= 1: the rank's blocks in a shuffled
  // order, and a buffer of n decoded samples out of which each delivered sample is drawn at random.
  std::size_t shuffle_buffer = 256;
  // Fraction of every rank's blocks handed to other ranks at each new epoch (0: each rank keeps its
  // blocks, local shuffle only; 1: every block moves).
  double exchange = 1.0;
  Balance balance = Balance::Repeat;
  unsigned threads = 2;      // decode workers; 0 decodes in the consuming thread
  std::size_t prefetch = 8;  // samples decoded ahead of what the shuffle buffer needs
  ClipLayout layout = ClipLayout::Planar;
  std::size_t cache_gops = 0;  // decoded GOPs the stream's Reader keeps; 0: 2 * threads + 4
};

struct Sample : Clip {
  std::uint64_t position = 0;  // index in this rank's epoch order
  bool repeated = false;       // a Balance::Repeat pad: this sample was already delivered this epoch
};

// Where a stream stands. `config` fingerprints the dataset and the options that fix the order, so a
// state is never applied to a stream that would deliver something else.
struct StreamState {
  std::uint64_t epoch = 0;
  std::uint64_t position = 0;  // samples already delivered in this epoch
  std::uint64_t config = 0;

  std::string serialize() const;                        // "tezip-stream/1 epoch=3 position=120 config=..."
  static StreamState parse(const std::string& text);    // throws std::invalid_argument
};

// Bytes (compressed, as stored) of the blocks each rank owns in an epoch, and of those it did not own
// the epoch before: what partial exchange saves in reading. Epoch 0 counts everything as new.
struct ExchangeReport {
  std::vector<std::uint64_t> bytes;      // per rank
  std::vector<std::uint64_t> new_bytes;  // per rank
  std::vector<std::size_t> blocks;       // per rank
  std::vector<std::size_t> new_blocks;   // per rank
};

// A sample before decoding.
struct SampleRef {
  std::size_t sequence = 0;
  std::size_t start = 0;
  std::size_t block = 0;  // the GOP holding the first frame: the unit of sharding
};

// One rank's epoch: samples in the order they are decoded (its blocks in order, samples of a
// block in frame order, then the Repeat pads), and the order they are delivered (indices into
// `decode`; the shuffle buffer's draws). Every rank's `deliver` has the same length.
struct RankOrder {
  std::vector<SampleRef> decode;
  std::vector<std::size_t> deliver;
  std::size_t own = 0;  // samples of the rank's own shard (before pads or drops)
};

// The deterministic part of a stream: which blocks every rank owns in each epoch and in which order
// it delivers samples, from the dataset's layout and (seed, epoch) alone, so ranks agree without
// talking. Sharding is on GOP boundaries: a sample belongs to the block holding its first frame
// (a clip may read on into the next GOP); the blocks of a group of short sequences go together.
// Epoch 0 deals the blocks (units of blocks), shuffled, to the least-loaded rank; each later epoch
// takes round(exchange * n) random units from every rank's n and deals them, shuffled, to the
// least-loaded rank other than their previous owner.
class StreamPlan {
 public:
  StreamPlan(const Reader& reader, const StreamOptions& options);

  std::size_t num_blocks() const;             // blocks holding at least one sample
  std::size_t num_samples() const;            // in the whole dataset
  // owner[b] for every block b of the Reader (SIZE_MAX for blocks without samples).
  std::vector<std::size_t> owners(std::uint64_t epoch) const;
  ExchangeReport exchange(std::uint64_t epoch) const;
  // The chunks (blocks) each rank's samples read in `epoch`, sorted: those it owns and the GOPs
  // its clips read on into. What its chunk store must hold.
  std::vector<std::vector<std::size_t>> chunks_needed(std::uint64_t epoch) const;
  RankOrder order(std::uint64_t epoch, std::size_t rank) const;
  std::size_t samples_per_rank(std::uint64_t epoch) const;
  std::uint64_t fingerprint() const;
  const StreamOptions& options() const { return options_; }

 private:
  struct BlockSamples {
    std::size_t first_start = 0, count = 0;
  };
  std::vector<std::size_t> shard_sizes(const std::vector<std::size_t>& owners) const;
  std::size_t unit_samples(const std::vector<std::size_t>& unit) const;

  std::vector<Block> blocks_;
  std::vector<BlockSamples> samples_;
  // The blocks holding samples, in the units that are dealt, exchanged and shuffled whole: a group's
  // (Block::unit; so that a rank decodes a group once for all of its sequences), one block each
  // where there are groups fewer than ranks.
  std::vector<std::vector<std::size_t>> units_;
  StreamOptions options_;
};

// The samples of one epoch for one rank, decoded ahead by worker threads into a bounded set:
// at most shuffle_buffer + prefetch (+ a few per worker) decoded samples are held, whatever the
// dataset's size. A decoding error (a corrupt chunk) is raised by next() when the consumer reaches
// the damaged sample; it is never skipped. Not thread-safe: one consumer.
class Stream {
 public:
  Stream(const std::filesystem::path& input, const StreamOptions& options, std::optional<StreamState> resume = {});
  Stream(std::shared_ptr<const Reader> reader, const StreamOptions& options, std::optional<StreamState> resume = {});
  // Over a node-local chunk store (loader/exchange.hpp): first brought to the epoch, by `exchange`
  // over MPI when given (collective), else from the source, then read alone.
  Stream(std::shared_ptr<ChunkStore> store, std::shared_ptr<ChunkExchange> exchange, const StreamOptions& options,
         std::optional<StreamState> resume = {});
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // The next sample, or nothing at the end of the epoch.
  std::optional<Sample> next();
  std::size_t size() const;      // samples of this epoch for this rank (the same on every rank)
  std::size_t position() const;  // samples delivered so far
  StreamState state() const;
  const ExchangeReport& exchange_report() const;
  const ExchangeStats& store_stats() const;  // what bringing the store to this epoch moved (zeros without a store)
  const StreamOptions& options() const;
  const Reader& reader() const;

 private:
  struct Impl;
  void open(std::shared_ptr<const Reader> reader, const StreamOptions& options, std::optional<StreamState> resume);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tezip
