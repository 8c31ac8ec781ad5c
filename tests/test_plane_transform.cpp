#include <catch2/catch.hpp>

#include <random>

#include "codecs/codec_error.hpp"
#include "codecs/plane_transform.hpp"

using namespace tezip::codecs;

TEST_CASE("plane transforms invert exactly, even on extreme values", "[codecs][transform]") {
  std::mt19937 rng(11);
  const std::size_t width = 37, height = 23;
  std::vector<std::int32_t> plane(width * height);
  for (auto& v : plane) v = std::int32_t(rng());
  plane[5] = INT32_MIN;
  plane[6] = INT32_MAX;
  for (auto t : {PlaneTransform::None, PlaneTransform::Left, PlaneTransform::Median}) {
    std::vector<std::int32_t> out(plane.size());
    forward_transform(t, plane, width, out);
    inverse_transform(t, out, width);
    REQUIRE(out == plane);
  }
}

TEST_CASE("plane transforms invert on one row and on one column", "[codecs][transform]") {
  std::mt19937 rng(12);
  for (const auto [width, height] : {std::pair<std::size_t, std::size_t>{1, 9}, {9, 1}, {1, 1}}) {
    std::vector<std::int32_t> plane(width * height);
    for (auto& v : plane) v = std::int32_t(rng());
    for (auto t : {PlaneTransform::Left, PlaneTransform::Median}) {
      std::vector<std::int32_t> out(plane.size());
      forward_transform(t, plane, width, out);
      inverse_transform(t, out, width);
      REQUIRE(out == plane);
    }
  }
}

TEST_CASE("choose_transform picks spatial prediction for smooth planes", "[codecs][transform]") {
  const std::size_t width = 64;
  std::vector<std::int32_t> ramp(width * 64), noise(width * 64);
  std::mt19937 rng(3);
  for (std::size_t i = 0; i < ramp.size(); ++i) {
    ramp[i] = std::int32_t(i % width) * 3 + std::int32_t(i / width) * 2;
    noise[i] = std::int32_t(rng() % 3) - 1;
  }
  CHECK(choose_transform(ramp, width).transform != PlaneTransform::None);
  CHECK(choose_transform(ramp, width).cost < estimate_cost(ramp, width));
  CHECK(choose_transform(noise, width).transform == PlaneTransform::None);
  CHECK(zigzag(-1) == 1);
  CHECK(unzigzag(zigzag(INT32_MIN)) == INT32_MIN);
  std::vector<std::int32_t> bad(10);
  CHECK_THROWS_AS(inverse_transform(PlaneTransform::Left, bad, 3), CodecError);
}
