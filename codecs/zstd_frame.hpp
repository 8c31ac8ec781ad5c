#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tezip::codecs {

// Decompresses exactly one zstd frame whose declared size must lie in [min_size, max_size] (checked
// before anything is allocated) and which must fill `frame` with no trailing bytes. Throws
// CodecError("<what>: ...") otherwise.
std::vector<std::uint8_t> decompress_zstd_frame(std::span<const std::uint8_t> frame, std::size_t min_size,
                                                std::size_t max_size, const char* what);

// One zstd frame of `bytes` at `level`. The compression context is kept per thread and reused:
// a fresh one per call costs its tables' allocation and zeroing (at level 9, several MB) every time.
std::vector<std::uint8_t> compress_zstd_frame(std::span<const std::uint8_t> bytes, int level);

}  // namespace tezip::codecs
