#include "codecs/transform/forecast_blocks.hpp"

#include <cstdlib>

namespace tezip::codecs {
namespace {

std::uint16_t candidate(std::uint32_t source, std::uint16_t primary, std::uint16_t fallback) {
  switch (source) {
    case 1: return fallback;
    case 2: return std::uint16_t((std::uint32_t(primary) + fallback + 1) >> 1);
    default: return primary;
  }
}

}  // namespace

std::size_t forecast_block_count(std::uint32_t width, std::uint32_t height) {
  return std::size_t((width + kForecastBlock - 1) / kForecastBlock) * ((height + kForecastBlock - 1) / kForecastBlock);
}

bool choose_forecast_blocks(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> primary,
                            std::span<const std::uint16_t> fallback, std::uint32_t width, std::span<std::uint32_t> map) {
  const std::uint32_t height = width ? std::uint32_t(plane.size() / width) : 0;
  const std::uint32_t blocks_x = (width + kForecastBlock - 1) / kForecastBlock;
  bool any = false;
  for (std::uint32_t by = 0; by * kForecastBlock < height; ++by)
    for (std::uint32_t bx = 0; bx < blocks_x; ++bx) {
      std::uint64_t cost[kForecastSources] = {};
      for (std::uint32_t y = by * kForecastBlock; y < std::min(height, (by + 1) * kForecastBlock); ++y)
        for (std::uint32_t x = bx * kForecastBlock; x < std::min(width, (bx + 1) * kForecastBlock); ++x) {
          const std::size_t i = std::size_t(y) * width + x;
          for (std::uint32_t s = 0; s < kForecastSources; ++s)
            cost[s] += std::uint64_t(std::abs(int(plane[i]) - int(candidate(s, primary[i], fallback[i]))));
        }
      std::uint32_t best = 0;
      for (std::uint32_t s = 1; s < kForecastSources; ++s)
        if (cost[s] < cost[best]) best = s;
      map[std::size_t(by) * blocks_x + bx] = best;
      any |= best != 0;
    }
  return any;
}

void build_forecast(std::span<const std::uint32_t> map, std::span<const std::uint16_t> primary,
                    std::span<const std::uint16_t> fallback, std::uint32_t width, std::span<std::uint16_t> forecast) {
  const std::uint32_t blocks_x = (width + kForecastBlock - 1) / kForecastBlock;
  for (std::size_t i = 0; i < forecast.size(); ++i) {
    const std::size_t y = i / width, x = i % width;
    forecast[i] = candidate(map[(y / kForecastBlock) * blocks_x + x / kForecastBlock], primary[i], fallback[i]);
  }
}

}  // namespace tezip::codecs
