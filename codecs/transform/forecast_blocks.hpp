#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace tezip::codecs {

// Per-block choice of forecast: where a learned forecast misses (noise it smooths away, a region
// it has not learned), the previous frame or the mean of both may be closer. The encoder picks,
// per kForecastBlock x kForecastBlock block, the candidate with the smallest sum of absolute
// differences to the plane; the map is stored, and both sides build the same forecast from it.
inline constexpr std::uint32_t kForecastBlock = 16;
enum class ForecastSource : std::uint8_t { Primary = 0, Fallback = 1, Mean = 2 };
inline constexpr std::uint32_t kForecastSources = 3;

std::size_t forecast_block_count(std::uint32_t width, std::uint32_t height);

// Fills `map` (forecast_block_count entries) and returns whether any block prefers another source
// than the primary forecast.
bool choose_forecast_blocks(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> primary,
                            std::span<const std::uint16_t> fallback, std::uint32_t width, std::span<std::uint32_t> map);

// The forecast the map describes. `map` entries must be < kForecastSources (checked by the caller).
void build_forecast(std::span<const std::uint32_t> map, std::span<const std::uint16_t> primary,
                    std::span<const std::uint16_t> fallback, std::uint32_t width, std::span<std::uint16_t> forecast);

}  // namespace tezip::codecs
