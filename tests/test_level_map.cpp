#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>

#include "codecs/codec_error.hpp"
#include "codecs/transform/level_map.hpp"
#include "compressor/gop_codec.hpp"
#include "format/errors.hpp"

using namespace tezip;
using codecs::LevelMap;
using codecs::SimdPath;
using codecs::simd_name;
using codecs::supported_simd_paths;

namespace {

// A camera's frames after a digital gain: a soft gradient under fresh Gaussian noise (sigma 3),
// each value then multiplied by a gain that changes a little with every frame (1.10 to 1.16) and
// rounded, so that every ninth to seventh level is never produced, at a spacing of its frame's
// own; `shift` bits more move the values up as a sensor's samples stored in 16 bits.
GopFrames gained_frames(const FrameShape& shape, std::size_t count, unsigned shift = 0) {
  std::mt19937 rng(47);
  std::normal_distribution<double> noise(0, 3);
  GopFrames frames;
  for (std::size_t t = 0; t < count; ++t) {
    const double gain = 1.10 + 0.01 * double(t);
    Pixels f(shape.size());
    for (std::size_t i = 0; i < f.size(); ++i) {
      const double x = double(i % shape.width), y = double(i / shape.width);
      const double v = 60.0 + x + 0.5 * y + 2.0 * double(t) + noise(rng);
      f[i] = std::uint16_t(std::lround(std::round(std::clamp(v, 0.0, 200.0)) * gain) << shift);
    }
    frames.push_back(std::move(f));
  }
  return frames;
}

// `frames` coded with level maps and without: the first a chunk of version 18 or later (after a
// colour transform's two bytes; 19 where its symbols take column parts), under `percent` of the
// second's size, and decoded bit for bit.
EncodedGop with_and_without_maps(const Predictor& predictor, const FrameShape& shape, const GopFrames& frames,
                                 std::size_t percent) {
  CodingSettings settings, without;
  without.level_maps = false;
  const GopFrames* gops[] = {&frames};
  auto coded = encode_gops(predictor, shape, gops, settings)[0];
  const auto plain = encode_gops(predictor, shape, gops, without)[0];
  const std::size_t version_at = coded.bytes[0] == 0x82 ? 2 : 0;
  CHECK(coded.bytes[version_at] >= 18);
  CHECK(plain.bytes[version_at] != 18);
  INFO("with level maps " << coded.bytes.size() << " bytes, without " << plain.bytes.size());
  CHECK(coded.bytes.size() * 100 < plain.bytes.size() * percent);
  const std::span<const std::uint8_t> chunks[] = {coded.bytes};
  const std::size_t counts[] = {frames.size()};
  CHECK(decode_gops(predictor, shape, chunks, counts, settings)[0] == frames);
  CHECK(coded.reconstruction == frames);
  // `tezip info` says so.
  const auto head = std::span<const std::uint8_t>(coded.bytes).first(std::min(coded.bytes.size(), kChunkHeadBytes));
  CHECK_THAT(chunk_kind(predictor, head, shape.channels), Catch::EndsWith(" + level maps"));
  const auto plain_head = std::span<const std::uint8_t>(plain.bytes).first(std::min(plain.bytes.size(), kChunkHeadBytes));
  CHECK_THAT(chunk_kind(predictor, plain_head, shape.channels), !Catch::Contains("level maps"));
  return coded;
}

}  // namespace

TEST_CASE("level maps: indices, nearest levels, values back, by hand", "[codecs][levels]") {
  const std::vector<std::uint16_t> dense{4, 5, 6, 7, 5};
  CHECK_FALSE(LevelMap::of(dense, 255).has_value());  // no gap between its smallest and largest
  const std::vector<std::uint16_t> plane{9, 3, 5, 6, 5, 3};
  const auto map = LevelMap::of(plane, 15);
  REQUIRE(map.has_value());
  CHECK(map->size() == 4);
  std::vector<std::uint16_t> indices(plane.size());
  map->to_indices(plane, indices);
  CHECK(indices == std::vector<std::uint16_t>{3, 0, 1, 2, 1, 0});
  // The nearest level's index, the lower of two as near (4: 3 and 5), past the ends the end's.
  std::vector<std::uint16_t> forecast{0, 2, 3, 4, 5, 6, 7, 8, 9, 15}, ranks(forecast.size());
  map->to_ranks(forecast, ranks);
  CHECK(ranks == std::vector<std::uint16_t>{0, 0, 0, 0, 1, 2, 2, 3, 3, 3});
  // Back to pixels; an index past the last (a damaged stream) stays in the table.
  std::vector<std::uint16_t> values{3, 0, 1, 2, 1, 0, 7};
  map->to_levels(values);
  CHECK(values == std::vector<std::uint16_t>{9, 3, 5, 6, 5, 3, 9});
  // As symbols: runs unused, used, ... over 0 .. 15: 0-2, 3, 4, 5-6, 7-8, 9, 10-15.
  std::vector<std::uint32_t> symbols{99};
  map->append_symbols(symbols);
  CHECK(symbols == std::vector<std::uint32_t>{99, 7, 3, 1, 1, 2, 2, 1, 6});
  std::size_t pos = 1;
  const auto read = LevelMap::read(symbols, pos, 15);
  CHECK(pos == symbols.size());
  std::vector<std::uint16_t> again{0, 1, 2, 3};
  read.to_levels(again);
  CHECK(again == std::vector<std::uint16_t>{3, 5, 6, 9});
  // A plane whose largest value is the maximum, and one from zero: no empty run at either end.
  const std::vector<std::uint16_t> ends{0, 255, 2};
  std::vector<std::uint32_t> end_symbols;
  LevelMap::of(ends, 255)->append_symbols(end_symbols);
  CHECK(end_symbols == std::vector<std::uint32_t>{6, 0, 1, 1, 1, 252, 1});
}

TEST_CASE("level maps: the lookups give the same values on every kernel path", "[codecs][levels][simd]") {
  // 8-bit maps (the AVX-512 path's table in registers: 256 entries) with few and many levels, a
  // 7-bit one and a 16-bit one (the scalar loop on every path); forecasts across the whole 16-bit
  // range and indices past K - 1 (a damaged stream), lengths with and without a tail of 32.
  std::mt19937 rng(48);
  for (const std::uint32_t max_value : {255u, 127u, 65535u}) {
    for (const std::uint32_t spacing : {2u, 9u, 60u}) {
      std::vector<std::uint16_t> plane;
      for (std::uint32_t v = 3; v <= max_value; v += spacing + rng() % 3) plane.push_back(std::uint16_t(v));
      const auto map = LevelMap::of(plane, max_value);
      REQUIRE(map);
      for (const std::size_t n : {std::size_t{1}, std::size_t{31}, std::size_t{64}, std::size_t{1000}}) {
        INFO("max " << max_value << ", spacing " << spacing << ", " << n << " values");
        std::vector<std::uint16_t> forecast(n), indices(n);
        for (auto& f : forecast) f = std::uint16_t(rng() % 3 == 0 ? rng() : rng() % (max_value + 1));
        for (auto& i : indices) i = std::uint16_t(rng() % (map->size() + 8));
        std::vector<std::uint16_t> ranks(n), levels = indices;
        map->to_ranks(forecast, ranks, SimdPath::portable);
        map->to_levels(levels, SimdPath::portable);
        for (std::size_t k = 0; k < n; ++k) {
          REQUIRE(ranks[k] < map->size());
          REQUIRE(levels[k] <= max_value);
        }
        for (const SimdPath path : supported_simd_paths()) {
          INFO("path " << simd_name(path));
          std::vector<std::uint16_t> r(n), l = indices;
          map->to_ranks(forecast, r, path);
          map->to_levels(l, path);
          CHECK(r == ranks);
          CHECK(l == levels);
        }
      }
    }
  }
}

TEST_CASE("level maps: a 16-bit sensor's shifted samples, and bad map streams refused", "[codecs][levels]") {
  // 12-bit samples in the top bits of 16: one value in 16 used.
  std::vector<std::uint16_t> plane(5000);
  for (std::size_t i = 0; i < plane.size(); ++i) plane[i] = std::uint16_t((i * 7 % 4096) << 4);
  const auto map = LevelMap::of(plane, 65535);
  REQUIRE(map.has_value());
  CHECK(map->size() == 4096);
  std::vector<std::uint16_t> indices(plane.size());
  map->to_indices(plane, indices);
  CHECK(*std::max_element(indices.begin(), indices.end()) == 4095);
  std::vector<std::uint32_t> symbols;
  map->append_symbols(symbols);
  std::size_t pos = 0;
  const auto read = LevelMap::read(symbols, pos, 65535);
  read.to_levels(indices);
  CHECK(indices == plane);

  const auto refused = [](std::vector<std::uint32_t> s, std::uint32_t max_value, const char* what) {
    std::size_t p = 0;
    CHECK_THROWS_WITH(LevelMap::read(s, p, max_value), Catch::Contains(what));
  };
  refused({}, 15, "missing");
  refused({5, 1}, 15, "runs past its stream");
  refused({2, 10, 10}, 15, "past the pixel range");
  refused({2, 3, 4}, 15, "short of the pixel range");
  refused({1, 16}, 15, "without a level");
  refused({2, 0, 1}, 70000, "above 16 bits");
}

TEST_CASE("lossless planes that leave levels unused are coded through their level maps (chunk version 18), exactly",
          "[gop][levels]") {
  const FrameShape shape{96, 64, 1, 255};
  const auto frames = gained_frames(shape, 6);
  const std::size_t counts[] = {frames.size()};
  for (const char* name : {"intra", "previous", "bidirectional"}) {
    INFO(name);
    const auto predictor = make_classical_predictor(name);
    const auto coded = with_and_without_maps(*predictor, shape, frames, 97);
    // An older reader's view: the flag is chunk versions 3-5's channel delta.
    auto as_v17 = coded.bytes;
    as_v17[0] = 17;
    const std::span<const std::uint8_t> old[] = {as_v17};
    CHECK_THROWS_WITH(decode_gops(*predictor, shape, old, counts, CodingSettings{}), Catch::Contains("channel delta"));
  }
  // Bounded modes keep their bins in pixels: no level maps.
  const auto previous = make_classical_predictor("previous");
  CodingSettings abs2;
  abs2.bound = codecs::ErrorBound{codecs::BoundMode::Abs, 2, 0};
  const GopFrames* gops[] = {&frames};
  CHECK(encode_gops(*previous, shape, gops, abs2)[0].bytes[0] != 18);
}

TEST_CASE("a 16-bit sequence of shifted 8-bit samples codes its indices, exactly", "[gop][levels]") {
  const FrameShape shape{64, 48, 1, 65535};
  const auto frames = gained_frames(shape, 4, 4);
  with_and_without_maps(*make_classical_predictor("previous"), shape, frames, 90);
}

TEST_CASE("colour planes that leave levels unused take their own level maps, in any channel plan, exactly", "[gop][levels][colour]") {
  // Three channels of the gained camera, each its own offset before the gain: each plane's
  // levels are its own, and the channel plans relate the planes' index residuals.
  const FrameShape gray{96, 64, 1, 255}, shape{96, 64, 3, 255};
  const auto frames = gained_frames(gray, 5);
  GopFrames colour;
  for (const auto& f : frames) {
    Pixels c(shape.size());
    for (std::size_t ch = 0; ch < 3; ++ch)
      for (std::size_t i = 0; i < f.size(); ++i) c[ch * f.size() + i] = std::uint16_t(std::min(255, f[i] + int(ch) * 9));
    colour.push_back(std::move(c));
  }
  for (const char* name : {"intra", "previous"}) {
    INFO(name);
    with_and_without_maps(*make_classical_predictor(name), shape, colour, 98);
  }
}
