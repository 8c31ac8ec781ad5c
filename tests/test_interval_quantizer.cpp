#include <catch2/catch.hpp>

#include <random>

#include "codecs/codec_error.hpp"
#include "codecs/quantize/interval_quantizer.hpp"

using namespace tezip::codecs;

TEST_CASE("interval quantizer holds uniform and pointwise bounds, non-integer ones too", "[codecs][quantizer]") {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 4);
  std::vector<std::uint16_t> x(5000), f(5000);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = std::uint16_t(std::clamp(128 + 100 * std::sin(i * 0.01) + noise(rng), 0.0, 255.0));
    f[i] = std::uint16_t(std::clamp(x[i] + noise(rng), 0.0, 255.0));
  }
  for (std::uint32_t e : {0u, 1u, 2u, 5u}) {
    IntervalRuns runs;
    std::vector<std::uint16_t> recon(x.size()), decoded(x.size());
    interval_quantize(x, f, PlaneBound{e, 0, 255}, runs, recon);
    interval_dequantize(runs.values, runs.lengths, f, 255, decoded);
    REQUIRE(decoded == recon);
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(std::abs(int(recon[i]) - int(x[i])) <= int(e));
    if (e > 0) CHECK(runs.values.size() < x.size());
  }
  for (double rel : {0.01, 0.05, 0.3}) {
    IntervalRuns runs;
    std::vector<std::uint16_t> recon(x.size()), decoded(x.size());
    interval_quantize(x, f, PlaneBound{0, rel, 255}, runs, recon);
    interval_dequantize(runs.values, runs.lengths, f, 255, decoded);
    REQUIRE(decoded == recon);
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(std::abs(double(recon[i]) - double(x[i])) <= rel * x[i]);
  }
}

TEST_CASE("interval runs that do not cover the plane are rejected", "[codecs][quantizer]") {
  std::vector<std::uint16_t> f(10, 5), out(10);
  std::vector<std::int32_t> values = {1, 2};
  CHECK_THROWS_AS(interval_dequantize(values, std::vector<std::uint32_t>{4, 5}, f, 255, out), CodecError);
  CHECK_THROWS_AS(interval_dequantize(values, std::vector<std::uint32_t>{4, 7}, f, 255, out), CodecError);
  CHECK_THROWS_AS(interval_dequantize(values, std::vector<std::uint32_t>{0, 10}, f, 255, out), CodecError);
  CHECK_NOTHROW(interval_dequantize(values, std::vector<std::uint32_t>{4, 6}, f, 255, out));
}
