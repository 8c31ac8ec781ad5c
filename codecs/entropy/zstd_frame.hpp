#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "codecs/buffer_pool.hpp"

namespace tezip::codecs {

// Decompresses exactly one zstd frame whose declared size must lie in [min_size, max_size] (checked
// before anything is allocated) and which must fill `frame` with no trailing bytes. Throws
// CodecError("<what>: ...") otherwise. The bytes are pooled and not zeroed before zstd writes them
// (codecs/buffer_pool.hpp): a pixel chunk's frame is megabytes, each one first-touched pages.
PooledBytes decompress_zstd_frame(std::span<const std::uint8_t> frame, std::size_t min_size, std::size_t max_size,
                                  const char* what);

// One zstd frame of `bytes` at `level`. The compression context is kept per thread and reused:
// a fresh one per call costs its tables' allocation and zeroing (at level 9, several MB) every time.
std::vector<std::uint8_t> compress_zstd_frame(std::span<const std::uint8_t> bytes, int level);
// The same at `level` with the match window of `window_level` (where that is the larger): a fast
// level's estimate of what a slower one may reach, which must see the repeats that the slower
// level's window sees (level 1 looks back 512 KB on a large stream, level 9 4 MB: a residual
// repeated one 640x480 colour frame later was 1.45x the rANS stream at level 1, 0.78x at level 9).
std::vector<std::uint8_t> compress_zstd_frame(std::span<const std::uint8_t> bytes, int level, int window_level);

// The size of compress_zstd_frame(bytes, level), or SIZE_MAX as soon as the output passes `limit`:
// streamed, its output counted and dropped, so that a hopeless candidate costs only the bytes read
// until it is known to lose.
std::size_t zstd_size_within(std::span<const std::uint8_t> bytes, int level, std::size_t limit, int window_level = 0);
// A zstd frame of `bytes` at `level` (streamed: the same parameters as compress_zstd_frame, though
// not always the same bytes), or nothing as soon as its output passes `limit`: where a candidate
// only matters if it is small enough, a loser costs only the bytes read until it is known to lose.
std::optional<std::vector<std::uint8_t>> compress_zstd_frame_within(std::span<const std::uint8_t> bytes, int level,
                                                                    std::size_t limit);

// Whether a pass at level `to` over `bytes` may come below `target` bytes, where a pass at `from`
// gave `from_size`: estimated as from_size times the ratio of the two levels' sizes on a prefix
// (an eighth of the bytes, at least zstd_prefix_min), at an eighth of the pass's cost, and allowed
// zstd_estimate_slack above the target. Streams shorter than four prefixes are always worth a pass
// (the prefix would cost about as much). Where `to` is a slow level (19 costs about 18x level 9),
// this spares the passes that cannot win: on camera residuals level 19 gains 5% over level 9.
inline constexpr std::size_t zstd_prefix_min = std::size_t{1} << 18;
inline constexpr double zstd_estimate_slack = 1.05;
bool zstd_may_reach(std::span<const std::uint8_t> bytes, int from, std::size_t from_size, int to, std::size_t target);
// zstd_may_reach's estimate of a pass at level `to`: from_size times the ratio of the two levels'
// sizes on the prefix (streams shorter than four prefixes: SIZE_MAX, unknown).
std::size_t zstd_estimate(std::span<const std::uint8_t> bytes, int from, std::size_t from_size, int to);

// The same frame streamed: its bytes a buffer at a time, so that a large payload never sits in
// memory whole. The checks of decompress_zstd_frame run in the constructor and in read().
// A frame whose window holds all of it (zstd's streaming decoder would buffer every byte anyway,
// and copy each out once more) is decoded whole in the constructor, straight into a block of the
// buffer pool, and lent out by take_whole() (docs/performance.md, "zstd frames decoded whole").
class ZstdFrameReader {
 public:
  ZstdFrameReader(std::span<const std::uint8_t> frame, std::size_t min_size, std::size_t max_size, const char* what);
  ~ZstdFrameReader();
  ZstdFrameReader(const ZstdFrameReader&) = delete;
  ZstdFrameReader& operator=(const ZstdFrameReader&) = delete;

  // Fills `out` with the next bytes and returns how many: fewer than out.size() only at the end.
  std::size_t read(std::span<std::uint8_t> out);
  // Whether every byte the frame declares was delivered.
  bool at_end() const { return delivered_ == size_; }
  // Throws CodecError unless at_end() and the frame then ends exactly (epilogue, checksum).
  void finish();
  std::uint64_t size() const { return size_; }
  // Whether the frame was decoded whole; then take_whole() lends all its bytes at once and counts
  // them delivered (read() copies from them a buffer at a time).
  bool decoded_whole() const { return !dctx_; }
  std::span<const std::uint8_t> take_whole() {
    delivered_ = size_;
    return {whole_.data(), whole_.size()};
  }

 private:
  struct DCtxFree {
    void operator()(void* d) const;
  };
  std::unique_ptr<void, DCtxFree> dctx_;  // streamed frames only (none: decoded whole)
  std::vector<std::uint8_t, BufferAllocator<std::uint8_t>> whole_;
  std::span<const std::uint8_t> frame_;
  std::size_t in_pos_ = 0;
  std::uint64_t size_ = 0, delivered_ = 0;
  bool ended_ = false;  // zstd reported the end of the frame
  const char* what_;
};

}  // namespace tezip::codecs
