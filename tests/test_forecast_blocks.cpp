// Per-block forecast choice (codecs/transform/forecast_blocks.hpp): the encoder's pick is the closest source,
// and the decoder's forecast built from the map is the encoder's.
#include <catch2/catch.hpp>

#include <random>

#include "codecs/transform/forecast_blocks.hpp"

using namespace tezip::codecs;

TEST_CASE("each block takes the forecast source closest to the plane", "[forecast_blocks]") {
  const std::uint32_t width = 40, height = 20;  // partial blocks on the right and bottom edges
  std::mt19937 random(3);
  std::vector<std::uint16_t> plane(width * height), primary(plane.size()), fallback(plane.size());
  for (auto& p : plane) p = std::uint16_t(100 + random() % 50);
  const std::size_t blocks = forecast_block_count(width, height);
  REQUIRE(blocks == 3 * 2);
  // Block column 0: the primary is exact; column 1: the fallback is; column 2: both off by +-6, so
  // their mean is exact.
  for (std::uint32_t y = 0; y < height; ++y)
    for (std::uint32_t x = 0; x < width; ++x) {
      const std::size_t i = y * width + x;
      const std::uint32_t column = x / kForecastBlock;
      primary[i] = column == 0 ? plane[i] : column == 1 ? std::uint16_t(plane[i] + 9) : std::uint16_t(plane[i] + 6);
      fallback[i] = column == 1 ? plane[i] : column == 0 ? std::uint16_t(plane[i] + 9) : std::uint16_t(plane[i] - 6);
    }
  std::vector<std::uint32_t> map(blocks);
  REQUIRE(choose_forecast_blocks(plane, primary, fallback, width, map));
  CHECK(map == std::vector<std::uint32_t>{0, 1, 2, 0, 1, 2});
  std::vector<std::uint16_t> forecast(plane.size());
  build_forecast(map, primary, fallback, width, forecast);
  CHECK(forecast == plane);

  // Where the primary is best everywhere, nothing is mapped.
  REQUIRE_FALSE(choose_forecast_blocks(plane, plane, fallback, width, map));
  CHECK(std::all_of(map.begin(), map.end(), [](auto m) { return m == 0; }));
}

TEST_CASE("the mean of two forecasts rounds half up and never overflows 16 bits", "[forecast_blocks]") {
  const std::vector<std::uint32_t> map = {2};
  const std::vector<std::uint16_t> a = {65535, 0, 3}, b = {65535, 1, 4};
  std::vector<std::uint16_t> out(3);
  build_forecast(map, a, b, 3, out);
  CHECK(out == std::vector<std::uint16_t>{65535, 1, 4});
}
