#pragma once
// Which instruction set the kernels of codecs/ run. Every SIMD kernel has a portable sibling that
// produces the same bytes; tests force each path and compare.
#include <cstdint>
#include <optional>
#include <string_view>

namespace tezip::codecs {

enum class SimdPath : std::uint8_t { portable, avx2 };

// Whether this CPU (and this build) can run `path`.
bool simd_supported(SimdPath path);
// "portable", "avx2".
const char* simd_name(SimdPath path);
std::optional<SimdPath> parse_simd_path(std::string_view name);

// The path kernels take by default: TEZIP_SIMD (portable, avx2) when set, else the best this CPU
// runs. Read once. A TEZIP_SIMD this CPU cannot run, or one no path has, throws std::runtime_error
// naming it (rather than dying of SIGILL later).
SimdPath simd_path();

}  // namespace tezip::codecs
