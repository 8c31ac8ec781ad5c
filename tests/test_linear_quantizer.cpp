#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "codecs/codec_error.hpp"
#include "codecs/quantize/error_bound.hpp"
#include "codecs/quantize/linear_quantizer.hpp"
#include "codecs/transform/plane_transform.hpp"

using namespace tezip::codecs;

namespace {

std::vector<std::uint16_t> random_plane(std::size_t n, std::uint32_t max_value, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint16_t> v(n);
  std::uniform_int_distribution<std::uint32_t> any(0, max_value);
  for (auto& x : v) x = std::uint16_t(any(rng));
  return v;
}

// A forecast near x, as a predictor would give, sometimes far off.
std::vector<std::uint16_t> noisy_forecast(const std::vector<std::uint16_t>& x, std::uint32_t max_value, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0, 6);
  std::vector<std::uint16_t> f(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    double v = x[i] + noise(rng) * (i % 17 == 0 ? 40 : 1);
    f[i] = std::uint16_t(std::clamp(v, 0.0, double(max_value)));
  }
  return f;
}

}  // namespace

TEST_CASE("linear quantizer keeps every pixel within a uniform tolerance", "[codecs][quantizer]") {
  for (std::uint32_t max_value : {255u, 65535u}) {
    const auto x = random_plane(4096, max_value, 1);
    const auto f = noisy_forecast(x, max_value, 2);
    for (std::uint32_t e : {0u, 1u, 2u, 3u, 7u, 100u}) {
      PlaneBound bound{e, 0, max_value};
      std::vector<std::int32_t> q(x.size());
      std::vector<std::uint16_t> recon(x.size()), decoded(x.size()), literals;
      quantize_plane(x, f, bound, q, recon, literals);
      CHECK(literals.empty());
      LiteralCursor cursor(literals);
      dequantize_plane(q, f, bound, decoded, cursor);
      REQUIRE(decoded == recon);
      for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(std::abs(int(recon[i]) - int(x[i])) <= int(e));
    }
  }
}

TEST_CASE("linear quantizer honours pointwise relative bounds, zeros exact", "[codecs][quantizer]") {
  for (double rel : {0.001, 0.01, 0.05, 0.25, 1.0}) {
    auto x = random_plane(4096, 255, 3);
    for (std::size_t i = 0; i < x.size(); i += 5) x[i] = 0;
    const auto f = noisy_forecast(x, 255, 4);
    PlaneBound bound{0, rel, 255};
    std::vector<std::int32_t> q(x.size());
    std::vector<std::uint16_t> recon(x.size()), decoded(x.size()), literals;
    quantize_plane(x, f, bound, q, recon, literals);
    LiteralCursor cursor(literals);
    dequantize_plane(q, f, bound, decoded, cursor);
    REQUIRE(cursor.exhausted());
    REQUIRE(decoded == recon);
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(std::abs(double(recon[i]) - double(x[i])) <= rel * x[i]);
  }
}

namespace {

// The intra coder's round trip: the decoder reproduces the encoder's reconstruction, every pixel
// within the bound's tolerance, exactly when lossless.
void require_intra_round_trip(const std::vector<std::uint16_t>& plane, std::size_t width, const PlaneBound& bound) {
  std::vector<std::int32_t> q(plane.size());
  std::vector<std::uint16_t> recon(plane.size()), decoded(plane.size()), literals;
  quantize_plane_intra(plane, width, bound, q, recon, literals);
  LiteralCursor cursor(literals);
  dequantize_plane_intra(q, width, bound, decoded, cursor);
  REQUIRE(decoded == recon);
  for (std::size_t i = 0; i < plane.size(); ++i) REQUIRE(std::abs(int(recon[i]) - int(plane[i])) <= int(bound.tolerance));
  if (bound.tolerance == 0) REQUIRE(recon == plane);
}

}  // namespace

TEST_CASE("intra quantizer round trips and holds bounds on key frames", "[codecs][quantizer]") {
  const auto x = random_plane(64 * 48, 65535, 5);
  for (std::uint32_t e : {0u, 2u, 50u}) require_intra_round_trip(x, 64, PlaneBound{e, 0, 65535});
}

TEST_CASE("lossless residuals that leave the pixel range are rejected", "[codecs][quantizer]") {
  std::vector<std::int32_t> q = {300};
  std::vector<std::uint16_t> f = {10}, out(1), none;
  LiteralCursor cursor(none);
  CHECK_THROWS_AS(dequantize_plane(q, f, PlaneBound{0, 0, 255}, out, cursor), tezip::codecs::CodecError);
  CHECK_THROWS_AS(dequantize_plane_intra(q, 1, PlaneBound{0, 0, 255}, out, cursor), tezip::codecs::CodecError);
}

TEST_CASE("lossless quantize_plane writes no reconstruction where none is given", "[codecs][quantizer]") {
  const std::vector<std::uint16_t> plane = {0, 7, 255, 128, 3}, forecast = {5, 7, 0, 200, 3};
  std::vector<std::int32_t> with(plane.size()), without(plane.size());
  std::vector<std::uint16_t> recon(plane.size()), literals;
  quantize_plane(plane, forecast, PlaneBound{0, 0, 255}, with, recon, literals);
  CHECK(recon == plane);
  quantize_plane(plane, forecast, PlaneBound{0, 0, 255}, without, {}, literals);
  CHECK(without == with);
  CHECK(without == std::vector<std::int32_t>{-5, 0, 255, -72, 0});
  // A tolerance's reconstruction differs from the plane: it must be given.
  CHECK_THROWS(quantize_plane(plane, forecast, PlaneBound{2, 0, 255}, without, {}, literals));
}

TEST_CASE("error bounds: real bounds floor to integer tolerances", "[codecs][bound]") {
  ErrorBound abs{BoundMode::Abs, 2.5, 0};
  CHECK(abs.tolerance(0, 255, 255) == 2);
  CHECK(abs.allows(10, 12, 0, 255));
  CHECK_FALSE(abs.allows(10, 13, 0, 255));
  ErrorBound rel{BoundMode::Rel, 0, 0.01};
  CHECK(rel.tolerance(0, 250, 255) == 2);
  CHECK(rel.tolerance(100, 100, 255) == 0);
  ErrorBound absrel{BoundMode::AbsRel, 1.5, 0.1};
  CHECK(absrel.tolerance(0, 255, 255) == 1);
  CHECK(pointwise_tolerance(0.05, 0) == 0);
  CHECK(pointwise_tolerance(0.05, 59) == 2);
  CHECK(parse_bound_mode("pwrel") == BoundMode::PwRel);
  CHECK_THROWS(parse_bound_mode("fuzzy"));
}

TEST_CASE("dequantize_plane's plane-wide fast paths equal LinearQuantizer::reconstruct on any symbol", "[codecs][quantizer][simd]") {
  std::mt19937 rng(5);
  for (const std::uint32_t max_value : {255u, 4095u, 65535u}) {
    for (const std::uint32_t tolerance : {0u, 1u, 2u, 7u, 1000u, 65535u}) {
      PlaneBound bound;
      bound.max_value = max_value;
      bound.tolerance = tolerance;
      const std::size_t n = 4096 + 5;  // the SIMD loops' tails too
      std::vector<std::int32_t> symbols(n);
      std::vector<std::uint16_t> forecast(n), fast(n), reference(n);
      for (std::size_t i = 0; i < n; ++i) {
        forecast[i] = std::uint16_t(rng() % (max_value + 1));
        // Small symbols as coded, huge ones as a hostile stream may hold.
        symbols[i] = i % 4 == 0 ? std::int32_t(rng()) : std::int32_t(rng() % 9) - 4;
      }
      if (tolerance == 0)  // lossless: only residuals that stay in range are valid
        for (std::size_t i = 0; i < n; ++i)
          symbols[i] = std::int32_t(rng() % (max_value + 1)) - std::int32_t(forecast[i]);
      const LinearQuantizer quantizer(bound);
      for (std::size_t i = 0; i < n; ++i) REQUIRE(quantizer.reconstruct(symbols[i], forecast[i], reference[i]));
      std::vector<std::uint16_t> no_literals;
      for (const SimdPath path : supported_simd_paths()) {
        INFO("path " << simd_name(path) << " max " << max_value << " tolerance " << tolerance);
        LiteralCursor literals(no_literals);
        std::fill(fast.begin(), fast.end(), std::uint16_t(0));
        dequantize_plane(symbols, forecast, bound, fast, literals, path);
        REQUIRE(fast == reference);
        if (tolerance == 0) {  // one residual out of range, in the vector part or in the tail: refused
          for (const std::size_t at : {std::size_t(17), n - 2}) {
            auto bad = symbols;
            bad[at] = std::int32_t(max_value + 1) - std::int32_t(forecast[at]);
            LiteralCursor again(no_literals);
            CHECK_THROWS_AS(dequantize_plane(bad, forecast, bound, fast, again, path), tezip::codecs::CodecError);
            bad[at] = -1 - std::int32_t(forecast[at]);
            CHECK_THROWS_AS(dequantize_plane(bad, forecast, bound, fast, again, path), tezip::codecs::CodecError);
          }
        }
      }
    }
  }
}

TEST_CASE("quantize_plane's uniform fast paths equal LinearQuantizer::quantize on every residual", "[codecs][quantizer][simd]") {
  // The fast paths divide by multiplying with a reciprocal; they must agree with the quantizer's
  // own division for every residual of 16-bit pixels, at tolerances up to where they hand over.
  std::mt19937 rng(7);
  for (const std::uint32_t tolerance : {1u, 2u, 3u, 7u, 100u, 1000u, 4095u, 16381u, 16382u, 16383u, 40000u}) {
    PlaneBound bound;
    bound.tolerance = tolerance;
    bound.max_value = 65535;
    const LinearQuantizer quantizer(bound);
    const std::size_t width = 512;
    std::vector<std::uint16_t> plane(width * 16), forecast(plane.size()), recon(plane.size()), expected_recon(plane.size());
    for (std::size_t i = 0; i < plane.size(); ++i) {
      plane[i] = std::uint16_t(rng());
      forecast[i] = std::uint16_t(i % 3 == 0 ? 65535 - plane[i] : i % 3 == 1 ? rng() : 0);
    }
    std::vector<std::int32_t> symbols(plane.size());
    std::vector<std::uint16_t> literals;
    // Every path, on a length that leaves a tail after the last whole vector.
    const std::size_t n = plane.size() - 3;
    for (const SimdPath path : supported_simd_paths()) {
      CAPTURE(simd_name(path));
      std::fill(symbols.begin(), symbols.end(), 0);
      quantize_plane(std::span(plane).first(n), std::span(forecast).first(n), bound, std::span(symbols).first(n),
                     std::span(recon).first(n), literals, path);
      CHECK(literals.empty());
      for (std::size_t i = 0; i < n; ++i) {
        std::vector<std::uint16_t> none;
        REQUIRE(symbols[i] == quantizer.quantize(plane[i], forecast[i], expected_recon[i], none));
        REQUIRE(recon[i] == expected_recon[i]);
      }
    }
    // The intra path (forecasts from its own reconstruction): the decoder, which divides nowhere,
    // reproduces it, and every pixel keeps its bound.
    quantize_plane_intra(plane, width, bound, symbols, recon, literals);
    std::vector<std::uint16_t> lit;
    LiteralCursor cursor(lit);
    std::vector<std::uint16_t> decoded(plane.size());
    dequantize_plane_intra(symbols, width, bound, decoded, cursor);
    REQUIRE(decoded == recon);
    for (std::size_t i = 0; i < plane.size(); ++i) REQUIRE(std::abs(int(recon[i]) - int(plane[i])) <= int(tolerance));
  }
}

TEST_CASE("intra reconstruction four rows at a time matches the encoder on every shape", "[codecs][quantizer]") {
  // The decoder reconstructs four rows together (codecs/transform/wavefront.hpp): widths below and above
  // its minimum, heights with 0-3 rows left over, lossless and bounded, 8 and 16 bits.
  std::mt19937 rng(21);
  for (const std::size_t width : {1u, 2u, 7u, 8u, 9u, 33u}) {
    for (const std::size_t height : {1u, 2u, 4u, 5u, 6u, 7u, 8u, 13u}) {
      for (const std::uint32_t max_value : {255u, 65535u}) {
        for (const bool sparse : {false, true}) {  // sparse: constant rows, filled without the chain
          std::vector<std::uint16_t> plane(width * height);
          for (auto& v : plane) v = std::uint16_t(rng() % 3 == 0 ? rng() % (max_value + 1) : max_value / 2 + rng() % 5);
          if (sparse)
            for (std::size_t i = 0; i < plane.size(); ++i) plane[i] = (i / width) % 7 == 3 && rng() % 4 == 0 ? plane[i] : 9;
          for (const std::uint32_t e : {0u, 1u, 3u}) require_intra_round_trip(plane, width, PlaneBound{e, 0, max_value});
        }
      }
    }
  }
}

TEST_CASE("dequantize_plane_intra gives the portable path's pixels on every SIMD path", "[codecs][quantizer][simd]") {
  // Planes coded by quantize_plane_intra (smooth, textured, sparse) and arbitrary symbols (a
  // damaged stream): the same pixels on every path, or the same refusal (lossless out of range).
  std::mt19937 rng(21);
  for (const std::uint32_t max_value : {255u, 4095u, 65535u}) {
    for (const std::uint32_t tolerance : {0u, 1u, 2u, 7u}) {
      for (const std::size_t width : {16u, 17u, 40u, 100u}) {
        // 58 rows: row 0, then strips of 16, 16, 16 and 8 rows, and one.
        for (const std::size_t height : {1u, 8u, 9u, 17u, 33u, 58u}) {
          for (const int kind : {0, 1, 2, 3}) {  // smooth, textured, sparse, arbitrary symbols
            PlaneBound bound;
            bound.max_value = max_value;
            bound.tolerance = tolerance;
            const std::size_t n = width * height;
            std::vector<std::int32_t> symbols(n);
            if (kind == 3) {
              for (auto& v : symbols) v = rng() % 3 == 0 ? std::int32_t(rng()) : std::int32_t(rng() % 21) - 10;
            } else {
              std::vector<std::uint16_t> plane(n), recon(n), literals;
              for (std::size_t i = 0; i < n; ++i) {
                const std::uint32_t x = std::uint32_t(i % width), y = std::uint32_t(i / width);
                std::uint32_t v = kind == 0 ? (x * 3 + y * 5) % (max_value + 1) : rng() % (max_value + 1);
                if (kind == 2) v = (y % 9 == 4 && rng() % 4 == 0) ? rng() % (max_value + 1) : 7 % (max_value + 1);
                plane[i] = std::uint16_t(v);
              }
              quantize_plane_intra(plane, width, bound, symbols, recon, literals);
            }
            std::vector<std::uint16_t> portable(n), out(n), none;
            bool portable_refused = false;
            try {
              LiteralCursor literals(none);
              dequantize_plane_intra(symbols, width, bound, portable, literals, SimdPath::portable);
            } catch (const tezip::codecs::CodecError&) {
              portable_refused = true;
            }
            if (kind != 3 || tolerance > 0) REQUIRE_FALSE(portable_refused);
            for (const SimdPath path : supported_simd_paths()) {
              INFO("path " << simd_name(path) << " max " << max_value << " tolerance " << tolerance << " " << width << "x"
                            << height << " kind " << kind);
              bool refused = false;
              try {
                LiteralCursor literals(none);
                dequantize_plane_intra(symbols, width, bound, out, literals, path);
              } catch (const tezip::codecs::CodecError&) {
                refused = true;
              }
              REQUIRE(refused == portable_refused);
              if (!refused) REQUIRE(out == portable);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("dequantize_plane_intra refuses a lossless pixel out of range inside a SIMD strip", "[codecs][quantizer][simd]") {
  const std::size_t width = 40, height = 41;  // row 0, two strips of 16 rows, one of 8
  PlaneBound bound;
  bound.max_value = 255;
  std::vector<std::uint16_t> plane(width * height), recon(plane.size()), literals, out(plane.size());
  for (std::size_t i = 0; i < plane.size(); ++i) plane[i] = std::uint16_t((i % width) * 2 + (i / width) * 3);
  std::vector<std::int32_t> symbols(plane.size());
  quantize_plane_intra(plane, width, bound, symbols, recon, literals);
  for (const std::int32_t push : {300, -300}) {  // above the range, and below it (wraps above)
    for (const std::size_t at : {5 * width + 20, 3 * width, 8 * width + width - 1, 20 * width + 3, 32 * width + width - 1,
                                  36 * width + 11}) {
      auto bad = symbols;
      bad[at] += push;
      for (const SimdPath path : supported_simd_paths()) {
        INFO("path " << simd_name(path) << " at " << at << " push " << push);
        LiteralCursor cursor(literals);
        CHECK_THROWS_AS(dequantize_plane_intra(bad, width, bound, out, cursor, path), tezip::codecs::CodecError);
      }
    }
  }
}

TEST_CASE("lossless intra quantization is the median transform of the plane, its reconstruction the plane", "[codecs][quantizer]") {
  // The lossless path computes every residual from the original pixels at once; the median
  // transform (codecs/transform/plane_transform) is the independent reference. 8 and 16 bits, edge shapes.
  std::mt19937 rng(41);
  for (const std::size_t width : {1u, 2u, 9u, 40u}) {
    for (const std::size_t height : {1u, 2u, 7u}) {
      for (const std::uint32_t max_value : {255u, 65535u}) {
        std::vector<std::uint16_t> plane(width * height);
        for (auto& v : plane) v = std::uint16_t(rng() % 4 == 0 ? (rng() % 2) * max_value : rng() % (max_value + 1));
        std::vector<std::int32_t> as_int(plane.begin(), plane.end()), expected(plane.size()), symbols(plane.size());
        tezip::codecs::forward_transform(tezip::codecs::PlaneTransform::Median, as_int, width, expected);
        std::vector<std::uint16_t> recon(plane.size()), literals;
        quantize_plane_intra(plane, width, PlaneBound{0, 0, max_value}, symbols, recon, literals);
        INFO("width " << width << " height " << height << " max " << max_value);
        CHECK(symbols == expected);
        CHECK(recon == plane);
        CHECK(literals.empty());
      }
    }
  }
}

TEST_CASE("sampled intra symbols are the lossless intra symbols of the sampled rows", "[codecs][quantizer]") {
  // Exact for lossless planes (sample_intra_symbols' contract): every cost_sample_step-th row of
  // quantize_plane_intra's symbols, in order, by either predictor. 8 and 16 bits, widths with and
  // without an inner column, heights below and above the sampling.
  std::mt19937 rng(43);
  for (const IntraPredictor predictor : {IntraPredictor::median, IntraPredictor::mean}) {
    for (const std::size_t width : {1u, 2u, 3u, 40u}) {
      for (const std::size_t height : {1u, 5u, 16u, 37u}) {
        for (const std::uint32_t max_value : {255u, 65535u}) {
          std::vector<std::uint16_t> plane(width * height);
          for (auto& v : plane) v = std::uint16_t(rng() % (max_value + 1));
          std::vector<std::int32_t> symbols(plane.size());
          std::vector<std::uint16_t> recon(plane.size()), literals;
          const PlaneBound lossless{0, 0, max_value};
          quantize_plane_intra(plane, width, lossless, symbols, recon, literals, simd_path(), predictor);
          std::vector<std::int32_t> expected;
          const std::size_t step = tezip::codecs::cost_sample_step(height);
          for (std::size_t y = 0; y < height; y += step)
            expected.insert(expected.end(), symbols.begin() + std::ptrdiff_t(y * width),
                            symbols.begin() + std::ptrdiff_t((y + 1) * width));
          INFO("predictor " << int(predictor) << " width " << width << " height " << height << " max " << max_value);
          CHECK(sample_intra_symbols(plane, width, lossless, predictor) == expected);
        }
      }
    }
  }
}

TEST_CASE("quantize_plane_intra gives the portable path's symbols and pixels on every SIMD path", "[codecs][quantizer][simd]") {
  // Smooth, textured and sparse planes, and planes whose pixels sit at both ends of the range
  // (clamped reconstructions), under tolerances from 1 up to a bin wider than the range; widths
  // below, at and beside the AVX2 steps, heights below, at and beside whole strips of 8 and 16.
  std::mt19937 rng(22);
  for (const std::uint32_t max_value : {255u, 4095u, 65535u}) {
    for (const std::uint32_t tolerance : {1u, 2u, 7u, 300u, 16382u}) {
      for (const std::size_t width : {1u, 7u, 8u, 9u, 16u, 33u, 100u}) {
        for (const std::size_t height : {1u, 2u, 8u, 9u, 16u, 17u, 40u}) {
          for (const int kind : {0, 1, 2, 3}) {  // smooth, textured, sparse, extremes
            PlaneBound bound;
            bound.max_value = max_value;
            bound.tolerance = tolerance;
            const std::size_t n = width * height;
            std::vector<std::uint16_t> plane(n);
            for (std::size_t i = 0; i < n; ++i) {
              const std::uint32_t x = std::uint32_t(i % width), y = std::uint32_t(i / width);
              std::uint32_t v = kind == 0 ? (x * 3 + y * 5) % (max_value + 1) : rng() % (max_value + 1);
              if (kind == 2) v = (y % 9 == 4 && rng() % 4 == 0) ? rng() % (max_value + 1) : 7 % (max_value + 1);
              if (kind == 3) v = rng() % 2 == 0 ? max_value - rng() % 3 : rng() % 3;
              plane[i] = std::uint16_t(v);
            }
            std::vector<std::int32_t> expected(n), symbols(n);
            std::vector<std::uint16_t> expected_recon(n), recon(n), literals;
            quantize_plane_intra(plane, width, bound, expected, expected_recon, literals, SimdPath::portable);
            for (std::size_t i = 0; i < n; ++i)
              REQUIRE(std::abs(int(expected_recon[i]) - int(plane[i])) <= int(tolerance));
            for (const SimdPath path : supported_simd_paths()) {
              INFO("path " << simd_name(path) << " max " << max_value << " tolerance " << tolerance << " " << width << "x"
                            << height << " kind " << kind);
              std::fill(symbols.begin(), symbols.end(), -12345);
              std::fill(recon.begin(), recon.end(), std::uint16_t(12345));
              quantize_plane_intra(plane, width, bound, symbols, recon, literals, path);
              REQUIRE(symbols == expected);
              REQUIRE(recon == expected_recon);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("interpolated planes quantized in closed loop: every pixel within the bound, the decoder's pixels the encoder's",
          "[codecs][quantizer]") {
  // A smooth field (a bowl and a slow wave) plus noise, on shapes that leave the levels' edges
  // partial; tolerances whose bins take the multiplication and one too wide for it.
  for (const std::uint32_t max_value : {255u, 65535u}) {
    for (const auto& [w, h] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 1}, {1, 9}, {13, 1}, {7, 5}, {33, 17}, {64, 48}}) {
      std::mt19937 rng(std::uint32_t(w * 100 + h));
      std::normal_distribution<double> noise(0, double(max_value) / 400);
      std::vector<std::uint16_t> plane(w * h);
      for (std::size_t y = 0; y < h; ++y)
        for (std::size_t x = 0; x < w; ++x) {
          const double bowl = (double(x) - 20) * (double(x) - 20) + (double(y) - 10) * (double(y) - 10);
          const double v = double(max_value) * (0.2 + bowl / 4000 + 0.3 * std::sin(0.2 * double(x) + 0.1 * double(y))) + noise(rng);
          plane[y * w + x] = std::uint16_t(std::clamp(v, 0.0, double(max_value)));
        }
      // Against no forecast (the pixels interpolated) and against a forecast near the plane (its
      // residual interpolated), some of it far off.
      const auto forecast = noisy_forecast(plane, max_value, std::uint32_t(w + h));
      for (const std::uint32_t e : {1u, 2u, 16u, 20000u}) {
        for (const bool against : {false, true}) {
          INFO(w << "x" << h << " max " << max_value << " e " << e << (against ? " with a forecast" : ""));
          const PlaneBound bound{e, 0, max_value};
          const std::span<const std::uint16_t> f =
              against ? std::span<const std::uint16_t>(forecast) : std::span<const std::uint16_t>();
          std::vector<std::int32_t> symbols(plane.size());
          std::vector<std::uint16_t> recon(plane.size()), decoded(plane.size());
          quantize_plane_interpolated(plane, f, w, bound, symbols, recon);
          for (std::size_t i = 0; i < plane.size(); ++i) {
            REQUIRE(std::abs(int(recon[i]) - int(plane[i])) <= int(e));
            REQUIRE(recon[i] <= max_value);
          }
          dequantize_plane_interpolated(symbols, f, w, bound, decoded);
          REQUIRE(decoded == recon);
        }
      }
    }
  }
  // On a smooth field most symbols are 0 where the bins of the pixels themselves keep changing.
  const std::size_t w = 96, h = 64;
  std::vector<std::uint16_t> field(w * h);
  for (std::size_t i = 0; i < field.size(); ++i)
    field[i] = std::uint16_t(32000 + 20000 * std::sin(0.05 * double(i % w)) * std::cos(0.04 * double(i / w)));
  const PlaneBound bound{16, 0, 65535};
  std::vector<std::int32_t> symbols(field.size());
  std::vector<std::uint16_t> recon(field.size());
  quantize_plane_interpolated(field, {}, w, bound, symbols, recon);
  CHECK(std::count(symbols.begin(), symbols.end(), 0) > std::ptrdiff_t(field.size() * 9 / 10));
  // Any symbols (a damaged stream's) decode to pixels in range; a pointwise bound is refused.
  std::mt19937 rng(7);
  for (auto& s : symbols) s = std::int32_t(rng());
  std::vector<std::uint16_t> decoded(field.size());
  dequantize_plane_interpolated(symbols, {}, w, PlaneBound{3, 0, 1000}, decoded);
  CHECK(*std::max_element(decoded.begin(), decoded.end()) <= 1000);
  CHECK_THROWS(dequantize_plane_interpolated(symbols, {}, w, PlaneBound{0, 0.1, 65535}, decoded));
  CHECK_THROWS(quantize_plane_interpolated(field, {}, w + 1, bound, symbols, recon));
  CHECK_THROWS(quantize_plane_interpolated(field, std::vector<std::uint16_t>(7), w, bound, symbols, recon));
}

TEST_CASE("the mean of four: its forecast by hand, at the edges and inside", "[codecs][quantizer]") {
  // A 3 x 2 plane: row 0 from the left, column 0 from above, the last column's up-right its up.
  const std::vector<std::uint16_t> p = {10, 20, 30,  //
                                        40, 50, 61};
  CHECK(mean_forecast(p, 0, 0, 3) == 0);
  CHECK(mean_forecast(p, 1, 1, 3) == 10);
  CHECK(mean_forecast(p, 3, 0, 3) == 10);
  CHECK(mean_forecast(p, 4, 1, 3) == (40 + 10 + 20 + 30 + 2) / 4);  // 25
  CHECK(mean_forecast(p, 5, 2, 3) == (50 + 20 + 30 + 30 + 2) / 4);  // 33
  // 16-bit pixels: the sum of four stays exact.
  const std::vector<std::uint16_t> q = {65535, 65535, 65535, 65535, 65535, 0};
  CHECK(mean_forecast(q, 4, 1, 3) == 65535);
}

TEST_CASE("intra planes forecast by the mean of four: round trips, bounds, every path's pixels the portable one's",
          "[codecs][quantizer][simd]") {
  // Noisy flat planes (what the mean is for), textured and extreme ones; lossless, uniform
  // tolerances and a pointwise relative bound (with escapes); widths 1 to 33, 8 and 16 bits.
  std::mt19937 rng(71);
  for (const std::uint32_t max_value : {255u, 65535u}) {
    const std::uint32_t top = max_value;
    std::vector<PlaneBound> bounds = {PlaneBound{0, 0, top}, PlaneBound{1, 0, top}, PlaneBound{2, 0, top},
                                      PlaneBound{9, 0, top}};
    PlaneBound pointwise{0, 0, top};
    pointwise.pointwise_rel = 0.05;
    bounds.push_back(pointwise);
    for (const auto& bound : bounds) {
      for (const std::size_t width : {1u, 2u, 3u, 16u, 33u}) {
        for (const std::size_t height : {1u, 2u, 17u}) {
          for (const int kind : {0, 1, 2}) {  // noisy flat, random, extremes
            const std::size_t n = width * height;
            std::vector<std::uint16_t> plane(n);
            std::normal_distribution<double> noise(0, 3);
            for (auto& v : plane) {
              const double x = kind == 0 ? top / 2.0 + noise(rng) : kind == 1 ? double(rng() % (top + 1))
                                                                              : (rng() % 2 ? top : 0);
              v = std::uint16_t(std::clamp(x, 0.0, double(top)));
            }
            std::vector<std::int32_t> symbols(n);
            std::vector<std::uint16_t> recon(n), literals;
            quantize_plane_intra(plane, width, bound, symbols, recon, literals, SimdPath::portable, IntraPredictor::mean);
            INFO("max " << max_value << " tolerance " << bound.tolerance << " pointwise " << bound.pointwise_rel << " "
                        << width << "x" << height << " kind " << kind);
            for (std::size_t i = 0; i < n; ++i) {
              const double allowed = bound.pointwise_rel > 0 ? bound.pointwise_rel * plane[i] : bound.tolerance;
              REQUIRE(std::abs(double(recon[i]) - double(plane[i])) <= allowed);
            }
            if (bound.lossless()) {
              REQUIRE(recon == plane);
              // Lossless symbols are each pixel less the mean of its original neighbours.
              for (std::size_t i = 0; i < n; ++i)
                REQUIRE(symbols[i] == int(plane[i]) - int(mean_forecast(plane, i, i % width, width)));
            }
            for (const SimdPath path : supported_simd_paths()) {
              std::vector<std::int32_t> s(n);
              std::vector<std::uint16_t> r(n), l, decoded(n, 12345);
              quantize_plane_intra(plane, width, bound, s, r, l, path, IntraPredictor::mean);
              REQUIRE(s == symbols);
              REQUIRE(r == recon);
              REQUIRE(l == literals);
              LiteralCursor cursor(literals);
              dequantize_plane_intra(symbols, width, bound, decoded, cursor, path, IntraPredictor::mean);
              REQUIRE(cursor.exhausted());
              REQUIRE(decoded == recon);
            }
          }
        }
      }
    }
  }
  // A lossless residual that leaves the pixel range is refused, as the median's.
  std::vector<std::int32_t> q = {5, 300};
  std::vector<std::uint16_t> out(2), none;
  LiteralCursor cursor(none);
  CHECK_THROWS_AS(dequantize_plane_intra(q, 2, PlaneBound{0, 0, 255}, out, cursor, simd_path(), IntraPredictor::mean),
                  tezip::codecs::CodecError);
}
