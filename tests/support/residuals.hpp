#pragma once
// Test data for the entropy coders: what prediction residuals look like after zigzag mapping.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace tezip::test {

// Laplacian magnitudes (zigzagged) whose scale varies smoothly over the image, like prediction residuals.
inline std::vector<std::uint32_t> laplacian_ranks(std::size_t width, std::size_t height, double scale_mul, unsigned seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> magnitude(1.0);
  std::vector<std::uint32_t> out;
  for (std::size_t y = 0; y < height; ++y) {
    for (std::size_t x = 0; x < width; ++x) {
      const double s = 0.5 + 0.5 * std::sin(x / 40.0) * std::cos(y / 30.0);
      const auto v = static_cast<std::uint32_t>(std::lround(magnitude(rng) * scale_mul * (0.3 + 6 * s * s)));
      out.push_back(v == 0 ? 0 : 2 * v - (rng() & 1));
    }
  }
  return out;
}

inline std::uint64_t alphabet_of(const std::vector<std::uint32_t>& ranks) {
  return ranks.empty() ? 1 : std::uint64_t{*std::max_element(ranks.begin(), ranks.end())} + 1;
}

}  // namespace tezip::test
