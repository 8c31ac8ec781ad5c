#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "codecs/buffer_pool.hpp"

namespace tezip::codecs {

// Raw LZMA2 (liblzma, the coder of xz, without the .xz container's ~60 bytes of headers), for the
// symbol coder's strongest option (`--coder best`): on the LOCO-I residuals of the rendered castle
// depth maps it is 13% smaller than zstd at level 19 (docs/defaults.md). A frame is
//   u8 log2 of the dictionary size (12..26) | varint decoded size | LZMA2 stream (with its end marker)
// The dictionary is the smallest power of two that holds the input, so that decoding allocates no
// more than the data needs.
// `contexts`: LZMA's literal and position context bits (lc, lp, pb; preset 9e's 3, 0, 2 by default),
// which the LZMA2 stream carries itself, so the decoder needs nothing more.
struct LzmaContexts {
  unsigned lc = 3, lp = 0, pb = 2;
};
std::vector<std::uint8_t> compress_lzma_frame(std::span<const std::uint8_t> bytes, LzmaContexts contexts = {});

// Decompresses one frame whose decoded size must lie in [min_size, max_size] (checked before
// anything is allocated) and which must fill `frame` exactly. Throws CodecError("<what>: ...").
// The bytes are pooled, not zeroed first (as decompress_zstd_frame's).
PooledBytes decompress_lzma_frame(std::span<const std::uint8_t> frame, std::size_t min_size, std::size_t max_size,
                                  const char* what);

}  // namespace tezip::codecs
