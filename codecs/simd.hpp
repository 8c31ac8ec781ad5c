#pragma once
// Which instruction set the kernels of codecs/ run. Every SIMD kernel has a portable sibling that
// produces the same bytes; tests force each path and compare.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tezip::codecs {

// Ordered: each path runs the kernels of the ones before it. avx512 is AVX2 plus AVX-512 F, VL, BW
// and DQ: every AVX2 kernel, and the AVX-512 variant where a kernel has one (the striped rANS
// decoder's).
enum class SimdPath : std::uint8_t { portable, avx2, avx512 };

// Whether this CPU (and this build) can run `path`.
bool simd_supported(SimdPath path);
// Every path this CPU (and this build) runs, portable first: what tests force one by one.
std::vector<SimdPath> supported_simd_paths();
// "portable", "avx2", "avx512".
const char* simd_name(SimdPath path);
std::optional<SimdPath> parse_simd_path(std::string_view name);

// The path kernels take by default: TEZIP_SIMD (portable, avx2, avx512) when set, else the best this CPU
// runs. Read once. A TEZIP_SIMD this CPU cannot run, or one no path has, throws std::runtime_error
// naming it (rather than dying of SIGILL later).
SimdPath simd_path();

}  // namespace tezip::codecs
