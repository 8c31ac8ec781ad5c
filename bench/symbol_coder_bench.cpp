// Micro-benchmark for codecs/symbol_coder: sizes (bits/symbol) and decode speeds of both coders on
// synthetic residual data. Times are thread CPU time, so a busy machine skews them less. Not built by
// default; from the repository root:
//   g++ -std=c++20 -O2 -I. bench/symbol_coder_bench.cpp codecs/rank_remap.cpp codecs/range_coder.cpp
//       codecs/symbol_coder.cpp -lzstd -o symbol_coder_bench
#include <algorithm>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "codecs/symbol_coder.hpp"

using namespace tezip::codecs;

namespace {

std::uint32_t zigzag(int v) { return v >= 0 ? 2u * static_cast<std::uint32_t>(v) : 2u * static_cast<std::uint32_t>(-v) - 1; }

// Smooth moving blobs, a sinusoidal background, a hard-edged moving texture and sensor noise; the
// residual of a previous-frame predictor, optionally quantized with an absolute bound.
std::vector<std::uint32_t> video_residuals(int w, int h, int frames, double noise, int bound, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n01(0, 1);
  std::uniform_real_distribution<double> u(0, 1);
  struct Blob { double x, y, vx, vy, r, a; };
  std::vector<Blob> blobs;
  for (int i = 0; i < 12; ++i) blobs.push_back({u(rng) * w, u(rng) * h, u(rng) * 4 - 2, u(rng) * 4 - 2, 8 + u(rng) * 40, u(rng) * 160 - 80});
  auto render = [&](int t) {
    std::vector<int> img(static_cast<std::size_t>(w * h));
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        double v = 110 + 30 * std::sin(x / 23.0 + t * 0.05) * std::cos(y / 31.0);
        for (auto& b : blobs) {
          const double dx = x - (b.x + b.vx * t), dy = y - (b.y + b.vy * t);
          v += b.a * std::exp(-(dx * dx + dy * dy) / (2 * b.r * b.r));
        }
        if (((x + 2 * t) / 32 + y / 32) % 5 == 0) v += 20;
        v += noise * n01(rng);
        img[static_cast<std::size_t>(y * w + x)] = std::clamp(static_cast<int>(std::lround(v)), 0, 255);
      }
    return img;
  };
  std::vector<std::uint32_t> out;
  auto prev = render(0);
  for (int t = 1; t <= frames; ++t) {
    auto cur = render(t);
    for (std::size_t i = 0; i < cur.size(); ++i) {
      int r = cur[i] - prev[i];
      if (bound > 0) {
        const int q = 2 * bound + 1;
        r = r >= 0 ? (r + bound) / q : -((-r + bound) / q);
      }
      out.push_back(zigzag(r));
    }
    prev = std::move(cur);
  }
  return out;
}

std::vector<std::uint32_t> laplacian(int w, int h, int frames, double scale_mul, unsigned seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> ex(1.0);
  std::vector<std::uint32_t> out;
  for (int t = 0; t < frames; ++t)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const double s = 0.5 + 0.5 * std::sin(x / 40.0 + t) * std::cos(y / 30.0);
        const int v = static_cast<int>(std::lround(ex(rng) * scale_mul * (0.3 + 6 * s * s)));
        out.push_back(zigzag((rng() & 1) ? v : -v));
      }
  return out;
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds_per_decode(const std::vector<std::uint8_t>& bytes, std::size_t width, std::vector<std::uint32_t>& out) {
  double best = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = cpu_seconds();
    decode_symbols(bytes, width, out);
    best = std::min(best, cpu_seconds() - t0);
  }
  return best;
}

}  // namespace

int main() {
  struct Set { std::string name; std::vector<std::uint32_t> symbols; std::size_t width; };
  const std::vector<Set> sets = {
      {"video noise2", video_residuals(512, 512, 8, 2.0, 0, 1), 512},
      {"video noise6", video_residuals(512, 512, 8, 6.0, 0, 2), 512},
      {"video abs2", video_residuals(512, 512, 8, 3.0, 2, 3), 512},
      {"laplace x1", laplacian(512, 512, 8, 1.0, 4), 512},
      {"laplace x30", laplacian(512, 512, 8, 30.0, 5), 512},
  };
  std::printf("%-14s %9s %8s %8s %8s | %10s %10s %10s\n", "data", "symbols", "zstd3", "zstd19", "adaptive",
              "dec zstd", "dec adapt", "enc both");
  for (const auto& set : sets) {
    std::vector<std::uint32_t> out(set.symbols.size());
    const double n = static_cast<double>(set.symbols.size());
    const auto zstd3 = encode_symbols(set.symbols, set.width, {.zstd_level = 3, .allow_adaptive = false});
    const auto zstd19 = encode_symbols(set.symbols, set.width, {.zstd_level = 19, .allow_adaptive = false});
    const double t0 = cpu_seconds();
    SymbolCoderStats stats;
    const auto both = encode_symbols(set.symbols, set.width, {}, &stats);
    const double enc = cpu_seconds() - t0;
    const double dz = seconds_per_decode(zstd3, set.width, out);
    if (out != set.symbols) return 1;
    const double da = stats.chosen == EntropyCoderKind::Adaptive ? seconds_per_decode(both, set.width, out) : 0;
    if (out != set.symbols) return 1;
    std::printf("%-14s %9zu %8.4f %8.4f %8.4f | %8.1f/s %8.1f/s %8.1f/s  (M symbols)\n", set.name.c_str(),
                set.symbols.size(), 8.0 * zstd3.size() / n, 8.0 * zstd19.size() / n, 8.0 * stats.adaptive_bytes / n,
                n / dz / 1e6, da > 0 ? n / da / 1e6 : 0.0, n / enc / 1e6);
  }
  return 0;
}
