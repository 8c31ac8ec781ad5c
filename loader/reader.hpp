#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codecs/buffer_pool.hpp"
#include "format/frame.hpp"

namespace tezip {

class ChunkStore;

// How the pixels of a clip are laid out in memory.
enum class ClipLayout : std::uint8_t {
  Planar,       // (T, C, H, W): what the archive stores, and what torch wants
  Interleaved,  // (T, H, W, C): what NumPy and OpenCV want (channel order as stored: BGR for images)
};

// `length` consecutive frames of one sequence, in the sequence's pixel type (uint8 or uint16,
// native endianness) and the requested layout.
using ClipBytes = codecs::PooledBytes;

struct Clip {
  std::size_t sequence = 0;
  std::size_t start = 0;
  std::size_t length = 0;
  Geometry geometry;
  ClipLayout layout = ClipLayout::Planar;
  // length * geometry.raw_bytes() bytes; large clips' buffers come from codecs/buffer_pool.hpp's
  // pool and go back to it when the clip dies (a loader's clips reuse the pages of the last ones).
  ClipBytes data;

  std::size_t element_size() const { return geometry.type == PixelType::U8 ? 1 : 2; }
  // Pixel i of the clip in memory order, widened to uint16.
  std::uint16_t at(std::size_t i) const;
};

// Copies planar uint16 frames into `out` (frames.size() * geometry.raw_bytes() bytes) in the
// geometry's pixel type and the given layout.
void pack_frames(std::span<const Pixels* const> frames, const Geometry& geometry, ClipLayout layout,
                 std::span<std::uint8_t> out);

// A GOP of the opened data: the unit that is decoded, cached, sharded and shuffled.
struct Block {
  std::size_t sequence = 0;  // global sequence index
  std::size_t first_frame = 0;
  std::size_t frame_count = 0;
  std::uint64_t bytes = 0;   // compressed size: what reading this block costs
  // The first block of the group of short sequences this block's sequence is stored in
  // (compressor/chunk_group.hpp), whose chunk holds the group: decoding any block of a group decodes
  // it; the block itself where it is in no group.
  std::size_t unit = 0;
};

struct ReaderOptions {
  std::size_t cache_gops = 16;  // decoded GOPs kept (least recently used go first); at least 1
};

// Random access to the frames of an archive or of a dataset index of several archives (whose
// sequences are numbered shard after shard). Decodes only the GOPs a request needs and keeps the
// most recently used ones; concurrent requests for one GOP decode it once. Thread-safe.
// Damaged data raises DataError naming the archive, sequence and frame; bad arguments raise
// std::out_of_range.
class Reader {
 public:
  explicit Reader(const std::filesystem::path& input, const ReaderOptions& options = {});
  // Over a node-local chunk store's partial copy: never opens the global file. A GOP the store
  // does not hold raises ChunkMissing naming it.
  explicit Reader(std::shared_ptr<const ChunkStore> store, const ReaderOptions& options = {});
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  std::size_t num_sequences() const;
  const std::string& sequence_name(std::size_t sequence) const;
  const Geometry& geometry(std::size_t sequence) const;
  std::size_t num_frames(std::size_t sequence) const;

  // GOPs in order: sequence by sequence, frames in order.
  std::span<const Block> blocks() const;
  // The block holding frame `frame` of `sequence`.
  std::size_t block_of(std::size_t sequence, std::size_t frame) const;

  Clip frame(std::size_t sequence, std::size_t t, ClipLayout layout = ClipLayout::Planar) const;
  Clip clip(std::size_t sequence, std::size_t start, std::size_t length, ClipLayout layout = ClipLayout::Planar) const;

  struct CacheStats {
    std::uint64_t hits = 0, misses = 0;
  };
  CacheStats cache_stats() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tezip
