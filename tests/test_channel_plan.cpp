#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "codecs/transform/channel_plan.hpp"
#include "codecs/codec_error.hpp"

using namespace tezip::codecs;

namespace {

std::vector<ChannelPlan> every_plan() {
  std::vector<ChannelPlan> plans;
  const std::array<std::uint8_t, 3> orders[] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (const auto& order : orders)
    for (const ChannelRef second : {ChannelRef::None, ChannelRef::First})
      for (const ChannelRef third : {ChannelRef::None, ChannelRef::First, ChannelRef::Second, ChannelRef::Mean})
        plans.push_back({order, second, third});
  return plans;
}

// Three planes of one picture: channel `base` smooth with a little noise, the others it plus
// stronger noise of their own, so that each costs less as its difference from `base`, and `base`
// is the cheapest alone.
std::array<std::vector<std::int32_t>, 3> related_planes(std::size_t n, std::size_t width, std::size_t base, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::array<std::vector<std::int32_t>, 3> planes;
  for (auto& p : planes) p.resize(n);
  for (std::size_t i = 0; i < n; ++i) planes[base][i] = int((i % width) / 4 + (i / width) / 4) + int(rng() % 9) - 4;
  for (std::size_t k = 0; k < 3; ++k)
    if (k != base)
      for (std::size_t i = 0; i < n; ++i) planes[k][i] = planes[base][i] + int(rng() % 31) - 15;
  return planes;
}

}  // namespace

TEST_CASE("every channel plan has its own byte, read back as it was written", "[channel_plan]") {
  std::set<std::uint8_t> bytes;
  for (const auto& plan : every_plan()) {
    const std::uint8_t b = plan.byte();
    CHECK(bytes.insert(b).second);
    CHECK(ChannelPlan::from_byte(b) == plan);
    for (std::size_t p = 0; p < 3; ++p) CHECK(plan.position(plan.order[p]) == p);
  }
  CHECK(bytes.size() == 48);
  CHECK(ChannelPlan().byte() == 0);
  CHECK_FALSE(ChannelPlan().relates_planes());
  // The deltas of chunk versions 3-5 are plans of storage order.
  CHECK(ChannelPlan::from_legacy_deltas(true, true) == ChannelPlan{{0, 1, 2}, ChannelRef::First, ChannelRef::Second});
  CHECK(ChannelPlan::from_legacy_deltas(false, false) == ChannelPlan());
  // Every byte no plan writes is refused.
  for (int b = 0; b < 256; ++b)
    if (!bytes.count(std::uint8_t(b))) CHECK_THROWS_AS(ChannelPlan::from_byte(std::uint8_t(b)), CodecError);
}

TEST_CASE("channel references are undone exactly, for any values (wrapping)", "[channel_plan]") {
  std::mt19937 rng(5);
  const std::size_t n = 257;
  std::vector<std::int32_t> plane(n), first(n), second(n), coded(n), back(n);
  const std::int32_t extremes[] = {std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max(), -1, 0, 1};
  for (std::size_t i = 0; i < n; ++i) {
    plane[i] = i < 5 ? extremes[i] : std::int32_t(rng());
    first[i] = i < 5 ? extremes[4 - i] : std::int32_t(rng());
    second[i] = i < 5 ? extremes[i] : std::int32_t(rng() % 1000) - 500;
  }
  for (const ChannelRef ref : {ChannelRef::None, ChannelRef::First, ChannelRef::Second, ChannelRef::Mean}) {
    INFO("reference " << int(ref));
    apply_channel_ref(ref, plane, first, second, coded);
    undo_channel_ref(ref, coded, first, second, back);
    CHECK(back == plane);
    // In place, as the encoder and decoder may call them.
    std::vector<std::int32_t> in_place = plane;
    apply_channel_ref(ref, in_place, first, second, in_place);
    CHECK(in_place == coded);
  }
  // The mean is the floor of the exact mean, never wrapped.
  std::vector<std::int32_t> a{std::numeric_limits<std::int32_t>::max(), -3, 3}, b{std::numeric_limits<std::int32_t>::max(), 0, 0};
  std::vector<std::int32_t> zero(3, 0), out(3);
  apply_channel_ref(ChannelRef::Mean, zero, a, b, out);
  CHECK(out == std::vector<std::int32_t>{-std::numeric_limits<std::int32_t>::max(), 2, -1});
  CHECK_THROWS_AS(apply_channel_ref(ChannelRef::First, zero, std::vector<std::int32_t>(2), {}, out), CodecError);
  CHECK_THROWS_AS(apply_channel_ref(ChannelRef::Mean, zero, a, {}, out), CodecError);
}

TEST_CASE("the fused pass gives undo_channel_ref's sums and dequantization's pixels", "[channel_plan][simd]") {
  std::mt19937 rng(9);
  const std::size_t n = 1000;
  for (const std::uint32_t max_value : {255u, 65535u})
    for (const std::uint32_t tolerance : {0u, 2u, 7u}) {
      const PlaneBound bound{tolerance, 0, max_value};
      REQUIRE(fused_dequantization(bound));
      // Planes whose sums land near the forecast, some (the damaged ones) far outside: lossless
      // planes refuse them, uniform bins clamp them as dequantize_plane does.
      std::vector<std::int32_t> plane(n), first(n), second(n), sums(n), expected(n);
      std::vector<std::uint16_t> forecast(n), pixels(n), want(n);
      for (std::size_t i = 0; i < n; ++i) {
        forecast[i] = std::uint16_t(rng() % (max_value + 1));
        first[i] = std::int32_t(rng() % 64) - 32;
        second[i] = std::int32_t(rng() % 64) - 32;
        plane[i] = std::int32_t(rng() % 64) - 32;
      }
      for (const bool damaged : {false, true}) {
        if (damaged) plane[n / 2] = std::int32_t(max_value) + 100, plane[n / 3] = std::numeric_limits<std::int32_t>::min() + 5;
        for (const ChannelRef ref : {ChannelRef::First, ChannelRef::Second, ChannelRef::Mean})
          for (const SimdPath path : supported_simd_paths())
            for (const bool keep : {true, false}) {  // sums stored, or not (no plane coded later needs them)
              INFO("max " << max_value << ", tolerance " << tolerance << ", damaged " << damaged << ", reference " << int(ref)
                          << ", " << simd_name(path) << ", sums kept " << keep);
              undo_channel_ref(ref, plane, first, second, expected);
              bool outside = false;
              for (std::size_t i = 0; i < n; ++i) {
                const std::int64_t y = std::int64_t(forecast[i]) + expected[i];
                outside = outside || y < 0 || y > std::int64_t(max_value);
              }
              LiteralCursor no_literals({});
              if (!outside || tolerance > 0) dequantize_plane(expected, forecast, bound, want, no_literals, SimdPath::portable);
              std::fill(sums.begin(), sums.end(), -7);
              const auto kept = keep ? std::span<std::int32_t>(sums) : std::span<std::int32_t>();
              CHECK(undo_channel_ref_dequantize(ref, plane, first, second, kept, forecast, bound, pixels, path) ==
                    (outside && tolerance == 0));
              if (damaged) CHECK(outside);
              if (keep) CHECK(sums == expected);
              if (!keep) CHECK(std::count(sums.begin(), sums.end(), -7) == std::ptrdiff_t(n));
              if (!outside || tolerance > 0) CHECK(pixels == want);
            }
      }
    }
  // Bounds without a 32-bit uniform path are refused: the caller dequantizes them apart.
  CHECK_FALSE(fused_dequantization(PlaneBound{40000, 0, 65535}));
  CHECK_FALSE(fused_dequantization(PlaneBound{0, 0.05, 255}));
  // The mean of extreme references, exact on every path (the floor of the true mean, never wrapped),
  // with symbols that bring the sums back near the forecast.
  {
    const std::size_t m = 67;
    std::vector<std::int32_t> a(m), b(m), plane(m), expected(m), sums(m);
    std::vector<std::uint16_t> forecast(m, 100), pixels(m);
    for (std::size_t i = 0; i < m; ++i) {
      const std::int32_t k = std::int32_t(i);
      a[i] = i % 2 ? std::numeric_limits<std::int32_t>::max() - k : std::numeric_limits<std::int32_t>::min() + k;
      b[i] = i % 3 ? std::numeric_limits<std::int32_t>::max() - 2 * k : std::numeric_limits<std::int32_t>::min() + 3 * k;
      const std::int64_t mean = (std::int64_t(a[i]) + b[i]) >> 1;  // floor
      plane[i] = std::int32_t(std::uint32_t(std::int64_t(k % 5) - 2 - mean));
    }
    undo_channel_ref(ChannelRef::Mean, plane, a, b, expected);
    for (std::size_t i = 0; i < m; ++i) REQUIRE(expected[i] == std::int32_t(i % 5) - 2);
    for (const SimdPath path : supported_simd_paths()) {
      INFO(simd_name(path));
      CHECK_FALSE(undo_channel_ref_dequantize(ChannelRef::Mean, plane, a, b, sums, forecast, PlaneBound{0, 0, 255}, pixels, path));
      CHECK(sums == expected);
      for (std::size_t i = 0; i < m; ++i) REQUIRE(pixels[i] == 100 + expected[i]);
    }
  }
  std::vector<std::int32_t> zero(4, 0), out(4);
  std::vector<std::uint16_t> f(4, 0), px(4);
  const PlaneBound lossless{0, 0, 255};
  CHECK_THROWS_AS(undo_channel_ref_dequantize(ChannelRef::None, zero, zero, zero, out, f, lossless, px), CodecError);
  CHECK_THROWS_AS(undo_channel_ref_dequantize(ChannelRef::First, zero, zero, zero, out, std::vector<std::uint16_t>(3), lossless, px),
                  CodecError);
  CHECK_THROWS_AS(undo_channel_ref_dequantize(ChannelRef::First, zero, zero, zero, out, f, PlaneBound{0, 0.05, 255}, px), CodecError);
}

TEST_CASE("the channel order and references follow the data", "[channel_plan]") {
  const std::size_t width = 64, n = width * 48;
  std::vector<std::int32_t> scratch(n);
  for (const std::size_t base : {0, 1, 2}) {
    INFO("the channel the others follow: " << base);
    std::vector<ChannelCosts> frames;
    for (std::uint32_t seed = 0; seed < 3; ++seed) {
      const auto planes = related_planes(n, width, base, seed);
      frames.push_back(estimate_channel_costs({planes[0], planes[1], planes[2]}, {false, false, false}, width, scratch));
      // The estimate of a plane as it is is choose_transform's.
      for (std::size_t k = 0; k < 3; ++k) CHECK(frames.back().cost[k][3].cost == choose_transform(planes[k], width).cost);
    }
    const auto order = choose_channel_order(frames);
    CHECK(order[0] == base);  // the noisy one alone, the others as small differences from it
    for (const auto& f : frames) {
      const auto plan = choose_channel_refs(f, order);
      CHECK(plan.order == order);
      CHECK(plan.second == ChannelRef::First);
      CHECK(plan.third == ChannelRef::First);  // minus `base`
      CHECK(plan_cost(f, plan).cost < plan_cost(f, ChannelPlan{order, ChannelRef::None, ChannelRef::None}).cost);
    }
  }
  // Independent planes: storage order, nothing referenced.
  std::mt19937 rng(9);
  std::array<std::vector<std::int32_t>, 3> planes;
  for (auto& p : planes) {
    p.resize(n);
    for (auto& v : p) v = int(rng() % 21) - 10;
  }
  const ChannelCosts independent[] = {estimate_channel_costs({planes[0], planes[1], planes[2]}, {true, false, true}, width, scratch)};
  const auto order = choose_channel_order(independent);
  CHECK(choose_channel_refs(independent[0], order) == ChannelPlan{order, ChannelRef::None, ChannelRef::None});
  // Intra planes are coded as they are: no spatial transform.
  CHECK(plan_cost(independent[0], ChannelPlan()).transform[0] == PlaneTransform::None);
}
