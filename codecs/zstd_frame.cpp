#include "codecs/zstd_frame.hpp"

#include <zstd.h>

#include <memory>
#include <new>
#include <stdexcept>

#include <string>

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

}  // namespace

std::vector<std::uint8_t> compress_zstd_frame(std::span<const std::uint8_t> bytes, int level) {
  std::vector<std::uint8_t> packed(ZSTD_compressBound(bytes.size()));
  const std::size_t n = ZSTD_compressCCtx(thread_cctx(), packed.data(), packed.size(), bytes.data(), bytes.size(), level);
  if (ZSTD_isError(n)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(n));
  packed.resize(n);
  return packed;
}

std::vector<std::uint8_t> decompress_zstd_frame(std::span<const std::uint8_t> frame, std::size_t min_size,
                                                std::size_t max_size, const char* what) {
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size < min_size || size > max_size)
    throw CodecError(std::string(what) + ": bad zstd frame header");
  if (ZSTD_findFrameCompressedSize(frame.data(), frame.size()) != frame.size())
    throw CodecError(std::string(what) + ": truncated zstd frame or trailing bytes");
  std::vector<std::uint8_t> bytes(size);
  const std::size_t got = ZSTD_decompressDCtx(thread_dctx(), bytes.data(), bytes.size(), frame.data(), frame.size());
  if (ZSTD_isError(got) || got != bytes.size()) throw CodecError(std::string(what) + ": corrupt zstd frame");
  return bytes;
}

}  // namespace tezip::codecs
