#include "codecs/entropy/zstd_frame.hpp"

// ZSTD_getCParams (a level's parameters for a size) is in the advanced API; libzstd exports it.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>

#include <string>

#include "codecs/buffer_pool.hpp"
#include "codecs/codec_error.hpp"

namespace tezip::codecs {

namespace {

struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

ZSTD_CCtx* thread_cctx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxFree> cctx(ZSTD_createCCtx());
  if (!cctx) throw std::bad_alloc();
  return cctx.get();
}

ZSTD_DCtx* thread_dctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
  if (!dctx) throw std::bad_alloc();
  return dctx.get();
}

// A streaming context's memory, its window buffer above all (up to the frame's size: 7 MB for a
// large GOP's symbols), from the buffer pool, so that the next chunk's context reuses the pages the
// last one faulted in instead of mapping fresh ones (docs/performance.md, "zstd frames decoded
// whole"). zstd's free gets only the address: a header before each block keeps its size.
constexpr std::size_t kBlockHeader = 64;

void* pool_alloc(void*, std::size_t size) noexcept {
  const std::size_t bytes = size + kBlockHeader;
  void* base = nullptr;
  try {
    base = bytes >= kPooledBytes ? pooled_acquire(bytes) : std::malloc(bytes);
  } catch (const std::bad_alloc&) {
    return nullptr;  // zstd reports it as a failed allocation
  }
  if (!base) return nullptr;
  *static_cast<std::size_t*>(base) = bytes;
  return static_cast<std::uint8_t*>(base) + kBlockHeader;
}

void pool_free(void*, void* address) noexcept {
  if (!address) return;
  void* base = static_cast<std::uint8_t*>(address) - kBlockHeader;
  const std::size_t bytes = *static_cast<std::size_t*>(base);
  if (bytes >= kPooledBytes) {
    pooled_release(base, bytes);
  } else {
    std::free(base);
  }
}

// One-shot compression's output: zstd writes it into a buffer of its bound (the input's size and a
// little more), pooled and not zeroed, and only the bytes written are copied out (a zeroed vector of
// the bound was 1.3% of encoding gray vtest: every stream's probe).
template <class Compress>
std::vector<std::uint8_t> compressed(std::span<const std::uint8_t> bytes, Compress compress) {
  std::vector<std::uint8_t, BufferAllocator<std::uint8_t>> scratch(ZSTD_compressBound(bytes.size()));
  const std::size_t n = compress(scratch.data(), scratch.size());
  if (ZSTD_isError(n)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(n));
  return std::vector<std::uint8_t>(scratch.begin(), scratch.begin() + std::ptrdiff_t(n));
}

}  // namespace

std::vector<std::uint8_t> compress_zstd_frame(std::span<const std::uint8_t> bytes, int level) {
  return compressed(bytes, [&](std::uint8_t* out, std::size_t capacity) {
    return ZSTD_compressCCtx(thread_cctx(), out, capacity, bytes.data(), bytes.size(), level);
  });
}

namespace {

// The window of `window_level` on `bytes`, where it is larger than that of `level` (0: none).
int wider_window(std::span<const std::uint8_t> bytes, int level, int window_level) {
  if (window_level <= 0) return 0;
  const unsigned own = ZSTD_getCParams(level, bytes.size(), 0).windowLog;
  const unsigned wider = ZSTD_getCParams(window_level, bytes.size(), 0).windowLog;
  return wider > own ? int(wider) : 0;
}

// The thread's context set to `level` and, where window_log > 0, that window; nothing else kept
// from its last use.
ZSTD_CCtx* configured_cctx(int level, int window_log) {
  ZSTD_CCtx* cctx = thread_cctx();
  ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  if (window_log > 0) ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, window_log);
  return cctx;
}

}  // namespace

std::vector<std::uint8_t> compress_zstd_frame(std::span<const std::uint8_t> bytes, int level, int window_level) {
  const int window_log = wider_window(bytes, level, window_level);
  if (window_log == 0) return compress_zstd_frame(bytes, level);
  ZSTD_CCtx* cctx = configured_cctx(level, window_log);
  return compressed(bytes, [&](std::uint8_t* out, std::size_t capacity) {
    return ZSTD_compress2(cctx, out, capacity, bytes.data(), bytes.size());
  });
}

namespace {

// Compresses `bytes` at `level` as a stream, handing each piece of output to `sink`, and gives up
// (returns false) as soon as more than `limit` bytes came out. The parameters are those of the
// one-shot call (the size is pledged).
template <class Sink>
bool compress_streamed(std::span<const std::uint8_t> bytes, int level, std::size_t limit, Sink&& sink,
                       int window_log = 0) {
  ZSTD_CCtx* cctx = configured_cctx(level, window_log);
  ZSTD_CCtx_setPledgedSrcSize(cctx, bytes.size());
  std::vector<std::uint8_t> scratch(ZSTD_CStreamOutSize());
  constexpr std::size_t kPiece = 1 << 17;
  std::size_t produced = 0;
  for (std::size_t pos = 0;;) {
    const std::size_t end = std::min(bytes.size(), pos + kPiece);
    const ZSTD_EndDirective mode = end == bytes.size() ? ZSTD_e_end : ZSTD_e_continue;
    ZSTD_inBuffer in{bytes.data(), end, pos};
    std::size_t left = 0;
    do {
      ZSTD_outBuffer out{scratch.data(), scratch.size(), 0};
      left = ZSTD_compressStream2(cctx, &out, &in, mode);
      if (ZSTD_isError(left)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(left));
      produced += out.pos;
      if (produced > limit) {
        ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
        return false;
      }
      sink(std::span<const std::uint8_t>(scratch.data(), out.pos));
    } while (mode == ZSTD_e_end ? left != 0 : in.pos < in.size);
    pos = end;
    if (mode == ZSTD_e_end) return true;
  }
}

}  // namespace

std::size_t zstd_size_within(std::span<const std::uint8_t> bytes, int level, std::size_t limit, int window_level) {
  std::size_t size = 0;
  return compress_streamed(
             bytes, level, limit, [&](std::span<const std::uint8_t> piece) { size += piece.size(); },
             wider_window(bytes, level, window_level))
             ? size
             : SIZE_MAX;
}

std::optional<std::vector<std::uint8_t>> compress_zstd_frame_within(std::span<const std::uint8_t> bytes, int level,
                                                                    std::size_t limit) {
  std::vector<std::uint8_t> frame;
  if (!compress_streamed(bytes, level, limit,
                         [&](std::span<const std::uint8_t> piece) { frame.insert(frame.end(), piece.begin(), piece.end()); }))
    return std::nullopt;
  return frame;
}

std::size_t zstd_estimate(std::span<const std::uint8_t> bytes, int from, std::size_t from_size, int to) {
  if (bytes.size() < 4 * zstd_prefix_min) return SIZE_MAX;
  const auto prefix = bytes.first(std::max(bytes.size() / 8, zstd_prefix_min));
  const double ratio = double(zstd_size_within(prefix, to, SIZE_MAX)) /
                       double(std::max<std::size_t>(zstd_size_within(prefix, from, SIZE_MAX), 1));
  return std::size_t(double(from_size) * ratio);
}

bool zstd_may_reach(std::span<const std::uint8_t> bytes, int from, std::size_t from_size, int to, std::size_t target) {
  const std::size_t estimate = zstd_estimate(bytes, from, from_size, to);
  return estimate == SIZE_MAX || double(estimate) < zstd_estimate_slack * double(target);
}

PooledBytes decompress_zstd_frame(std::span<const std::uint8_t> frame, std::size_t min_size, std::size_t max_size,
                                  const char* what) {
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size < min_size || size > max_size)
    throw CodecError(std::string(what) + ": bad zstd frame header");
  if (ZSTD_findFrameCompressedSize(frame.data(), frame.size()) != frame.size())
    throw CodecError(std::string(what) + ": truncated zstd frame or trailing bytes");
  PooledBytes bytes(size);
  const std::size_t got = ZSTD_decompressDCtx(thread_dctx(), bytes.data(), bytes.size(), frame.data(), frame.size());
  if (ZSTD_isError(got) || got != bytes.size()) throw CodecError(std::string(what) + ": corrupt zstd frame");
  return bytes;
}

void ZstdFrameReader::DCtxFree::operator()(void* d) const { ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(d)); }

ZstdFrameReader::ZstdFrameReader(std::span<const std::uint8_t> frame, std::size_t min_size, std::size_t max_size,
                                 const char* what)
    : frame_(frame), what_(what) {
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size < min_size || size > max_size)
    throw CodecError(std::string(what) + ": bad zstd frame header");
  if (ZSTD_findFrameCompressedSize(frame.data(), frame.size()) != frame.size())
    throw CodecError(std::string(what) + ": truncated zstd frame or trailing bytes");
  size_ = size;
  ZSTD_frameHeader header{};
  if (ZSTD_getFrameHeader(&header, frame.data(), frame.size()) != 0) throw CodecError(std::string(what) + ": bad zstd frame header");
  if (header.windowSize >= size) {
    whole_.resize(size);
    const std::size_t got = ZSTD_decompressDCtx(thread_dctx(), whole_.data(), whole_.size(), frame.data(), frame.size());
    if (ZSTD_isError(got) || got != size) throw CodecError(std::string(what) + ": corrupt zstd frame");
    in_pos_ = frame.size();
    ended_ = true;
    return;
  }
  // Its own context: several readers of one thread stream at once (one per GOP of a batch).
  dctx_.reset(ZSTD_createDCtx_advanced(ZSTD_customMem{pool_alloc, pool_free, nullptr}));
  if (!dctx_) throw std::bad_alloc();
}

ZstdFrameReader::~ZstdFrameReader() = default;

std::size_t ZstdFrameReader::read(std::span<std::uint8_t> out) {
  const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(out.size(), size_ - delivered_));
  if (!dctx_) {  // decoded whole
    std::copy_n(whole_.begin() + static_cast<std::ptrdiff_t>(delivered_), want, out.begin());
    delivered_ += want;
    return want;
  }
  ZSTD_outBuffer o{out.data(), want, 0};
  while (o.pos < o.size) {
    ZSTD_inBuffer in{frame_.data(), frame_.size(), in_pos_};
    const std::size_t out_before = o.pos;
    const std::size_t r = ZSTD_decompressStream(static_cast<ZSTD_DCtx*>(dctx_.get()), &o, &in);
    const bool stuck = in.pos == in_pos_ && o.pos == out_before;
    in_pos_ = in.pos;
    if (ZSTD_isError(r)) throw CodecError(std::string(what_) + ": corrupt zstd frame");
    ended_ = r == 0;
    if (ended_ && o.pos < o.size) throw CodecError(std::string(what_) + ": corrupt zstd frame (shorter than declared)");
    if (stuck) throw CodecError(std::string(what_) + ": truncated zstd frame");
  }
  delivered_ += o.pos;
  return o.pos;
}

void ZstdFrameReader::finish() {
  if (!at_end()) throw CodecError(std::string(what_) + ": frame not read to its end");
  std::uint8_t extra = 0;
  ZSTD_outBuffer o{&extra, 1, 0};
  while (!ended_) {
    ZSTD_inBuffer in{frame_.data(), frame_.size(), in_pos_};
    const std::size_t r = ZSTD_decompressStream(static_cast<ZSTD_DCtx*>(dctx_.get()), &o, &in);
    const bool progress = in.pos != in_pos_;
    in_pos_ = in.pos;
    if (ZSTD_isError(r) || o.pos != 0) throw CodecError(std::string(what_) + ": corrupt zstd frame");
    ended_ = r == 0;
    if (!ended_ && !progress) throw CodecError(std::string(what_) + ": truncated zstd frame");
  }
  if (in_pos_ != frame_.size()) throw CodecError(std::string(what_) + ": trailing bytes after the zstd frame");
}

}  // namespace tezip::codecs
