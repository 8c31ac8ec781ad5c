// The exact PredNet engine, where libtorch is there: the core's torch-free engine
// (predictor/prednet_exact.cpp) against the engine it replaced (the learned module's, on libtorch
// tensors, kept as tests/support/legacy_exact_engine.*), byte for byte on real frames; and the exact
// engine's closeness to the float engine. The kernels and golden hashes are tested without torch in
// tests/test_exact_engine.cpp.
// Torch before Catch: glog (through torch) defines a CHECK of its own; these tests use REQUIRE.
#include "predictor/learned/module_api.hpp"
#include "predictor/learned/prednet.hpp"
#include "predictor/model_file.hpp"
#include "predictor/prednet_exact.hpp"
#include "support/legacy_exact_engine.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "support/exact_frames.hpp"

namespace fs = std::filesystem;
using namespace tezip;

namespace {

const fs::path kShippedModel = fs::path(TEZIP_SOURCE_DIR) / "models/prednet-small.tzm";

PredNet random_net(std::vector<int> a_channels, std::uint64_t seed) {
  torch::manual_seed(seed);
  PredNetOptions o;
  o.a_channels = std::move(a_channels);
  PredNet net(o);
  net->eval();
  return net;
}

// An untrained network forecasts 0 everywhere (relu); lifting the forecast to mid-gray and
// amplifying R_0's say makes every layer's state matter.
PredNet lifted_net(std::vector<int> a_channels, std::uint64_t seed) {
  auto net = random_net(std::move(a_channels), seed);
  torch::NoGradGuard no_grad;
  net->ahat[0]->bias.fill_(0.5);
  net->ahat[0]->weight.mul_(4.0);
  return net;
}

// The model file of a network, as the core reads it.
ModelFile model_of(PredNet& net) { return parse_model(make_model_file(net, "{}").serialize(), "in memory"); }

// Frames of `samples` sequences [samples][C][H][W], from gray frames: sample s is frame t + 3 s
// (a different moment of the same scene), every value scaled to 0..max.
std::vector<std::vector<std::int32_t>> stacked(const test::GrayFrames& gray, int samples, std::uint32_t max, std::size_t steps) {
  std::vector<std::vector<std::int32_t>> out;
  for (std::size_t t = 0; t < steps; ++t) {
    std::vector<std::int32_t> f;
    for (int s = 0; s < samples; ++s) {
      const auto& src = gray.frames.at(std::min(gray.frames.size() - 1, t + 3 * std::size_t(s)));
      for (auto v : src) f.push_back(std::int32_t(std::int64_t(v) * max / 255));
    }
    out.push_back(std::move(f));
  }
  return out;
}

// The old engine over the same frames: int32 [samples, 1, H, W] tensors, one state.
std::vector<std::vector<std::int32_t>> run_legacy(const legacy_exact::Engine& engine,
                                                  const std::vector<std::vector<std::int32_t>>& frames, int samples,
                                                  int height, int width, std::uint32_t max_value) {
  auto state = engine.initial_state(samples, height, width);
  std::vector<std::vector<std::int32_t>> out;
  for (std::size_t t = 0; t < frames.size(); ++t) {
    const auto forecast = engine.predict(state, max_value).contiguous();
    if (t > 0) out.emplace_back(forecast.data_ptr<std::int32_t>(), forecast.data_ptr<std::int32_t>() + forecast.numel());
    auto frame = torch::from_blob(const_cast<std::int32_t*>(frames[t].data()), {samples, 1, height, width}, torch::kInt32);
    engine.correct(state, frame.clone(), max_value);
  }
  return out;
}

std::vector<exact::Kernel> kernels() { return exact::supported_kernels(); }

// The first frame where two forecast runs differ, for the failure message.
std::string first_difference(const std::vector<std::vector<std::int32_t>>& a, const std::vector<std::vector<std::int32_t>>& b) {
  if (a.size() != b.size()) return "forecast counts differ";
  for (std::size_t t = 0; t < a.size(); ++t)
    if (a[t] != b[t]) {
      std::size_t n = 0;
      for (std::size_t i = 0; i < a[t].size(); ++i) n += a[t][i] != b[t][i];
      return "forecast " + std::to_string(t + 1) + ": " + std::to_string(n) + " values differ";
    }
  return "none";
}

void require_same(const PredNet& net, const std::vector<std::vector<std::int32_t>>& frames, int samples, int height,
                  int width, std::uint32_t max_value) {
  auto copy = net;
  const auto old_engine = legacy_exact::make_engine(net);
  const auto expected = run_legacy(*old_engine, frames, samples, height, width, max_value);
  const ModelFile model = model_of(copy);
  for (const auto kernel : kernels()) {
    const auto engine = make_exact_engine(model.options, prednet_weights(model, "model"), kernel);
    const auto got = test::run_engine(*engine, frames, samples, height, width, max_value);
    INFO("kernel " << exact::kernel_name(kernel) << ", " << samples << " samples of " << width
                   << "x" << height << ", max " << max_value << ": " << first_difference(expected, got));
    REQUIRE(got == expected);
  }
}

}  // namespace

TEST_CASE("the core's exact engine equals the torch engine it replaced, byte for byte, on real frames", "[prednet_exact]") {
  const auto mire = test::read_pgm_folder(test::kMire);
  REQUIRE(mire.frames.size() == 16);
  SECTION("the shipped model on the mire sample, 8 and 16 bits, one and three samples") {
    const auto net = load_prednet(load_model_file(kShippedModel), kShippedModel.string());
    require_same(net, stacked(mire, 1, 255, 16), 1, mire.height, mire.width, 255);
    require_same(net, stacked(mire, 3, 65535, 8), 3, mire.height, mire.width, 65535);
    require_same(net, stacked(mire, 1, 1000, 8), 1, mire.height, mire.width, 1000);
  }
  SECTION("random models, lifted so that every layer matters") {
    require_same(lifted_net({1, 8, 16, 32}, 1), stacked(mire, 1, 255, 16), 1, mire.height, mire.width, 255);
    require_same(lifted_net({1, 16, 32, 64}, 2), stacked(mire, 2, 255, 6), 2, mire.height, mire.width, 255);
    PredNetOptions o;
    o.a_channels = {1, 4, 8};
    o.r_channels = {6, 5, 3};
    o.kernel = 5;
    torch::manual_seed(9);
    PredNet other(o);
    {
      torch::NoGradGuard no_grad;
      other->ahat[0]->bias.fill_(0.4);
    }
    require_same(other, stacked(mire, 1, 255, 8), 1, mire.height, mire.width, 255);
  }
  SECTION("the shipped model on mire2 (384x288), when it is there") {
    const auto folder = test::mire2_folder();
    if (folder.empty()) {
      WARN("no mire2 ($TEZIP_MIRE2 or .cache/datasets/mire2; datasets/fetch): only the bundled sample ran");
    } else {
      // $TEZIP_MIRE2_FRAMES frames (default 40; 501 is all of them).
      const char* count = std::getenv("TEZIP_MIRE2_FRAMES");
      const auto frames = test::read_pgm_folder(folder, count ? std::stoul(count) : 40, 8);
      REQUIRE(frames.frames.size() >= 2);
      const auto net = load_prednet(load_model_file(kShippedModel), kShippedModel.string());
      require_same(net, stacked(frames, 1, 255, frames.frames.size()), 1, frames.height, frames.width, 255);
    }
  }
}

TEST_CASE("exact engine stays within a few levels of the float engine on mire", "[prednet_exact]") {
  const auto mire = test::read_pgm_folder(test::kMire);
  auto net = lifted_net({1, 8, 16, 32}, 1);
  const ModelFile model = model_of(net);
  const auto frames = stacked(mire, 1, 255, 16);
  const auto exact_forecasts =
      test::run_engine(*make_exact_engine(model.options, prednet_weights(model, "m")), frames, 1, mire.height, mire.width, 255);
  const auto float_forecasts = test::run_engine(*learned::make_float_engine(model, "m"), frames, 1, mire.height, mire.width, 255);
  double total = 0, exact_se = 0, float_se = 0;
  std::int64_t worst = 0, count = 0;
  for (std::size_t t = 0; t < exact_forecasts.size(); ++t)
    for (std::size_t i = 0; i < exact_forecasts[t].size(); ++i) {
      const std::int64_t e = exact_forecasts[t][i], f = float_forecasts[t][i], x = frames[t + 1][i];
      total += double(std::abs(e - f));
      worst = std::max<std::int64_t>(worst, std::abs(e - f));
      ++count;
      exact_se += double((e - x) * (e - x));
      float_se += double((f - x) * (f - x));
    }
  const double mean = total / double(count);
  INFO("mean |exact - float| " << mean << " levels, max " << worst << "; MSE exact " << exact_se / count << ", float "
                               << float_se / count);
  // Quantization noise is about 1e-4 of full scale per layer (docs/exact_inference.md), i.e. a
  // few hundredths of a level at 8 bits; forecasts that round differently differ by one level.
  REQUIRE(mean < 0.1);
  REQUIRE(worst <= 3);
  REQUIRE(std::abs(exact_se - float_se) <= 0.01 * float_se);
}

// Frames per second of thread CPU time (robust to other jobs on shared cores), one predict +
// correct per frame, batches of 8: random-weight stacks at 160x128 and the shipped model at
// mire2's 384x288. `tezip_tests "[prednet_exact_bench]"`.
TEST_CASE("exact engine speed against the float engine and the torch engine it replaced", "[.][prednet_exact_bench]") {
  const int saved = torch::get_num_threads();
  torch::set_num_threads(1);  // the exact engine is single-threaded per call; GOPs run in parallel
  auto cpu_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  };
  struct Case {
    std::string name;
    PredNet net;
    int height, width;
  };
  std::vector<Case> cases;
  for (const auto& stack : std::vector<std::vector<int>>{{1, 8, 16, 32}, {1, 16, 32, 64}, {1, 4, 8, 16}}) {
    char name[64];
    std::snprintf(name, sizeof name, "{%d,%d,%d,%d} 160x128", stack[0], stack[1], stack[2], stack[3]);
    cases.push_back({name, random_net(stack, 1), 128, 160});
  }
  cases.push_back({"prednet-small 384x288", load_prednet(load_model_file(kShippedModel), "shipped"), 288, 384});
  for (auto& c : cases) {
    const ModelFile model = model_of(c.net);
    const auto frame = torch::randint(0, 256, {8, 1, c.height, c.width}, torch::kInt32).contiguous();
    const std::vector<std::int32_t> pixels(frame.data_ptr<std::int32_t>(), frame.data_ptr<std::int32_t>() + frame.numel());
    auto time = [&](auto&& step) {
      step();
      const double start = cpu_seconds();
      constexpr int kSteps = 4;
      for (int t = 0; t < kSteps; ++t) step();
      return 8 * kSteps / (cpu_seconds() - start);
    };
    std::vector<std::pair<std::string, double>> results;
    for (const auto& engine : {learned::make_float_engine(model, "m"), make_exact_engine(model.options, prednet_weights(model, "m"))}) {
      auto state = engine->initial_state(8, c.height, c.width);
      std::vector<std::int32_t> forecast(pixels.size());
      PredNetEngineState* states[] = {state.get()};
      results.emplace_back(engine->arithmetic(), time([&] {
                             std::span<std::int32_t> f[] = {forecast};
                             engine->predict(states, 255, f);
                             std::span<const std::int32_t> in[] = {pixels};
                             engine->correct(states, in, 255);
                           }));
    }
    const auto legacy = legacy_exact::make_engine(c.net);
    auto state = legacy->initial_state(8, c.height, c.width);
    results.emplace_back("exact, torch engine of 7e1b983", time([&] {
                           legacy->predict(state, 255);
                           legacy->correct(state, frame, 255);
                         }));
    for (const auto& [name, fps] : results) std::printf("%s %s: %.1f frames/s\n", c.name.c_str(), name.c_str(), fps);
  }
  torch::set_num_threads(saved);
}

// Exact against float with a trained model: `tezip_tests "[prednet_exact_quality]"`, with
// TEZIP_EXACT_MODEL (default models/prednet-small.tzm) and TEZIP_EXACT_FRAMES (a folder of 8-bit
// PGM frames, default the bundled mire sample; .cache/datasets/mire2 is a longer one).
TEST_CASE("exact engine quality against the float engine with a trained model", "[.][prednet_exact_quality]") {
  const char* model_env = std::getenv("TEZIP_EXACT_MODEL");
  const char* frames_env = std::getenv("TEZIP_EXACT_FRAMES");
  const fs::path model_path = model_env ? fs::path(model_env) : kShippedModel;
  const fs::path folder = frames_env ? fs::path(frames_env) : test::kMire;
  REQUIRE(fs::exists(model_path));
  const ModelFile model = load_model_file(model_path);
  const auto gray = test::read_pgm_folder(folder, 1000000, model.options.padding_multiple());
  REQUIRE(gray.frames.size() >= 2);
  const auto& frames = gray.frames;
  const auto exact_forecasts = test::run_engine(*make_exact_engine(model.options, prednet_weights(model, model_path.string())),
                                                frames, 1, gray.height, gray.width, 255);
  const auto float_forecasts =
      test::run_engine(*learned::make_float_engine(model, model_path.string()), frames, 1, gray.height, gray.width, 255);
  double total = 0, exact_se = 0, float_se = 0, previous_se = 0;
  std::int64_t worst = 0, count = 0, differing = 0;
  std::map<std::int64_t, std::int64_t> exact_hist, float_hist;
  for (std::size_t t = 0; t < exact_forecasts.size(); ++t)
    for (std::size_t i = 0; i < exact_forecasts[t].size(); ++i) {
      const std::int64_t e = exact_forecasts[t][i], f = float_forecasts[t][i], x = frames[t + 1][i], p = frames[t][i];
      total += double(std::abs(e - f));
      worst = std::max<std::int64_t>(worst, std::abs(e - f));
      differing += e != f;
      ++count;
      exact_se += double((x - e) * (x - e));
      float_se += double((x - f) * (x - f));
      previous_se += double((x - p) * (x - p));
      ++exact_hist[x - e];
      ++float_hist[x - f];
    }
  auto entropy = [&](const std::map<std::int64_t, std::int64_t>& hist) {
    double bits = 0;
    for (const auto& [value, n] : hist) bits -= double(n) / double(count) * std::log2(double(n) / double(count));
    return bits;
  };
  std::printf("%s on %s (%zu forecasts): mean |exact - float| %.4f levels, max %lld, %.3f%% differ; MSE exact %.3f, "
              "float %.3f, previous frame %.3f; residual entropy exact %.4f, float %.4f bits/pixel\n",
              model_path.filename().c_str(), folder.filename().c_str(), exact_forecasts.size(), total / double(count),
              (long long)worst, 100.0 * double(differing) / double(count), exact_se / double(count),
              float_se / double(count), previous_se / double(count), entropy(exact_hist), entropy(float_hist));
  REQUIRE(std::abs(entropy(exact_hist) - entropy(float_hist)) <= 0.02 * entropy(float_hist));
}
