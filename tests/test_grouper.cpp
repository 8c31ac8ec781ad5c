// Grouper: static and dynamic windows (compressor/grouper.hpp).
#include <catch2/catch.hpp>

#include <vector>

#include "compressor/grouper.hpp"

using namespace tezip;

namespace {

// Where each GOP starts, for `frames` fed in order.
std::vector<std::size_t> starts(Grouper& grouper, const std::vector<std::vector<std::uint16_t>>& frames) {
  std::vector<std::size_t> out = {0};
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (grouper.next(frames[i])) out.push_back(i);
  return out;
}

// 4x4 gray frames: `scenes` runs of constant frames, each of the given length and value.
std::vector<std::vector<std::uint16_t>> scenes(std::initializer_list<std::pair<int, std::uint16_t>> runs) {
  std::vector<std::vector<std::uint16_t>> frames;
  for (const auto& [length, value] : runs)
    for (int k = 0; k < length; ++k) frames.emplace_back(16, value);
  return frames;
}

}  // namespace

TEST_CASE("static windows cut every max_gop frames", "[grouper]") {
  const auto predictor = make_classical_predictor("previous");
  const FrameShape shape{4, 4, 1, 255};
  Grouper grouper(*predictor, shape, GopPolicy{GopKind::Static, 3, 0}, 3);
  CHECK(starts(grouper, scenes({{8, 10}})) == std::vector<std::size_t>{0, 3, 6});
}

TEST_CASE("dynamic windows cut where the forecast misses, and at max_gop", "[grouper]") {
  const auto predictor = make_classical_predictor("previous");
  const FrameShape shape{4, 4, 1, 255};
  // Scene cuts at frames 4 and 6 (MSE of a jump of 100 on [0, 1] pixels: 0.154); within a scene
  // the previous frame forecasts exactly. The longest GOP is 5 frames.
  const auto frames = scenes({{4, 10}, {2, 110}, {7, 30}});
  Grouper dynamic(*predictor, shape, GopPolicy{GopKind::Dynamic, 5, 0.01}, 5);
  CHECK(starts(dynamic, frames) == std::vector<std::size_t>{0, 4, 6, 11});
  // A threshold above every miss leaves only the length limit.
  Grouper lenient(*predictor, shape, GopPolicy{GopKind::Dynamic, 5, 0.5}, 5);
  CHECK(starts(lenient, frames) == std::vector<std::size_t>{0, 5, 10});
}

TEST_CASE("a predictor that codes every frame spatially gets static windows", "[grouper]") {
  const auto predictor = make_classical_predictor("intra");
  const FrameShape shape{4, 4, 1, 255};
  Grouper grouper(*predictor, shape, GopPolicy{GopKind::Dynamic, 4, 0.0}, 4);
  CHECK(starts(grouper, scenes({{3, 10}, {6, 200}})) == std::vector<std::size_t>{0, 4, 8});
}
