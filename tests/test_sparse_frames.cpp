#include <catch2/catch.hpp>

#include <random>

#include "codecs/codec_error.hpp"
#include "codecs/quantize/error_bound.hpp"
#include "codecs/transform/sparse_frames.hpp"
#include "compressor/gop_codec.hpp"
#include "format/errors.hpp"
#include "predictor/predictor.hpp"

using namespace tezip;
using namespace tezip::codecs;

namespace {

// Depth maps in miniature: an empty (zero) background and a moving elliptic object whose values
// are a tilted plane plus noise of +-1, as a depth camera's. Neither LZ (the noise) nor a forecast
// (the moving edges between zero and far values) does well on it.
GopFrames depth_frames(const FrameShape& shape, std::size_t frames, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const std::uint32_t base = shape.max_value / 3;
  GopFrames out;
  for (std::size_t t = 0; t < frames; ++t) {
    Pixels f(shape.size(), 0);
    const double cx = shape.width * 0.4 + 1.5 * double(t), cy = shape.height * 0.5 + 0.5 * double(t);
    const double rx = shape.width * 0.2, ry = shape.height * 0.25;  // about 16% of the frame, castle 23%
    for (std::uint32_t c = 0; c < shape.channels; ++c)
      for (std::uint32_t y = 0; y < shape.height; ++y)
        for (std::uint32_t x = 0; x < shape.width; ++x) {
          const double u = (x - cx) / rx, v = (y - cy) / ry;
          if (u * u + v * v > 1) continue;
          // Each channel its own level and slope (colour: a rendered label image's channels).
          const std::uint32_t tilt = (shape.max_value / 255) * ((c + 1) * x + (3 - c) * y) / 4;
          const std::uint32_t value = base * (c + 2) / 2 + tilt + rng() % 3;
          f[(std::size_t(c) * shape.height + y) * shape.width + x] = std::uint16_t(std::min(value, shape.max_value));
        }
    out.push_back(std::move(f));
  }
  return out;
}

// One pixel in `one_in` the background (half by default), the rest anything (the background too,
// now and then).
std::vector<std::uint16_t> random_sparse_plane(std::size_t n, std::uint32_t max_value, std::uint32_t seed,
                                               std::uint16_t background = 0, std::uint32_t one_in = 2) {
  std::mt19937 rng(seed);
  std::vector<std::uint16_t> p(n);
  for (auto& v : p) v = rng() % one_in == 1 ? background : std::uint16_t(rng() % (max_value + 1));
  return p;
}

}  // namespace

TEST_CASE("sparse planes round-trip: masks, median residuals, every edge", "[sparse]") {
  for (const std::uint32_t max_value : {255u, 4095u, 65535u})
    for (const std::size_t width : {1, 7, 8, 13, 64, 83}) {
      const std::size_t height = 9, n = width * height;
      const auto background = std::uint16_t(width % 2 ? 0 : max_value / 3);  // zeros, or another value
      INFO("max " << max_value << ", width " << width << ", background " << background);
      const std::vector<std::vector<std::uint16_t>> planes = {
          random_sparse_plane(n, max_value, 1, background), std::vector<std::uint16_t>(n, background),
          std::vector<std::uint16_t>(n, 0), std::vector<std::uint16_t>(n, std::uint16_t(max_value)),
          random_sparse_plane(n, max_value, 2, background),
          // Mostly foreground: runs of eight foreground pixels (a whole mask byte) at any column.
          random_sparse_plane(n, max_value, 4, background, 24)};
      std::vector<std::uint8_t> mask, residuals;
      for (const auto& p : planes) pack_sparse_plane(p, width, max_value, background, mask, residuals);
      CHECK(mask.size() == sparse_mask_bytes(planes.size(), n));
      std::size_t foreground = 0;
      for (const auto& p : planes)
        foreground += std::size_t(std::count_if(p.begin(), p.end(), [&](auto v) { return v != background; }));
      CHECK(residuals.size() == foreground * (max_value > 255 ? 2 : 1));
      SparsePlaneReader reader(mask, residuals, max_value, background);
      for (const auto& p : planes) {
        std::vector<std::uint16_t> back(n, 77);
        reader.read(width, back);
        REQUIRE(back == p);
      }
      reader.finish();
    }
}

TEST_CASE("damaged sparse planes are refused", "[sparse]") {
  const std::size_t width = 10, n = 30;
  const auto plane = random_sparse_plane(n, 255, 3);
  std::vector<std::uint8_t> mask, residuals;
  pack_sparse_plane(plane, width, 255, 0, mask, residuals);
  std::vector<std::uint16_t> out(n);
  const auto read = [&](std::span<const std::uint8_t> m, std::span<const std::uint8_t> r, std::uint32_t max_value = 255) {
    SparsePlaneReader reader(m, r, max_value, 0);
    reader.read(width, out);
    reader.finish();
  };
  CHECK_NOTHROW(read(mask, residuals));
  CHECK_THROWS_AS(read(std::span(mask).first(mask.size() - 1), residuals), CodecError);          // mask ends early
  CHECK_THROWS_AS(read(mask, std::span(residuals).first(residuals.size() - 1)), CodecError);     // residuals end early
  auto more = residuals;
  more.push_back(0);
  CHECK_THROWS_AS(read(mask, more), CodecError);  // bytes left over
  auto padded = mask;
  padded.back() |= 1;  // a bit past the plane's 30 pixels
  CHECK_THROWS_AS(read(padded, residuals), CodecError);
  // The first nonzero pixel's residual changed so that it decodes to zero, where the mask says
  // it is not; and a 12-bit plane whose pixel passes its range.
  const auto first = std::size_t(std::find_if(plane.begin(), plane.end(), [](auto v) { return v != 0; }) - plane.begin());
  REQUIRE(first < n);
  auto zeroed = residuals;
  zeroed[0] = std::uint8_t(zeroed[0] - plane[first]);
  CHECK_THROWS_AS(read(mask, zeroed), CodecError);
  std::vector<std::uint16_t> big(n, 0);
  big[0] = 4000;
  std::vector<std::uint8_t> mask12, residuals12;
  pack_sparse_plane(big, width, 4095, 0, mask12, residuals12);
  SparsePlaneReader narrow(mask12, residuals12, 3000, 0);
  CHECK_THROWS_AS(narrow.read(width, out), CodecError);
  CHECK_THROWS_AS(SparsePlaneReader(mask, residuals, 255, 256), CodecError);  // a background past the range
  CHECK_THROWS_AS(pack_sparse_plane(plane, 7, 255, 0, mask, residuals), CodecError);  // not whole rows
}

TEST_CASE("depth-like frames become sparse chunks losslessly and at abs 2, not under rel or pwrel", "[sparse][gop]") {
  const auto predictor = make_classical_predictor("auto");
  for (const auto shape : {FrameShape{96, 64, 1, 65535}, FrameShape{96, 64, 1, 255}, FrameShape{64, 48, 3, 255}})
    for (const bool white : {false, true}) {  // the background 0, or the largest value
      INFO(shape.width << "x" << shape.height << "x" << shape.channels << " max " << shape.max_value << " white " << white);
      auto frames = depth_frames(shape, 10, 4);
      if (white)
        for (auto& f : frames) std::replace(f.begin(), f.end(), std::uint16_t{0}, std::uint16_t(shape.max_value));
      const GopFrames* gops[] = {&frames};
      CodingSettings settings;
      const auto encoded = encode_gops(*predictor, shape, gops, settings);
      REQUIRE(!encoded[0].bytes.empty());
      CHECK(encoded[0].bytes[0] == 0x81);  // a sparse chunk
      CHECK(encoded[0].stats.pixels);
      CodingSettings without = settings;
      without.pixel_chunks = false;
      CHECK(encoded[0].bytes.size() < encode_gops(*predictor, shape, gops, without)[0].bytes.size());
      const std::span<const std::uint8_t> chunks[] = {encoded[0].bytes};
      const std::size_t counts[] = {frames.size()};
      CHECK(decode_gops(*predictor, shape, chunks, counts, settings)[0] == frames);
      CHECK(encoded[0].reconstruction == frames);
      // Damaged: truncated, another frame count, the masks read as another shape's.
      CHECK_THROWS_AS(decode_gops(*predictor, shape, std::array{std::span(encoded[0].bytes).first(encoded[0].bytes.size() - 2)},
                                  counts, settings),
                      DataError);
      const std::size_t fewer[] = {frames.size() - 1};
      CHECK_THROWS_AS(decode_gops(*predictor, shape, chunks, fewer, settings), DataError);
      const FrameShape other{shape.width, shape.height - 8, shape.channels, shape.max_value};
      CHECK_THROWS(decode_gops(*predictor, other, chunks, counts, settings));
      if (shape.max_value == 255) {  // a background past the pixel range (the chunk's bytes 4-5)
        auto past = encoded[0].bytes;
        past[5] = 1;
        CHECK_THROWS_AS(decode_gops(*predictor, shape, std::array{std::span<const std::uint8_t>(past)}, counts, settings),
                        DataError);
      }

      // Under abs 2 the bins of five values go sparse on 16-bit frames (on 8-bit ones the bins leave
      // the predictive chunk smaller: the measured choice), within the bound on every pixel either
      // way; rel and pwrel, whose tolerance follows each plane's range or each pixel, keep their
      // other chunks.
      CodingSettings bounded;
      bounded.bound = ErrorBound{BoundMode::Abs, 2, 0};
      const auto binned = encode_gops(*predictor, shape, gops, bounded);
      if (shape.max_value == 65535) CHECK(binned[0].bytes[0] == 0x81);
      const std::span<const std::uint8_t> binned_chunks[] = {binned[0].bytes};
      const auto back = decode_gops(*predictor, shape, binned_chunks, counts, bounded)[0];
      CHECK(back == binned[0].reconstruction);
      for (std::size_t t = 0; t < frames.size(); ++t)
        for (std::size_t i = 0; i < frames[t].size(); ++i)
          if (std::abs(int(frames[t][i]) - int(back[t][i])) > 2)
            FAIL("frame " << t << " pixel " << i << ": " << frames[t][i] << " -> " << back[t][i]);
      for (const ErrorBound other : {ErrorBound{BoundMode::Rel, 0, 0.01}, ErrorBound{BoundMode::PwRel, 0, 0.05}}) {
        CodingSettings spans;
        spans.bound = other;
        CHECK(encode_gops(*predictor, shape, gops, spans)[0].bytes[0] != 0x81);
      }
    }
}
