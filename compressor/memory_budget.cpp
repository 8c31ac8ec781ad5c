#include "compressor/memory_budget.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

namespace tezip {
namespace {

constexpr std::uint64_t kUnknown = std::numeric_limits<std::uint64_t>::max();

// A whole number from the start of `text`, or kUnknown ("max", empty, garbage).
std::uint64_t number_of(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return kUnknown;
  try {
    return std::stoull(text);
  } catch (...) {
    return kUnknown;
  }
}

std::uint64_t first_line_number(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return kUnknown;
  return number_of(line);
}

std::uint64_t meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key, unit;
    std::uint64_t kib = 0;
    if (fields >> key >> kib >> unit && key == "MemAvailable:" && unit == "kB") return kib * 1024;
  }
  return kUnknown;
}

// Where this process's cgroup (v2, the unified hierarchy) sets a limit: the limit less its usage.
std::uint64_t cgroup_available() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string dir = "/sys/fs/cgroup" + line.substr(3);
    const std::uint64_t limit = first_line_number((dir + "/memory.max").c_str());
    const std::uint64_t used = first_line_number((dir + "/memory.current").c_str());
    if (limit == kUnknown || used == kUnknown) return kUnknown;
    return limit > used ? limit - used : 0;
  }
  return kUnknown;
}

}  // namespace

std::uint64_t gop_memory_bytes(const Geometry& geometry, std::uint64_t frames) {
  return kGopMemoryFactor * 2 * std::uint64_t(geometry.pixel_count()) * frames;
}

std::uint64_t available_memory_bytes() {
  if (const char* v = std::getenv("TEZIP_MEMORY_MB")) {
    const std::uint64_t mib = number_of(v);
    if (mib != kUnknown && mib <= (kUnknown >> 20)) return mib << 20;
  }
  return std::min(meminfo_available(), cgroup_available());
}

std::size_t batches_in_flight(unsigned threads, std::uint64_t batch_bytes, std::uint64_t available) {
  const std::size_t wanted = 2 * std::size_t(std::max(1u, threads));
  if (batch_bytes == 0 || available == kUnknown) return wanted;
  return std::size_t(std::clamp<std::uint64_t>(available / batch_bytes, 1, wanted));
}

}  // namespace tezip
