#pragma once
// Real frames and fixed weights for the exact PredNet engine's tests, without libtorch: 8-bit PGM
// folders (the bundled mire sample, .cache/datasets/mire2), weights from integers only, and a run
// of an engine over a sequence.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "predictor/model_file.hpp"
#include "predictor/prednet_engine.hpp"

namespace tezip::test {

inline const std::filesystem::path kMire = std::filesystem::path(TEZIP_SOURCE_DIR) / "datasets/sample/mire";

// mire2 (501 gray 384x288 frames, `datasets/fetch`): $TEZIP_MIRE2, else .cache/datasets/mire2 in
// the source tree; empty when neither exists.
inline std::filesystem::path mire2_folder() {
  const char* env = std::getenv("TEZIP_MIRE2");
  const std::filesystem::path folder = env && *env ? std::filesystem::path(env) : std::filesystem::path(TEZIP_SOURCE_DIR) / ".cache/datasets/mire2";
  std::error_code ec;
  return std::filesystem::is_directory(folder, ec) ? folder : std::filesystem::path();
}

struct GrayFrames {
  int width = 0, height = 0;
  std::vector<std::vector<std::int32_t>> frames;  // [height][width] each
};

// The first `limit` binary 8-bit PGM (P5) files of `folder` in name order, cropped to multiples of `multiple`.
inline GrayFrames read_pgm_folder(const std::filesystem::path& folder, std::size_t limit = 1000000, int multiple = 1) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.path().extension() == ".pgm") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  if (files.size() > limit) files.resize(limit);
  GrayFrames out;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    std::string magic;
    int width = 0, height = 0, max = 0;
    in >> magic >> width >> height >> max;
    in.get();
    REQUIRE((magic == "P5" && max == 255 && width > 0 && height > 0));
    std::vector<std::uint8_t> bytes(std::size_t(width) * height);
    in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
    REQUIRE(in);
    const int w = width / multiple * multiple, h = height / multiple * multiple;
    if (out.frames.empty()) out.width = w, out.height = h;
    REQUIRE((w == out.width && h == out.height));
    std::vector<std::int32_t> frame(std::size_t(w) * h);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) frame[std::size_t(y) * w + x] = bytes[std::size_t(y) * width + x];
    out.frames.push_back(std::move(frame));
  }
  return out;
}

// Weights that are exactly the same on every machine: splitmix64 draws turned into multiples of
// 2^-16, uniform in about +-1/sqrt(fan_in) like torch's default initialisation, in the network's
// parameter order (tests/test_prednet_exact.cpp's portable_net of tezip 7e1b983, without torch).
inline std::vector<WeightTensor> portable_weights(const PredNetOptions& options, std::uint64_t seed) {
  std::uint64_t state = seed;
  auto next = [&] {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  std::vector<WeightTensor> weights;
  for (const auto& p : options.parameters()) {
    const std::int64_t fan_in = p.shape.size() == 4 ? p.shape[1] * p.shape[2] * p.shape[3] : 64;
    const std::int64_t limit = std::int64_t(65536 / std::sqrt(double(fan_in)));
    std::int64_t count = 1;
    for (auto d : p.shape) count *= d;
    WeightTensor t{p.name, p.shape, std::vector<float>(std::size_t(count))};
    for (auto& x : t.values) x = float(std::int64_t(next() % std::uint64_t(2 * limit + 1)) - limit) / 65536.0f;
    weights.push_back(std::move(t));
  }
  return weights;
}

// An untrained network forecasts 0 everywhere (relu of mostly negative values); lifting the
// forecast to mid-gray (ahat0's bias 0.5) and amplifying R_0's say (its weights x4) makes every
// layer's state matter. Both are exact in float32.
inline std::vector<WeightTensor> lifted(std::vector<WeightTensor> weights) {
  for (auto& t : weights) {
    if (t.name == "ahat0.bias") std::fill(t.values.begin(), t.values.end(), 0.5f);
    if (t.name == "ahat0.weight")
      for (auto& v : t.values) v *= 4.0f;
  }
  return weights;
}

// The forecasts of frames 1..T-1 of `frames` (each [samples][C][H][W]), one state fed every frame.
inline std::vector<std::vector<std::int32_t>> run_engine(const PredNetEngine& engine,
                                                         const std::vector<std::vector<std::int32_t>>& frames,
                                                         int samples, int height, int width, std::uint32_t max_value) {
  auto state = engine.initial_state(samples, height, width);
  PredNetEngineState* states[] = {state.get()};
  std::vector<std::vector<std::int32_t>> out;
  std::vector<std::int32_t> forecast(frames.at(0).size());
  for (std::size_t t = 0; t < frames.size(); ++t) {
    std::span<std::int32_t> f[] = {forecast};
    engine.predict(states, max_value, f);
    if (t > 0) out.push_back(forecast);
    std::span<const std::int32_t> in[] = {frames[t]};
    engine.correct(states, in, max_value);
  }
  return out;
}

// FNV-1a over the low 4 bytes of every value (the golden hashes of tezip 7e1b983 hash this way).
inline std::uint64_t fnv1a(const std::vector<std::vector<std::int32_t>>& forecasts) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& f : forecasts)
    for (const std::int64_t v : f)
      for (int byte = 0; byte < 4; ++byte) {
        h ^= std::uint64_t(v >> (8 * byte)) & 0xff;
        h *= 0x100000001b3ULL;
      }
  return h;
}

}  // namespace tezip::test
