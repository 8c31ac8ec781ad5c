#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "codecs/buffer_pool.hpp"

namespace tezip {

// A chunk the store does not hold was asked for; the message names the chunk and the store.
struct ChunkMissing : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Holding what was asked for would pass the store's capacity; nothing was written.
struct StoreFull : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ChunkStoreOptions {
  std::uint64_t capacity = std::numeric_limits<std::uint64_t>::max();  // bytes of chunks held at once
};

// The compressed chunks (GOPs) one rank holds of an archive or dataset index, in a folder of its own
// on node-local storage (an SSD, or /dev/shm for memory), with a copy of the metadata, so that a
// Reader (Reader(store)) opens it without the global file. Chunks are numbered as Reader::blocks().
//   DIR/tezip-store.json   the manifest: the source, each shard's identity, the chunks held, a tag
//   DIR/shards/NNNNN.tzp   a sparse copy of shard N: its header, index and footer as in the original,
//                          the chunks held at their original offsets, holes elsewhere
// The store creates only these (and temporary names beside them, renamed into place) and removes
// nothing else: a folder that is neither empty nor a store is refused. A chunk is in the manifest
// only once its bytes, checked against the index's hash, are synced. Thread-safe; one open store
// per folder (an flock on it): other processes share it through Readers of one store, not by
// opening it again.
class ChunkStore {
 public:
  // Opens the store in `directory`, creating it for `source` (an archive or dataset index) when the
  // folder is absent or empty. An existing store must be of the same source (shard sizes and
  // indexes); `source` is read only for its metadata here, and for chunks by stage().
  ChunkStore(const std::filesystem::path& directory, const std::filesystem::path& source, const ChunkStoreOptions& options = {});
  // Opens an existing store; stage() then reads the source the manifest names.
  explicit ChunkStore(const std::filesystem::path& directory, const ChunkStoreOptions& options = {});
  ~ChunkStore();
  ChunkStore(const ChunkStore&) = delete;
  ChunkStore& operator=(const ChunkStore&) = delete;

  const std::filesystem::path& directory() const;
  std::vector<std::filesystem::path> archives() const;  // the sparse shard copies, in order
  std::size_t num_chunks() const;
  std::uint64_t chunk_size(std::size_t chunk) const;
  bool has(std::size_t chunk) const;
  std::vector<std::size_t> held() const;
  std::uint64_t bytes_held() const;
  std::uint64_t capacity() const;
  // "chunk 7 (sequence 's2' frames 4-5 of shard 0 'a.tzp')"
  std::string describe(std::size_t chunk) const;

  // Copies the chunks not yet held from the source, each checked against its hash (DataError
  // naming the chunk), then commits. StoreFull before anything is copied when they would not fit.
  void stage(std::span<const std::size_t> chunks);
  // The bytes of a chunk held, checked against its hash (DataError); ChunkMissing when absent.
  codecs::PooledBytes read(std::size_t chunk) const;
  // Adds a chunk that came from elsewhere: DataError when the bytes do not match its hash,
  // StoreFull when it would not fit. Durable at the next commit().
  void add(std::size_t chunk, std::span<const std::uint8_t> bytes);
  // Forgets chunks and gives their space back to the file system (commits first).
  void drop(std::span<const std::size_t> chunks);
  void commit();
  // A free text kept in the manifest (the exchange records the plan and epoch held).
  std::string tag() const;
  void set_tag(const std::string& tag);  // commits

  // Compressed bytes moved: read from the source (metadata and chunks), read out of the store
  // (by read() and by Readers over it), added by add().
  struct Traffic {
    std::uint64_t source_bytes = 0, store_bytes = 0, added_bytes = 0;
  };
  Traffic traffic() const;
  void count_store_read(std::uint64_t bytes) const;  // for Readers over the store

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tezip
