// The residual forecast (PredNetOptions::residual): the network corrects the last frame, so the
// exact engine with a zero correction forecasts the previous frame exactly, at 8 and 16 bits, and
// the options' JSON of a frame model is what it was. Runs in the torch-free build too.
#include <catch2/catch.hpp>

#include <random>
#include <span>
#include <string>
#include <vector>

#include "predictor/model_file.hpp"
#include "predictor/prednet_exact.hpp"

namespace tezip {

TEST_CASE("a residual PredNet with a zero correction forecasts the previous frame exactly", "[residual][exact]") {
  PredNetOptions options;
  options.a_channels = {1, 4, 8};
  options.residual = true;
  REQUIRE(PredNetOptions::from_json(options.to_json()).residual);
  CHECK(options.to_json().find("residual") != std::string::npos);
  PredNetOptions frame = options;
  frame.residual = false;
  CHECK(frame.to_json().find("forecast") == std::string::npos);  // older model files are unchanged
  std::mt19937 rng(5);
  std::vector<WeightTensor> weights;
  for (const auto& p : options.parameters()) {
    std::size_t n = 1;
    for (auto d : p.shape) n *= std::size_t(d);
    WeightTensor t{p.name, p.shape, std::vector<float>(n)};
    for (auto& v : t.values) v = p.name.rfind("ahat0", 0) == 0 ? 0.0f : std::uniform_real_distribution<float>(-0.3f, 0.3f)(rng);
    weights.push_back(std::move(t));
  }
  const auto engine = make_exact_engine(options, weights);
  for (const std::uint32_t max : {255u, 1023u, 65535u}) {
    INFO("max_value " << max);
    auto state = engine->initial_state(1, 16, 24);
    PredNetEngineState* states[] = {state.get()};
    std::vector<std::int32_t> forecast(16 * 24);
    std::span<std::int32_t> out[] = {forecast};
    engine->predict(states, max, out);
    for (int t = 0; t < 4; ++t) {
      std::vector<std::int32_t> frame_pixels(16 * 24);
      for (auto& v : frame_pixels) v = std::int32_t(std::uniform_int_distribution<std::uint32_t>(0, max)(rng));
      std::span<const std::int32_t> in[] = {frame_pixels};
      engine->correct(states, in, max);
      engine->predict(states, max, out);
      CHECK(forecast == frame_pixels);
    }
  }
  // A non-zero correction moves it.
  for (auto& t : weights)
    if (t.name == "ahat0.bias") t.values[0] = 0.25f;
  const auto moved = make_exact_engine(options, weights);
  auto state = moved->initial_state(1, 8, 8);
  PredNetEngineState* states[] = {state.get()};
  std::vector<std::int32_t> frame_pixels(64, 100), forecast(64);
  std::span<std::int32_t> out[] = {forecast};
  moved->predict(states, 255, out);
  std::span<const std::int32_t> in[] = {frame_pixels};
  moved->correct(states, in, 255);
  moved->predict(states, 255, out);
  for (auto v : forecast) CHECK(v == 164);  // 100 + round(0.25 * 255)
}

}  // namespace tezip
