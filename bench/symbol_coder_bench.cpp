// Micro-benchmark for codecs/entropy/symbol_coder: sizes (bits/symbol) and decode speeds of the three coders
// on synthetic residual data. Each coder's stream is built and decoded through decode_symbols (so the
// rank -> symbol remap is included) whether or not encode_symbols would have chosen it. Times are
// thread CPU time, so a busy machine skews them less. Not built by default; from the repository root:
//   g++ -std=c++20 -O2 -I. bench/symbol_coder_bench.cpp codecs/entropy/rank_remap.cpp codecs/entropy/range_coder.cpp
//       codecs/entropy/rans_coder.cpp codecs/entropy/symbol_coder.cpp -lzstd -o symbol_coder_bench
#include <algorithm>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "codecs/entropy/range_coder.hpp"
#include "codecs/entropy/rank_remap.hpp"
#include "codecs/entropy/rans_coder.hpp"
#include "codecs/entropy/symbol_coder.hpp"

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

// The stream encode_symbols writes when it picks `kind` (Rans or Adaptive), built whatever it would pick.
std::vector<std::uint8_t> forced_stream(const std::vector<std::uint32_t>& symbols, std::size_t width, EntropyCoderKind kind) {
  const RankRemap remap = rank_remap(symbols);
  std::vector<std::uint8_t> out{static_cast<std::uint8_t>(kind)};
  append_varint(symbols.size(), out);
  append_rank_table(remap.rank_to_symbol, out);
  const auto payload = kind == EntropyCoderKind::Rans ? encode_rans(remap.ranks, width, remap.rank_to_symbol.size())
                                                      : encode_adaptive(remap.ranks, width, remap.rank_to_symbol.size());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
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
  std::printf("%-12s %8s %7s %7s %7s %7s | %8s %8s %8s | %8s %8s  (bits/symbol | M symbols/s)\n", "data", "symbols",
              "zstd3", "zstd19", "rans", "adapt", "dec zstd", "dec rans", "dec adpt", "enc rans", "enc all");
  for (const auto& set : sets) {
    std::vector<std::uint32_t> out(set.symbols.size());
    const double n = static_cast<double>(set.symbols.size());
    const SymbolCoderOptions zstd_only{.zstd_level = 3, .allow_adaptive = false, .allow_rans = false};
    const auto zstd3 = encode_symbols(set.symbols, set.width, zstd_only);
    const auto zstd19 = encode_symbols(set.symbols, set.width, {.zstd_level = 19, .allow_adaptive = false, .allow_rans = false});
    double t0 = cpu_seconds();
    const auto rans = forced_stream(set.symbols, set.width, EntropyCoderKind::Rans);
    const double enc_rans = cpu_seconds() - t0;
    const auto adaptive = forced_stream(set.symbols, set.width, EntropyCoderKind::Adaptive);
    t0 = cpu_seconds();
    encode_symbols(set.symbols, set.width, {});
    const double enc_all = cpu_seconds() - t0;
    const double dz = seconds_per_decode(zstd3, set.width, out);
    if (out != set.symbols) return 1;
    const double dr = seconds_per_decode(rans, set.width, out);
    if (out != set.symbols) return 1;
    const double da = seconds_per_decode(adaptive, set.width, out);
    if (out != set.symbols) return 1;
    std::printf("%-12s %8zu %7.4f %7.4f %7.4f %7.4f | %8.1f %8.1f %8.1f | %8.1f %8.1f\n", set.name.c_str(),
                set.symbols.size(), 8.0 * zstd3.size() / n, 8.0 * zstd19.size() / n, 8.0 * rans.size() / n,
                8.0 * adaptive.size() / n, n / dz / 1e6, n / dr / 1e6, n / da / 1e6, n / enc_rans / 1e6, n / enc_all / 1e6);
  }
  return 0;
}
