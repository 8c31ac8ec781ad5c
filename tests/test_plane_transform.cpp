#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "codecs/codec_error.hpp"
#include "codecs/transform/plane_transform.hpp"
#include "codecs/transform/polyphase.hpp"

using namespace tezip::codecs;

TEST_CASE("plane transforms invert exactly, even on extreme values", "[codecs][transform]") {
  std::mt19937 rng(11);
  const std::size_t width = 37, height = 23;
  std::vector<std::int32_t> plane(width * height);
  for (auto& v : plane) v = std::int32_t(rng());
  plane[5] = INT32_MIN;
  plane[6] = INT32_MAX;
  for (auto t : {PlaneTransform::None, PlaneTransform::Left, PlaneTransform::Median, PlaneTransform::Gradient,
                 PlaneTransform::Interpolation}) {
    std::vector<std::int32_t> out(plane.size());
    forward_transform(t, plane, width, out);
    inverse_transform(t, out, width);
    REQUIRE(out == plane);
  }
}

TEST_CASE("plane transforms invert on one row and on one column", "[codecs][transform]") {
  std::mt19937 rng(12);
  for (const auto& [width, height] : {std::pair<std::size_t, std::size_t>{1, 9}, {9, 1}, {1, 1}}) {
    std::vector<std::int32_t> plane(width * height);
    for (auto& v : plane) v = std::int32_t(rng());
    for (auto t : {PlaneTransform::Left, PlaneTransform::Median, PlaneTransform::Gradient, PlaneTransform::Interpolation}) {
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

TEST_CASE("the gradient transform leaves v - a - b + c, and is chosen on smooth curves where the median's clamp is not exact",
          "[codecs][transform]") {
  // A bowl with a saddle: second differences everywhere, so the median (which clamps a + b - c to
  // [min(a, b), max(a, b)] where the surface bends) leaves more than the unclamped plane through
  // the three neighbours.
  const std::size_t width = 96, height = 64;
  std::vector<std::int32_t> bowl(width * height), out(bowl.size());
  for (std::size_t y = 0; y < height; ++y)
    for (std::size_t x = 0; x < width; ++x) {
      const auto dx = std::int32_t(x) - 40, dy = std::int32_t(y) - 30;
      bowl[y * width + x] = (dx * dx + 3 * dy * dy + 2 * dx * dy) / 4;
    }
  forward_transform(PlaneTransform::Gradient, bowl, width, out);
  for (std::size_t y = 0; y < height; ++y)
    for (std::size_t x = 0; x < width; ++x) {
      const std::size_t i = y * width + x;
      const std::int32_t expected = y == 0   ? bowl[i] - (x > 0 ? bowl[i - 1] : 0)
                                    : x == 0 ? bowl[i] - bowl[i - width]
                                             : bowl[i] - bowl[i - 1] - bowl[i - width] + bowl[i - width - 1];
      REQUIRE(out[i] == expected);
    }
  std::vector<std::int32_t> median(bowl.size());
  forward_transform(PlaneTransform::Median, bowl, width, median);
  CHECK(estimate_cost(out, width) * 2 < estimate_cost(median, width));
  // The interpolation's cubic is exact on the bowl: it takes the plane.
  CHECK(choose_transform(bowl, width).transform == PlaneTransform::Interpolation);
  // A value outside the five is refused both ways.
  CHECK_THROWS_AS(forward_transform(PlaneTransform(3), bowl, width, out), CodecError);
  CHECK_THROWS_AS(inverse_transform(PlaneTransform(6), out, width), CodecError);
}

TEST_CASE("the interpolation transform predicts each level from the coarser ones, inverts any plane, and is chosen on smooth fields",
          "[codecs][transform]") {
  // Every shape against powers of two (the levels' grid), values of every kind: the inverse gives
  // the plane back, and a quadratic surface leaves residuals of its rounding only away from the
  // edges (the cubic is exact on it), where the gradient leaves its mixed second difference.
  std::mt19937 rng(31);
  for (const auto& [width, height] : {std::pair<std::size_t, std::size_t>{1, 1}, {2, 1}, {1, 5}, {3, 3}, {8, 8}, {9, 7}, {17, 33},
                                      {64, 64}, {100, 37}}) {
    for (const int kind : {0, 1, 2}) {  // smooth, extreme, small noise
      INFO(width << " x " << height << " kind " << kind);
      std::vector<std::int32_t> plane(width * height), out(plane.size());
      for (std::size_t i = 0; i < plane.size(); ++i)
        plane[i] = kind == 0 ? std::int32_t((i % width) * (i % width) + 3 * (i / width) * (i % width))
                   : kind == 1 ? std::int32_t(rng())
                               : std::int32_t(rng() % 5) - 2;
      forward_transform(PlaneTransform::Interpolation, plane, width, out);
      CHECK(out[0] == plane[0]);
      std::vector<std::int32_t> back = out;
      inverse_transform(PlaneTransform::Interpolation, back, width);
      REQUIRE(back == plane);
      if (height > 1) CHECK_THROWS_AS(inverse_transform_rows(PlaneTransform::Interpolation, back, width, 0, 1), std::invalid_argument);
    }
  }
  // Against the definition, the finest level of a 16 x 16 plane: (5, 8) along its row, the cubic
  // through columns 2, 4, 6 and 8; (4, 7) along its column, through rows 4, 6, 8 and 10.
  const std::size_t width = 16;
  std::vector<std::int32_t> plane(width * width), out(plane.size());
  for (auto& v : plane) v = std::int32_t(rng() % 1000);
  forward_transform(PlaneTransform::Interpolation, plane, width, out);
  const auto at = [&](std::size_t x, std::size_t y) { return std::int64_t(plane[y * width + x]); };
  const auto cubic = [](std::int64_t c, std::int64_t a, std::int64_t b, std::int64_t d) { return (9 * (a + b) - c - d + 8) >> 4; };
  CHECK(out[8 * width + 5] == at(5, 8) - cubic(at(2, 8), at(4, 8), at(6, 8), at(8, 8)));
  CHECK(out[7 * width + 4] == at(4, 7) - cubic(at(4, 4), at(4, 6), at(4, 8), at(4, 10)));
  CHECK(out[8 * width + 15] == at(15, 8) - at(14, 8));          // past the last column: the value before
  CHECK(out[8 * width + 1] == at(1, 8) - ((at(0, 8) + at(2, 8)) >> 1));  // no value 3 before: the mean

  // A smooth field (waves) takes it over the gradient, and its estimate is the residuals' bits.
  const std::size_t w = 128, h = 96;
  std::vector<std::int32_t> field(w * h), residual(field.size());
  for (std::size_t y = 0; y < h; ++y)
    for (std::size_t x = 0; x < w; ++x)
      field[y * w + x] = std::int32_t(std::lround(4000 * std::sin(0.11 * double(x) + 0.07 * double(y)) * std::cos(0.05 * double(y))));
  const TransformChoice chosen = choose_transform(field, w);
  CHECK(chosen.transform == PlaneTransform::Interpolation);
  CHECK(chosen.cost == estimate_interpolation_cost(field, w));
  forward_transform(PlaneTransform::Gradient, field, w, residual);
  CHECK(chosen.cost * 2 < estimate_cost(residual, w));
}

TEST_CASE("the median transform inverts four rows at a time on every shape", "[codecs][transform]") {
  // Widths below and above the four-row reconstruction's minimum, 0-3 rows left over, smooth and
  // extreme values (where a + b - c leaves 32 bits).
  std::mt19937 rng(13);
  for (const std::size_t width : {1u, 2u, 7u, 8u, 9u, 33u}) {
    for (const std::size_t height : {1u, 2u, 4u, 5u, 6u, 7u, 8u, 13u, 24u}) {
      for (const int kind : {0, 1, 2}) {  // smooth, extreme, sparse (constant rows: filled without the chain)
        const bool extreme = kind == 1;
        std::vector<std::int32_t> plane(width * height);
        for (std::size_t i = 0; i < plane.size(); ++i)
          plane[i] = extreme ? std::int32_t(rng()) : std::int32_t(i % width + i / width) + std::int32_t(rng() % 3);
        if (kind == 2)
          for (std::size_t i = 0; i < plane.size(); ++i) plane[i] = (i / width) % 11 == 2 && rng() % 3 == 0 ? plane[i] : -4;
        if (extreme && plane.size() > 3) plane[plane.size() / 2] = INT32_MIN, plane[plane.size() / 3] = INT32_MAX;
        std::vector<std::int32_t> out(plane.size());
        forward_transform(PlaneTransform::Median, plane, width, out);
        inverse_transform(PlaneTransform::Median, out, width);
        REQUIRE(out == plane);
      }
    }
  }
}

TEST_CASE("inverting a plane a few rows at a time gives the whole plane's values", "[codecs][transform]") {
  std::mt19937 rng(14);
  const std::size_t width = 19, height = 23;
  std::vector<std::int32_t> plane(width * height);
  for (auto& v : plane) v = std::int32_t(rng() % 41) - 20;
  for (auto t : {PlaneTransform::Left, PlaneTransform::Median, PlaneTransform::Gradient}) {
    std::vector<std::int32_t> coded(plane.size());
    forward_transform(t, plane, width, coded);
    for (const std::size_t step : {1u, 3u, 4u, 8u, 23u}) {
      std::vector<std::int32_t> out = coded;
      for (std::size_t y = 0; y < height; y += step) inverse_transform_rows(t, out, width, y, std::min(height, y + step));
      REQUIRE(out == plane);
    }
  }
  std::vector<std::int32_t> small(width * 2);
  CHECK_THROWS_AS(inverse_transform_rows(PlaneTransform::Left, small, width, 1, 3), std::invalid_argument);
}

TEST_CASE("the median, left and gradient inverses give the portable path's values on every SIMD path, for any symbols",
          "[codecs][transform][simd]") {
  // Arbitrary symbols (what a damaged stream holds) as well as a coded plane's: the paths must agree
  // on every input, the wrapping sums and the extremes too. Passes of 8 rows as the decoder makes
  // them, and of other sizes, so that strips start on any row.
  std::mt19937 rng(15);
  for (const std::size_t width : {1u, 7u, 8u, 16u, 17u, 23u, 40u, 100u}) {
    for (const std::size_t height : {1u, 2u, 9u, 16u, 17u, 33u, 50u}) {
      for (const int kind : {0, 1, 2, 3}) {  // small, extreme, sparse, a coded smooth plane
        std::vector<std::int32_t> symbols(width * height);
        for (std::size_t i = 0; i < symbols.size(); ++i) {
          switch (kind) {
            case 0: symbols[i] = std::int32_t(rng() % 61) - 30; break;
            case 1: symbols[i] = rng() % 5 == 0 ? (rng() % 2 ? INT32_MAX - std::int32_t(rng() % 3) : INT32_MIN + std::int32_t(rng() % 3))
                                                : std::int32_t(rng()); break;
            case 2: symbols[i] = (i / width) % 9 == 4 && rng() % 4 == 0 ? std::int32_t(rng() % 7) - 3 : 0; break;
            default: symbols[i] = std::int32_t(3 * (i % width) + 2 * (i / width) + rng() % 5); break;
          }
        }
        if (kind == 3) {
          std::vector<std::int32_t> coded(symbols.size());
          forward_transform(PlaneTransform::Median, symbols, width, coded);
          symbols.swap(coded);
        }
        for (const PlaneTransform transform : {PlaneTransform::Median, PlaneTransform::Left, PlaneTransform::Gradient})
          for (const std::size_t step : {8u, 5u, 64u, 16u, 17u}) {
            std::vector<std::int32_t> portable = symbols;
            for (std::size_t y = 0; y < height; y += step)
              inverse_transform_rows(transform, portable, width, y, std::min(height, y + step), SimdPath::portable);
            for (const SimdPath path : supported_simd_paths()) {
              INFO("transform " << int(transform) << " width " << width << " height " << height << " kind " << kind << " step "
                                << step << " path " << simd_name(path));
              std::vector<std::int32_t> out = symbols;
              for (std::size_t y = 0; y < height; y += step)
                inverse_transform_rows(transform, out, width, y, std::min(height, y + step), path);
              REQUIRE(out == portable);
            }
          }
      }
    }
  }
}

TEST_CASE("choose_transform's estimate is each transform's residual estimate, and the estimates agree on every SIMD path", "[codecs][transform][simd]") {
  // The reference: each transform's residuals by forward_transform (med(), not the clamped form),
  // estimated by estimate_cost over the same sampled rows; the cheapest wins, ties the simpler.
  // Planes wide enough that the vector kernel flushes its byte counters inside a row (all zeros:
  // every step adds to one counter), values of every bit length up to 32 (the float conversion's
  // shifted range and the one-by-one buckets), and shapes the vectors do not fill.
  std::mt19937 rng(23);
  for (const std::size_t width : {1u, 5u, 9u, 17u, 100u, 2100u}) {
    for (const std::size_t height : {1u, 3u, 16u, 41u}) {
      for (const int kind : {0, 1, 2, 3, 4, 5}) {  // small, extreme, sparse, smooth, 16-bit, zeros
        std::vector<std::int32_t> plane(width * height);
        for (std::size_t i = 0; i < plane.size(); ++i) {
          switch (kind) {
            case 0: plane[i] = std::int32_t(rng() % 61) - 30; break;
            case 1: plane[i] = rng() % 5 == 0 ? (rng() % 2 ? INT32_MAX - std::int32_t(rng() % 3) : INT32_MIN + std::int32_t(rng() % 3))
                                              : std::int32_t(rng()) >> (rng() % 32); break;
            case 2: plane[i] = rng() % 9 == 0 ? std::int32_t(rng() % 7) - 3 : 0; break;
            case 3: plane[i] = std::int32_t(3 * (i % width) + 2 * (i / width) + rng() % 5); break;
            case 4: plane[i] = std::int32_t(rng() % 65536); break;
            default: plane[i] = 0; break;
          }
        }
        TransformChoice expected{PlaneTransform::None, UINT64_MAX};
        for (const auto t : {PlaneTransform::None, PlaneTransform::Left, PlaneTransform::Median, PlaneTransform::Gradient}) {
          std::vector<std::int32_t> residual(plane.size());
          forward_transform(t, plane, width, residual);
          if (const auto bits = estimate_cost(residual, width); bits < expected.cost) expected = {t, bits};
        }
        if (expected.transform == PlaneTransform::Gradient) {  // the interpolation weighed too: groups of rows
          std::vector<std::int32_t> residual(plane.size()), sample;
          forward_transform(PlaneTransform::Interpolation, plane, width, residual);
          const std::size_t step = cost_sample_step(height);
          for (std::size_t y = 0; y < height; ++y)
            if ((y / step) % step == 0) sample.insert(sample.end(), residual.begin() + y * width, residual.begin() + (y + 1) * width);
          const double others = double((height + step - 1) / step * width);
          const auto bits = std::uint64_t(double(estimate_cost_rows(sample)) * others / double(sample.size()) + 0.5);
          CHECK(bits == estimate_interpolation_cost(plane, width));
          if (bits < expected.cost) expected = {PlaneTransform::Interpolation, bits};
        }
        for (const SimdPath path : supported_simd_paths()) {
          INFO("width " << width << " height " << height << " kind " << kind << " path " << simd_name(path));
          const TransformChoice got = choose_transform(plane, width, path);
          CHECK(got.transform == expected.transform);
          CHECK(got.cost == expected.cost);
          // The one-stream estimates count with the same kernel.
          CHECK(estimate_cost(plane, width, path) == estimate_cost(plane, width, SimdPath::portable));
          CHECK(estimate_cost_rows(plane, path) == estimate_cost_rows(plane, SimdPath::portable));
        }
      }
    }
  }
}

TEST_CASE("the polyphase layout puts each 2 x 2 phase in a corner and inverts on every kernel path, any size",
          "[codecs][transform][simd]") {
  std::mt19937 rng(21);
  for (const auto& [width, height] :
       {std::pair<std::size_t, std::size_t>{1, 1}, {1, 7}, {7, 1}, {2, 2}, {5, 3}, {64, 48}, {37, 23}, {33, 4}, {34, 5}}) {
    INFO(width << " x " << height);
    std::vector<std::int32_t> plane(width * height), out(plane.size()), back(plane.size());
    for (auto& v : plane) v = std::int32_t(rng());
    to_polyphase(std::span<const std::int32_t>(plane), width, std::span<std::int32_t>(out));
    const std::size_t even_rows = (height + 1) / 2, even_cols = (width + 1) / 2;
    for (std::size_t y = 0; y < height; ++y)
      for (std::size_t x = 0; x < width; ++x) {
        const std::size_t to_y = y % 2 ? even_rows + y / 2 : y / 2, to_x = x % 2 ? even_cols + x / 2 : x / 2;
        REQUIRE(out[to_y * width + to_x] == plane[y * width + x]);
      }
    for (const SimdPath path : supported_simd_paths()) {  // each kernel path against the layout itself
      INFO(simd_name(path));
      std::fill(back.begin(), back.end(), 0);
      from_polyphase(std::span<const std::int32_t>(out), width, std::span<std::int32_t>(back), path);
      REQUIRE(back == plane);
    }
  }
  std::vector<std::int32_t> a(10), b(9);
  CHECK_THROWS_AS(to_polyphase(std::span<const std::int32_t>(a), 3, std::span<std::int32_t>(a)), std::invalid_argument);
  CHECK_THROWS_AS(from_polyphase(std::span<const std::int32_t>(a), 5, std::span<std::int32_t>(b)), std::invalid_argument);
}

TEST_CASE("the context estimate sees where values lie, which the order-0 estimate does not", "[codecs][transform]") {
  // The median residuals of a plane held in 2 x 2 blocks (chroma stored at half resolution): zeros
  // at three pixels of four, the half-size plane's residuals at the fourth.
  const std::size_t width = 128, height = 96;
  std::mt19937 rng(22);
  std::vector<std::int32_t> half((width / 2) * (height / 2)), plane(width * height), residuals(plane.size()), poly(plane.size());
  for (std::size_t y = 0; y < height / 2; ++y)
    for (std::size_t x = 0; x < width / 2; ++x)
      half[y * (width / 2) + x] = std::int32_t(20 * std::sin(0.2 * x) + 15 * std::cos(0.3 * y) + rng() % 5);
  for (std::size_t y = 0; y < height; ++y)
    for (std::size_t x = 0; x < width; ++x) plane[y * width + x] = half[(y / 2) * (width / 2) + x / 2];
  forward_transform(PlaneTransform::Median, plane, width, residuals);
  to_polyphase(std::span<const std::int32_t>(residuals), width, std::span<std::int32_t>(poly));
  CHECK(estimate_cost_rows(poly) == estimate_cost_rows(residuals));  // the same values, all of them counted
  CHECK(estimate_context_cost(poly, width) < estimate_context_cost(residuals, width) * 3 / 4);
  // A plane of independent noise gains nothing from the layout.
  std::vector<std::int32_t> noise(plane.size()), noise_poly(plane.size());
  for (auto& v : noise) v = std::int32_t(rng() % 64) - 32;
  to_polyphase(std::span<const std::int32_t>(noise), width, std::span<std::int32_t>(noise_poly));
  const double ratio = double(estimate_context_cost(noise_poly, width)) / double(estimate_context_cost(noise, width));
  CHECK(ratio > 0.97);
  CHECK(ratio < 1.03);
}

TEST_CASE("the context estimate of the polyphase layout, read in place, is the estimate of the laid-out plane",
          "[codecs][transform]") {
  std::mt19937 rng(29);
  for (const auto& [width, height] : {std::pair<std::size_t, std::size_t>{128, 96}, {37, 23}, {2, 2}, {1, 9}, {9, 1}, {64, 200}}) {
    INFO(width << " x " << height);
    std::vector<std::int32_t> plane(width * height), poly(plane.size());
    for (std::size_t i = 0; i < plane.size(); ++i)  // smooth in one phase, noise in the others
      plane[i] = std::int32_t((i % 2) ? rng() % 41 : rng() % 3) - ((i % 2) ? 20 : 1);
    to_polyphase(std::span<const std::int32_t>(plane), width, std::span<std::int32_t>(poly));
    CHECK(estimate_context_cost(plane, width, true) == estimate_context_cost(poly, width));
    if (width > 2 && height > 2) CHECK(estimate_context_cost(plane, width, true) != estimate_context_cost(plane, width));
  }
}
