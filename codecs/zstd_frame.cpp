#include "codecs/zstd_frame.hpp"

#include <zstd.h>

#include <string>

#include "codecs/codec_error.hpp"

namespace tezip::codecs {

std::vector<std::uint8_t> decompress_zstd_frame(std::span<const std::uint8_t> frame, std::size_t min_size,
                                                std::size_t max_size, const char* what) {
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size < min_size || size > max_size)
    throw CodecError(std::string(what) + ": bad zstd frame header");
  if (ZSTD_findFrameCompressedSize(frame.data(), frame.size()) != frame.size())
    throw CodecError(std::string(what) + ": truncated zstd frame or trailing bytes");
  std::vector<std::uint8_t> bytes(size);
  const std::size_t got = ZSTD_decompress(bytes.data(), bytes.size(), frame.data(), frame.size());
  if (ZSTD_isError(got) || got != bytes.size()) throw CodecError(std::string(what) + ": corrupt zstd frame");
  return bytes;
}

}  // namespace tezip::codecs
