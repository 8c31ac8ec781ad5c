#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <random>

#include "codecs/transform/colour_transform.hpp"
#include "codecs/quantize/error_bound.hpp"
#include "compressor/gop_codec.hpp"
#include "format/errors.hpp"
#include "predictor/predictor.hpp"

using namespace tezip;
using namespace tezip::codecs;

namespace {

// Decoded colour video in miniature: a textured luma drifting one pixel a frame, smooth chroma
// (as subsampled chroma upsampled), turned into B, G, R planes as a decoder's YUV -> RGB does.
// Chroma::grain: a still scene, a smooth luma and a chroma with a grain of its own, a little
// noise on both from frame to frame; Chroma::half: that chroma held in 2 x 2 blocks, as a decoder
// that repeats subsampled chroma gives it.
// Chroma::still_half: the same in a still scene, with a little noise from frame to frame.
enum class Chroma { smooth, grain, half, still_half };
GopFrames film_frames(const FrameShape& shape, std::size_t frames, Chroma chroma = Chroma::smooth) {
  const bool half_chroma = chroma == Chroma::half || chroma == Chroma::still_half, grainy = chroma != Chroma::smooth;
  const bool still = chroma == Chroma::still_half;
  GopFrames out;
  const std::size_t plane = std::size_t(shape.width) * shape.height;
  std::mt19937 rng(7);
  std::vector<int> texture(std::size_t(shape.width + frames) * shape.height);
  for (auto& v : texture) v = 60 + int(rng() % 120);
  for (std::size_t t = 0; t < frames; ++t) {
    Pixels f(shape.size());
    for (std::uint32_t y = 0; y < shape.height; ++y)
      for (std::uint32_t x = 0; x < shape.width; ++x) {
        const auto hash = [](std::uint32_t a, std::uint32_t b, std::uint32_t c) {
          return (a * 7919u + b * 104729u + c * 31u) * 2654435761u;
        };
        const double texture_at = texture[std::size_t(y) * (shape.width + frames) + x + t];
        const double luma = still    ? 110 + 50 * std::sin(0.07 * x) + double(hash(x, y, std::uint32_t(t)) >> 30)
                            : grainy ? 110 + 50 * std::sin(0.07 * (x + t)) + texture_at / 40
                                     : texture_at;
        const std::uint32_t cx = half_chroma ? x / 2 * 2 : x, cy = half_chroma ? y / 2 * 2 : y;
        // Chroma with a texture of its own (at the chroma's resolution), as camera chroma has.
        const double grain = still    ? double(hash(cx, cy, 0) >> 28) - 7.5 + double(hash(cy, cx, std::uint32_t(t) + 1) >> 31)
                             : grainy ? double(hash(cx, cy, std::uint32_t(t)) >> 29) - 3.5
                                      : 0;
        const double drift = still ? 0 : 0.02 * double(t);
        const double u = 20 * std::sin(0.05 * cx + drift) + grain, v = 25 * std::cos(0.04 * cy) - grain;
        const auto clamp = [](double p) { return std::uint16_t(std::clamp(std::lround(p), 0L, 255L)); };
        const std::size_t i = std::size_t(y) * shape.width + x;
        f[i] = clamp(luma + 1.772 * u);                       // B
        f[plane + i] = clamp(luma - 0.344 * u - 0.714 * v);  // G
        f[2 * plane + i] = clamp(luma + 1.402 * v);          // R
      }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

TEST_CASE("the reversible colour transform round-trips every pixel and refuses what leaves the range", "[colour]") {
  for (const std::uint32_t max_value : {255u, 1023u, 32767u}) {
    INFO("max " << max_value);
    const std::size_t plane = 997;
    std::mt19937 rng(max_value);
    Pixels bgr(3 * plane), yuv(3 * plane), back(3 * plane);
    for (std::size_t i = 0; i < bgr.size(); ++i) bgr[i] = std::uint16_t(rng() % (max_value + 1));
    // The extremes: every corner of the cube.
    for (std::size_t k = 0; k < 8; ++k)
      for (std::size_t c = 0; c < 3; ++c) bgr[c * plane + k] = std::uint16_t((k >> c) & 1 ? max_value : 0);
    forward_rct(bgr, plane, max_value, yuv);
    for (std::size_t i = 0; i < plane; ++i) {
      REQUIRE(yuv[i] <= max_value);
      REQUIRE(yuv[plane + i] <= rct_max_value(max_value));
      REQUIRE(yuv[2 * plane + i] <= rct_max_value(max_value));
    }
    REQUIRE(inverse_rct(yuv, plane, max_value, back));
    CHECK(back == bgr);
    // Planes no encoder writes: a luma of 0 under the largest differences gives a negative green,
    // a luma of M under the smallest a green past M.
    Pixels damaged = yuv;
    damaged[0] = 0, damaged[plane] = std::uint16_t(rct_max_value(max_value)), damaged[2 * plane] = damaged[plane];
    CHECK_FALSE(inverse_rct(damaged, plane, max_value, back));
    damaged = yuv;
    damaged[1] = std::uint16_t(max_value), damaged[plane + 1] = 0, damaged[2 * plane + 1] = 0;
    CHECK_FALSE(inverse_rct(damaged, plane, max_value, back));
  }
  CHECK(rct_fits(32767));
  CHECK_FALSE(rct_fits(65535));
  Pixels wide(30), out(30);
  CHECK_THROWS_AS(forward_rct(wide, 10, 65535, out), std::invalid_argument);
  CHECK_THROWS_AS(forward_rct(wide, 9, 255, out), std::invalid_argument);
}

TEST_CASE("lossless colour GOPs take the colour transform where it codes smaller, and decode bit for bit", "[colour][gop]") {
  const auto predictor = make_classical_predictor("auto");
  const FrameShape shape{96, 64, 3, 255};
  const GopFrames frames = film_frames(shape, 8);
  const GopFrames* gops[] = {&frames};
  const CodingSettings settings;
  const auto encoded = encode_gops(*predictor, shape, gops, settings);
  REQUIRE(encoded[0].bytes.size() > 2);
  REQUIRE(encoded[0].bytes[0] == 0x82);  // a colour-transformed chunk
  CHECK(encoded[0].bytes[1] == kRctTransform);
  CHECK(encoded[0].reconstruction == frames);
  CHECK(chunk_kind(*predictor, std::span(encoded[0].bytes).first(kChunkHeadBytes)).rfind("rct ", 0) == 0);
  const std::span<const std::uint8_t> chunks[] = {encoded[0].bytes};
  const std::size_t counts[] = {frames.size()};
  // Every row heard of once, after the transform is undone.
  std::size_t rows = 0;
  const std::size_t plane = std::size_t(shape.width) * shape.height;
  const RowsDone heard = [&](std::size_t chunk, std::size_t t, std::size_t c, std::size_t y0, std::span<const std::uint16_t> r) {
    CHECK(chunk == 0);
    CHECK(std::equal(r.begin(), r.end(), frames[t].begin() + std::ptrdiff_t(c * plane + y0 * shape.width)));
    rows += r.size() / shape.width;
  };
  const auto decoded = decode_gops(*predictor, shape, chunks, counts, settings, heard);
  CHECK(decoded[0] == frames);
  CHECK(rows == frames.size() * shape.channels * shape.height);
  // With other chunks in the same call (a gray-free archive decodes GOPs together).
  const GopFrames noise = [&] {
    std::mt19937 rng(3);
    GopFrames n(4, Pixels(shape.size()));
    for (auto& f : n)
      for (auto& v : f) v = std::uint16_t(rng() % 256);
    return n;
  }();
  const GopFrames* both[] = {&noise, &frames};
  const auto mixed = encode_gops(*predictor, shape, both, settings);
  // Independent channels: the transform only widens them, and the measured choice leaves them be.
  CHECK(mixed[0].bytes[0] != 0x82);
  CHECK(mixed[1].bytes[0] == 0x82);
  const std::span<const std::uint8_t> mixed_chunks[] = {mixed[0].bytes, mixed[1].bytes};
  const std::size_t mixed_counts[] = {noise.size(), frames.size()};
  const auto mixed_back = decode_gops(*predictor, shape, mixed_chunks, mixed_counts, settings);
  CHECK(mixed_back[0] == noise);
  CHECK(mixed_back[1] == frames);

  // Damaged or misplaced: an unknown transform, a bounded GOP's transform in a lossless archive, a
  // lossless GOP's in a bounded one, a gray or a 16-bit shape.
  auto unknown = encoded[0].bytes;
  for (const std::uint8_t transform : {std::uint8_t(0), std::uint8_t(4), kRctBoundedTransform, kGreenSplitTransform}) {
    unknown[1] = transform;
    CHECK_THROWS_AS(decode_gops(*predictor, shape, std::array{std::span<const std::uint8_t>(unknown)}, counts, settings),
                    DataError);
  }
  CodingSettings bounded;
  bounded.bound = ErrorBound{BoundMode::Abs, 2, 0};
  CHECK_THROWS_AS(decode_gops(*predictor, shape, chunks, counts, bounded), DataError);
  CHECK_THROWS_AS(decode_gops(*predictor, FrameShape{96, 64, 1, 255}, chunks, counts, settings), DataError);
  CHECK_THROWS_AS(decode_gops(*predictor, FrameShape{96, 64, 3, 65535}, chunks, counts, settings), DataError);
  CHECK_THROWS(decode_gops(*predictor, shape, std::array{std::span(encoded[0].bytes).first(encoded[0].bytes.size() / 2)}, counts,
                           settings));
}

TEST_CASE("bounded colour GOPs take a colour transform where it codes smaller: every RGB channel within the bound",
          "[colour][gop]") {
  // A still scene with noise from frame to frame and chroma held in 2 x 2 blocks (decoded video).
  // The RCT with exact chroma (transform 2): Y within the bound, so each RGB channel comes back
  // with Y's error, clamped. Subtract green (transform 3): the chroma within a share of the bound
  // (1 up to abs 7, a quarter of it from abs 8), G within the rest, B and R within their sum. Either
  // codes the chroma for less than the channel plans' three planes of quantization noise; at larger
  // bounds the trial may keep the RGB planes (from abs 3, where the mean of four references, chunk
  // version 16, averages the still scene's noise in every RGB plane: 12,595 bytes as they are).
  const auto predictor = make_classical_predictor("auto");
  struct Case {
    FrameShape shape;
    int bound;
    std::uint8_t transform;  // the trial's choice (0: any)
  };
  for (const Case& c : {Case{{96, 160, 3, 255}, 2, kRctBoundedTransform}, Case{{96, 64, 3, 255}, 2, kGreenSplitTransform},
                        Case{{96, 64, 3, 255}, 3, 0}, Case{{96, 64, 3, 255}, 4, 0},
                        Case{{96, 64, 3, 255}, 12, 0}}) {
    INFO("height " << c.shape.height << ", abs " << c.bound);
    const GopFrames frames = film_frames(c.shape, 8, Chroma::still_half);
    const GopFrames* gops[] = {&frames};
    const std::size_t counts[] = {frames.size()};
    CodingSettings settings, plain;
    settings.bound = plain.bound = ErrorBound{BoundMode::Abs, double(c.bound), 0};
    plain.colour_transform = false;
    const auto encoded = encode_gops(*predictor, c.shape, gops, settings);
    const auto& bytes = encoded[0].bytes;
    const std::size_t without = encode_gops(*predictor, c.shape, gops, plain)[0].bytes.size();
    REQUIRE(bytes.size() > 14);
    const bool transformed = bytes[0] == 0x82;
    if (c.transform) {
      REQUIRE(transformed);
      CHECK(bytes[1] == c.transform);
      CHECK(bytes.size() < without * 4 / 5);  // abs 2: 29,323 bytes against 44,617; 12,863 against 18,294
      CHECK(chunk_kind(*predictor, std::span(bytes).first(kChunkHeadBytes))
                .rfind(c.transform == kGreenSplitTransform ? "green " : "rct ", 0) == 0);
    }
    CHECK(bytes.size() <= without);
    // Frame 0's planes' tolerances: after the transform's two bytes, the version, quantizer, choice
    // and count, and its plan, (tolerance, mode, runs) each.
    const bool green = transformed && bytes[1] == kGreenSplitTransform;
    if (transformed) {
      CHECK((bytes[1] == kRctBoundedTransform || green));
      CHECK(int(bytes[7]) + int(bytes[10]) == c.bound);
      CHECK(int(bytes[10]) == (green ? std::max(1, c.bound / 4) : 0));
      CHECK(bytes[13] == bytes[10]);
    }
    const std::span<const std::uint8_t> chunks[] = {bytes};
    const auto decoded = decode_gops(*predictor, c.shape, chunks, counts, settings)[0];
    CHECK(decoded == encoded[0].reconstruction);  // the encoder's reconstruction is the decoder's
    const std::size_t plane = std::size_t(c.shape.width) * c.shape.height;
    int worst_g = 0, worst_br = 0;
    for (std::size_t t = 0; t < frames.size(); ++t)
      for (std::size_t i = 0; i < frames[t].size(); ++i) {
        int& worst = i / plane == 1 ? worst_g : worst_br;  // planes B, G, R
        worst = std::max(worst, std::abs(int(decoded[t][i]) - int(frames[t][i])));
      }
    CHECK(std::max(worst_g, worst_br) <= c.bound);
    CHECK(worst_br > 0);
    if (green) {
      CHECK(worst_g <= bytes[7]);  // G within its share
      CHECK(worst_br > bytes[7]);  // B and R within G's and the chroma's errors: the chroma's share is used
    }
    // The same chunk read as a lossless archive's is refused.
    if (transformed) CHECK_THROWS_AS(decode_gops(*predictor, c.shape, chunks, counts, CodingSettings{}), DataError);
  }
  const FrameShape shape{96, 64, 3, 255};
  const GopFrames frames = film_frames(shape, 8, Chroma::still_half);
  const GopFrames* gops[] = {&frames};
  // Rel and pwrel tolerances differ by channel or pixel, interval runs would code exact chroma
  // badly: those keep their RGB planes.
  for (const auto& [bound, quantizer] : {std::pair{ErrorBound{BoundMode::Rel, 0, 0.01}, QuantizerKind::Linear},
                                         std::pair{ErrorBound{BoundMode::PwRel, 0, 0.05}, QuantizerKind::Linear},
                                         std::pair{ErrorBound{BoundMode::Abs, 2, 0}, QuantizerKind::Interval}}) {
    CodingSettings other;
    other.bound = bound;
    other.quantizer = quantizer;
    CHECK(encode_gops(*predictor, shape, gops, other)[0].bytes[0] != 0x82);
  }
}

TEST_CASE("chroma held in 2 x 2 blocks is coded in the polyphase layout, smaller, and decodes bit for bit", "[colour][gop]") {
  // Intra frames: every plane coded spatially, as many chroma planes of decoded colour video are.
  const auto predictor = make_classical_predictor("intra");
  const FrameShape shape{96, 64, 3, 255};
  const GopFrames frames = film_frames(shape, 4, Chroma::half);
  const GopFrames* gops[] = {&frames};
  CodingSettings settings, raster;
  settings.pixel_chunks = raster.pixel_chunks = false;
  // The layout's own chunk versions (13 and 12): the film's grain planes keep the median.
  settings.intra_mean = raster.intra_mean = false;
  raster.polyphase = false;
  const auto encoded = encode_gops(*predictor, shape, gops, settings);
  const auto plain = encode_gops(*predictor, shape, gops, raster);
  REQUIRE(encoded[0].bytes.size() > 3);
  REQUIRE(encoded[0].bytes[0] == 0x82);  // a colour-transformed chunk
  // whose planes need chunk version 13, which chunks without the layout do not (12), or both 19
  // where their symbols take column parts
  CHECK((encoded[0].bytes[2] == 13 || encoded[0].bytes[2] == 19));
  CHECK((plain[0].bytes[2] == 12 || plain[0].bytes[2] == 19));
  CHECK((encoded[0].bytes[2] != plain[0].bytes[2] || plain[0].bytes[2] == 19));
  CHECK(encoded[0].bytes.size() < plain[0].bytes.size() * 19 / 20);
  const std::size_t counts[] = {frames.size()};
  const std::span<const std::uint8_t> chunks[] = {encoded[0].bytes};
  CHECK(decode_gops(*predictor, shape, chunks, counts, settings)[0] == frames);
  // Frames whose chroma has its grain at every pixel keep the raster order: the same chunk either way.
  const GopFrames full = film_frames(shape, 4, Chroma::grain);
  const GopFrames* full_gops[] = {&full};
  CHECK(encode_gops(*predictor, shape, full_gops, settings)[0].bytes == encode_gops(*predictor, shape, full_gops, raster)[0].bytes);
  // Within a bound (the colour transform with exact chroma, or B, G and R planes related by the
  // frame's channel plan, as the trial finds).
  CodingSettings bounded = settings;
  bounded.bound = ErrorBound{BoundMode::Abs, 2, 0};
  const auto coded = encode_gops(*predictor, shape, gops, bounded);
  const std::span<const std::uint8_t> bounded_chunks[] = {coded[0].bytes};
  const auto decoded = decode_gops(*predictor, shape, bounded_chunks, counts, bounded)[0];
  CHECK(decoded == coded[0].reconstruction);
  for (std::size_t t = 0; t < frames.size(); ++t)
    for (std::size_t i = 0; i < frames[t].size(); ++i) REQUIRE(std::abs(int(decoded[t][i]) - int(frames[t][i])) <= 2);
  // Frames coded against the previous one: the chroma residuals of the colour transform's planes
  // are held in blocks too (where the scene stands still or moves by whole blocks), and their
  // median transforms take the layout, with their side classes. Bounded GOPs decode within the
  // bound either way.
  const auto previous = make_classical_predictor("previous");
  const GopFrames still = film_frames(shape, 4, Chroma::still_half);
  const GopFrames* still_gops[] = {&still};
  for (const bool lossless : {true, false}) {
    INFO((lossless ? "lossless" : "abs 2"));
    CodingSettings with = lossless ? settings : bounded, without = with;
    without.polyphase = false;
    const auto inter = encode_gops(*previous, shape, still_gops, with);
    const std::size_t raster_size = encode_gops(*previous, shape, still_gops, without)[0].bytes.size();
    if (lossless) CHECK(inter[0].bytes.size() < raster_size * 24 / 25);
    // Bounded, the contexts' estimate that chooses the layout may err by a little (7,977 bytes
    // against 7,957 here since the chroma keeps its forecast under motion), not by more.
    if (!lossless) CHECK(inter[0].bytes.size() <= raster_size * 101 / 100);
    if (lossless) {
      // Frame 1's channel 1: after the transform's two bytes, the version, quantizer, choice and
      // count, frame 0's plan and 3 x (tolerance, mode, runs), frame 1's plan, its channel 0 and
      // channel 1's tolerance.
      const std::uint8_t mode = inter[0].bytes.at(2 + 4 + 10 + 1 + 3 + 1);
      CHECK((mode & 0x80) != 0);  // in the layout
      CHECK((mode & 0x0F) != 3);  // and coded against the forecast
    }
    const std::span<const std::uint8_t> inter_chunks[] = {inter[0].bytes};
    const auto back = decode_gops(*previous, shape, inter_chunks, counts, with)[0];
    CHECK(back == inter[0].reconstruction);
    if (lossless) CHECK(back == still);
  }
  // The flag in a chunk of version 12, or on an interval-coded plane (no symbols), is refused.
  auto old = encoded[0].bytes;
  old[2] = 12;
  CHECK_THROWS_WITH(decode_gops(*predictor, shape, std::array{std::span<const std::uint8_t>(old)}, counts, settings),
                    Catch::Contains("polyphase layout"));
  CodingSettings interval = bounded;
  interval.quantizer = QuantizerKind::Interval;
  auto runs = encode_gops(*previous, shape, gops, interval)[0].bytes;
  // The first plane's mode of frame 1: after the version, quantizer, choice and count, frame 0's
  // plan and 3 x (tolerance, mode, runs), frame 1's plan and the plane's tolerance.
  const std::size_t at = 4 + 10 + 2;
  REQUIRE(runs[0] >= 12);
  runs[0] = 13;
  runs[at] |= 0x80;
  CHECK_THROWS_WITH(decode_gops(*previous, shape, std::array{std::span<const std::uint8_t>(runs)}, counts, interval),
                    Catch::Contains("polyphase layout on an interval-coded plane"));
}

TEST_CASE("the colour transform's inverse gives the same pixels and verdict on every kernel path", "[colour][simd]") {
  // Planes anywhere in [0, 2M], as the inner chunk may decode them: most of the frame valid, some
  // pixels outside [0, M] once turned back, the verdict and every valid pixel the same on each path.
  for (const std::uint32_t max_value : {255u, 1023u, 8191u, 8192u, 32767u}) {
    for (const bool damaged : {false, true}) {
      INFO("max " << max_value << (damaged ? ", damaged" : ""));
      const std::size_t plane = 1000 + max_value % 7;  // a tail after the vectors
      std::mt19937 rng(max_value + damaged);
      Pixels bgr(3 * plane), yuv(3 * plane);
      for (auto& v : bgr) v = std::uint16_t(rng() % (max_value + 1));
      forward_rct(bgr, plane, max_value, yuv);
      if (damaged) yuv[rng() % yuv.size()] = std::uint16_t(rng() % (rct_max_value(max_value) + 1)), yuv[plane + 5] = 0;
      Pixels expected(3 * plane);
      const bool verdict = inverse_rct(yuv, plane, max_value, expected, 0, SIZE_MAX, SimdPath::portable);
      CHECK(verdict == !damaged);
      if (!damaged) CHECK(expected == bgr);
      for (const SimdPath path : supported_simd_paths()) {
        Pixels out(3 * plane);
        CHECK(inverse_rct(yuv, plane, max_value, out, 0, SIZE_MAX, path) == verdict);
        if (verdict) CHECK(out == expected);
        // Bands: the same pixels a few rows at a time.
        Pixels banded(3 * plane);
        bool all = true;
        for (std::size_t first = 0; first < plane; first += 97)
          all = inverse_rct(yuv, plane, max_value, banded, first, 97, path) && all;
        CHECK(all == verdict);
        if (verdict) CHECK(banded == expected);
      }
    }
  }
}

namespace {

// A frame of planes B, G, R of random pixels in [0, M], every corner of the colour cube among them.
Pixels random_bgr(std::size_t plane, std::uint32_t max_value, std::mt19937& rng) {
  Pixels bgr(3 * plane);
  for (auto& v : bgr) v = std::uint16_t(rng() % (max_value + 1));
  for (std::size_t k = 0; k < 8; ++k)
    for (std::size_t c = 0; c < 3; ++c) bgr[c * plane + k] = std::uint16_t((k >> c) & 1 ? max_value : 0);
  return bgr;
}

// Moves pixels [0, count) of transformed planes by up to `e` either way, within [0, 2M] as a
// quantizer leaves them (past M too); returns each pixel's move.
std::vector<std::int32_t> move_within(Pixels& planes, std::size_t count, std::int32_t e, std::uint32_t max_value,
                                      std::mt19937& rng) {
  std::vector<std::int32_t> moved(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::int32_t v = std::clamp(std::int32_t(planes[i]) + std::int32_t(rng() % std::uint32_t(2 * e + 1)) - e, 0,
                                      std::int32_t(rct_max_value(max_value)));
    moved[i] = v - std::int32_t(planes[i]);
    planes[i] = std::uint16_t(v);
  }
  return moved;
}

}  // namespace

TEST_CASE("the bounded colour transform's clamped inverse: the same pixels on every path, each channel within Y's error",
          "[colour][simd]") {
  for (const std::uint32_t max_value : {255u, 1023u, 8191u, 8192u, 32767u}) {
    INFO("max " << max_value);
    const std::size_t plane = 1000 + max_value % 7;  // a tail after the vectors
    std::mt19937 rng(max_value);
    const Pixels bgr = random_bgr(plane, max_value, rng);
    Pixels yuv(3 * plane);
    forward_rct(bgr, plane, max_value, yuv);
    // Y moved by up to e either way.
    const auto moved = move_within(yuv, plane, std::int32_t(std::max<std::uint32_t>(1, max_value / 50)), max_value, rng);
    Pixels expected(3 * plane);
    inverse_rct_clamped(yuv, plane, max_value, expected, 0, SIZE_MAX, SimdPath::portable);
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t i = 0; i < plane; ++i) {
        const std::int32_t error = std::int32_t(expected[c * plane + i]) - std::int32_t(bgr[c * plane + i]);
        REQUIRE(expected[c * plane + i] <= max_value);
        REQUIRE(std::abs(error) <= std::abs(moved[i]));  // Y's error, or less where clamped
      }
    for (const SimdPath path : supported_simd_paths()) {
      Pixels out(3 * plane), banded(3 * plane);
      inverse_rct_clamped(yuv, plane, max_value, out, 0, SIZE_MAX, path);
      CHECK(out == expected);
      for (std::size_t first = 0; first < plane; first += 97) inverse_rct_clamped(yuv, plane, max_value, banded, first, 97, path);
      CHECK(banded == expected);
    }
  }
}

TEST_CASE("subtract green's clamped inverse: the same pixels on every path, each channel within G's and its chroma's errors",
          "[colour][simd]") {
  for (const std::uint32_t max_value : {255u, 1023u, 8191u, 8192u, 32767u}) {
    INFO("max " << max_value);
    const std::size_t plane = 1000 + max_value % 7;  // a tail after the vectors
    std::mt19937 rng(max_value + 1);
    const Pixels bgr = random_bgr(plane, max_value, rng);
    Pixels guv(3 * plane);
    forward_subtract_green(bgr, plane, max_value, guv);
    for (std::size_t i = 0; i < plane; ++i) {  // the planes as defined
      REQUIRE(guv[i] == bgr[plane + i]);
      REQUIRE(int(guv[plane + i]) == int(bgr[i]) - int(bgr[plane + i]) + int(max_value));
      REQUIRE(int(guv[2 * plane + i]) == int(bgr[2 * plane + i]) - int(bgr[plane + i]) + int(max_value));
    }
    // Every plane moved by up to its share of the bound either way.
    const auto moved = move_within(guv, 3 * plane, std::int32_t(std::max<std::uint32_t>(1, max_value / 50)), max_value, rng);
    Pixels expected(3 * plane);
    inverse_subtract_green_clamped(guv, plane, max_value, expected, 0, SIZE_MAX, SimdPath::portable);
    for (std::size_t i = 0; i < plane; ++i) {
      const auto error = [&](std::size_t c) { return std::abs(int(expected[c * plane + i]) - int(bgr[c * plane + i])); };
      for (std::size_t c = 0; c < 3; ++c) REQUIRE(expected[c * plane + i] <= max_value);
      REQUIRE(error(1) <= std::abs(moved[i]));                                    // G: its own error
      REQUIRE(error(0) <= std::abs(moved[i]) + std::abs(moved[plane + i]));      // B: G's and U's
      REQUIRE(error(2) <= std::abs(moved[i]) + std::abs(moved[2 * plane + i]));  // R: G's and V's
    }
    for (const SimdPath path : supported_simd_paths()) {
      Pixels out(3 * plane), banded(3 * plane);
      inverse_subtract_green_clamped(guv, plane, max_value, out, 0, SIZE_MAX, path);
      CHECK(out == expected);
      for (std::size_t first = 0; first < plane; first += 97)
        inverse_subtract_green_clamped(guv, plane, max_value, banded, first, 97, path);
      CHECK(banded == expected);
    }
  }
}


TEST_CASE("a colour-transformed GOP's chroma keeps its forecast where channel 0 takes coded motion", "[colour][gop]") {
  // The luma plane takes coded motion, the chroma planes (colour differences, exact or within their
  // share) keep the previous frame as it is; the decoder builds each plane's forecast as its mode
  // says. Losslessly a drifting luma under smooth chroma (the RCT); at abs 2 a still scene with
  // noise and chroma in 2 x 2 blocks (subtract green).
  const auto previous = make_classical_predictor("previous");
  const FrameShape shape{96, 64, 3, 255};
  for (const auto& [bound, kind] : {std::pair{0, Chroma::smooth}, std::pair{2, Chroma::still_half}}) {
    INFO("abs " << bound);
    const GopFrames frames = film_frames(shape, 8, kind);
    const GopFrames* gops[] = {&frames};
    const std::size_t counts[] = {frames.size()};
    CodingSettings settings;
    if (bound > 0) settings.bound = ErrorBound{BoundMode::Abs, double(bound), 0};
    const auto encoded = encode_gops(*previous, shape, gops, settings);
    const auto& bytes = encoded[0].bytes;
    REQUIRE(bytes.size() > 25);
    REQUIRE(bytes[0] == 0x82);
    // Frame 1's planes' modes: after the transform's two bytes, the version, quantizer, choice and
    // count, frame 0's plan and 3 x (tolerance, mode, runs), frame 1's plan and each tolerance.
    constexpr std::uint8_t kMotion = 0x40;
    CHECK((bytes[18] & kMotion) != 0);
    CHECK((bytes[21] & kMotion) == 0);
    CHECK((bytes[24] & kMotion) == 0);
    const std::span<const std::uint8_t> chunks[] = {bytes};
    const auto decoded = decode_gops(*previous, shape, chunks, counts, settings)[0];
    CHECK(decoded == encoded[0].reconstruction);
    if (bound == 0) CHECK(decoded == frames);
    for (std::size_t t = 0; t < frames.size(); ++t)
      for (std::size_t i = 0; i < frames[t].size(); ++i) REQUIRE(std::abs(int(decoded[t][i]) - int(frames[t][i])) <= bound);
  }
}

TEST_CASE("a lossless colour GOP's chroma follows the luma's motion where its trial measures that smaller", "[colour][gop]") {
  // A scene panning a pixel a frame whose colour differences are a texture of their own (a hand-held
  // camera's, cup's): kept in place the chroma would code its texture's change; displaced with the
  // luma it repeats. The trial takes the RCT's side whose chroma follows the motion.
  const auto previous = make_classical_predictor("previous");
  const FrameShape shape{96, 64, 3, 255};
  const std::size_t count = 8;
  std::mt19937 rng(11);
  const std::size_t span = shape.width + count;
  std::vector<int> luma(span * shape.height), u(luma.size()), v(luma.size());
  for (std::size_t i = 0; i < luma.size(); ++i) {
    const std::size_t x = i % span, y = i / span;
    luma[i] = 100 + int(40 * std::sin(0.2 * double(x)) * std::cos(0.15 * double(y))) + int(rng() % 9);
    u[i] = int(rng() % 31) - 15, v[i] = int(rng() % 31) - 15;
  }
  GopFrames frames;
  const std::size_t plane = std::size_t(shape.width) * shape.height;
  for (std::size_t t = 0; t < count; ++t) {
    Pixels f(shape.size());
    for (std::uint32_t y = 0; y < shape.height; ++y)
      for (std::uint32_t x = 0; x < shape.width; ++x) {
        const std::size_t at = std::size_t(y) * span + x + count - t, i = std::size_t(y) * shape.width + x;
        f[i] = std::uint16_t(luma[at] + u[at] + 20);
        f[plane + i] = std::uint16_t(luma[at]);
        f[2 * plane + i] = std::uint16_t(luma[at] + v[at] + 20);
      }
    frames.push_back(std::move(f));
  }
  const GopFrames* gops[] = {&frames};
  const std::size_t counts[] = {frames.size()};
  const CodingSettings settings;
  const auto encoded = encode_gops(*previous, shape, gops, settings);
  const auto& bytes = encoded[0].bytes;
  REQUIRE(bytes.size() > 25);
  REQUIRE(bytes[0] == 0x82);
  CHECK(bytes[1] == kRctTransform);
  // Frame 1's planes' modes (as in the test above): all three with motion.
  constexpr std::uint8_t kMotion = 0x40;
  CHECK((bytes[18] & kMotion) != 0);
  CHECK((bytes[21] & kMotion) != 0);
  CHECK((bytes[24] & kMotion) != 0);
  const std::span<const std::uint8_t> chunks[] = {bytes};
  CHECK(decode_gops(*previous, shape, chunks, counts, settings)[0] == frames);
}


