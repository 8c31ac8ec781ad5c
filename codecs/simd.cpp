#include "codecs/simd.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tezip::codecs {

bool simd_supported(SimdPath path) {
  switch (path) {
    case SimdPath::portable:
      return true;
    case SimdPath::avx2:
#if defined(__x86_64__) || defined(__i386__)
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
#else
      return false;
#endif
    case SimdPath::avx512:
#if defined(__x86_64__) || defined(__i386__)
      return simd_supported(SimdPath::avx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
#else
      return false;
#endif
  }
  return false;
}

std::vector<SimdPath> supported_simd_paths() {
  std::vector<SimdPath> out;
  for (const SimdPath path : {SimdPath::portable, SimdPath::avx2, SimdPath::avx512})
    if (simd_supported(path)) out.push_back(path);
  return out;
}

const char* simd_name(SimdPath path) {
  return path == SimdPath::avx512 ? "avx512" : path == SimdPath::avx2 ? "avx2" : "portable";
}

std::optional<SimdPath> parse_simd_path(std::string_view name) {
  if (name == "portable") return SimdPath::portable;
  if (name == "avx2") return SimdPath::avx2;
  if (name == "avx512") return SimdPath::avx512;
  return std::nullopt;
}

namespace {

SimdPath choose() {
  if (const char* env = std::getenv("TEZIP_SIMD"); env != nullptr && *env != '\0') {
    const auto path = parse_simd_path(env);
    if (!path) throw std::runtime_error(std::string("TEZIP_SIMD=") + env + ": not a kernel path (portable, avx2, avx512)");
    if (!simd_supported(*path)) throw std::runtime_error(std::string("TEZIP_SIMD=") + env + ": this CPU cannot run it");
    return *path;
  }
  for (const SimdPath path : {SimdPath::avx512, SimdPath::avx2})
    if (simd_supported(path)) return path;
  return SimdPath::portable;
}

}  // namespace

SimdPath simd_path() {
  static const SimdPath path = choose();
  return path;
}

}  // namespace tezip::codecs
