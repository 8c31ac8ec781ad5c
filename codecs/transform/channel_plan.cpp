#include "codecs/transform/channel_plan.hpp"

#include <algorithm>

#include "codecs/codec_error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TEZIP_HAVE_AVX2_CHANNEL_REF 1
#endif

namespace tezip::codecs {
namespace {

constexpr std::array<std::array<std::uint8_t, 3>, 6> kOrders{{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}};

// Wrapping: hostile symbols may be anything, and the inverse must still be defined.
inline std::int32_t wrap_sub(std::int32_t a, std::int32_t b) { return std::int32_t(std::uint32_t(a) - std::uint32_t(b)); }
inline std::int32_t wrap_add(std::int32_t a, std::int32_t b) { return std::int32_t(std::uint32_t(a) + std::uint32_t(b)); }
inline std::int32_t floor_mean(std::int32_t a, std::int32_t b) { return std::int32_t((std::int64_t(a) + b) >> 1); }

void check_sizes(ChannelRef ref, std::size_t n, std::span<const std::int32_t> first, std::span<const std::int32_t> second,
                 std::size_t out) {
  if (out != n) throw CodecError("channel reference: output size differs from the plane's");
  if (ref != ChannelRef::None && ref != ChannelRef::Second && first.size() != n)
    throw CodecError("channel reference: first plane's size differs");
  if ((ref == ChannelRef::Second || ref == ChannelRef::Mean) && second.size() != n)
    throw CodecError("channel reference: second plane's size differs");
}

// fn(reference), reference(i) the value element i is coded against: one loop per kind of
// reference, each of which the compiler vectorizes. `ref` is not None.
template <class Fn>
void with_reference(ChannelRef ref, std::span<const std::int32_t> first, std::span<const std::int32_t> second, Fn fn) {
  switch (ref) {
    case ChannelRef::First: return fn([&](std::size_t i) { return first[i]; });
    case ChannelRef::Second: return fn([&](std::size_t i) { return second[i]; });
    case ChannelRef::Mean: return fn([&](std::size_t i) { return floor_mean(first[i], second[i]); });
    case ChannelRef::None: break;
  }
  throw CodecError("unknown channel reference");
}

#ifdef TEZIP_HAVE_AVX2_CHANNEL_REF
// undo_channel_ref_dequantize on 16 pixels a step (the compiler's loop, on the baseline's SSE2,
// spent most of its time packing 32-bit sums to 16-bit pixels): the sums wrap as wrap_add, the mean
// is (a & b) + ((a ^ b) >> 1), floor_mean's value without 64 bits. Returns the pixels done.
template <ChannelRef Ref, bool Keep>
[[gnu::target("avx2")]] inline __m256i sums8(const std::int32_t* p, const std::int32_t* a, const std::int32_t* b,
                                            std::int32_t* o, std::size_t i) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
  __m256i r;
  if constexpr (Ref == ChannelRef::First) {
    r = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
  } else if constexpr (Ref == ChannelRef::Second) {
    r = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
  } else {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    r = _mm256_add_epi32(_mm256_and_si256(x, y), _mm256_srai_epi32(_mm256_xor_si256(x, y), 1));
  }
  const __m256i s = _mm256_add_epi32(v, r);
  if constexpr (Keep) _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + i), s);
  return s;
}

// Lossless (Width 1): f + s, where `outside` gets a nonzero lane for a pixel outside [0, max_value]
// (compared unsigned: below 0 wraps above it; such pixels saturate instead of wrapping). Uniform
// bins: f + clamp(s, -limit, limit) * w clamped to the pixel range, as dequantize_plane.
template <bool Lossless>
[[gnu::target("avx2")]] inline __m256i pixels8(__m256i f, __m256i s, __m256i w, __m256i limit, __m256i top, __m256i& outside) {
  if constexpr (Lossless) {
    const __m256i y = _mm256_add_epi32(f, s);
    outside = _mm256_or_si256(outside, _mm256_xor_si256(_mm256_max_epu32(y, top), top));
    return y;
  } else {
    const __m256i q = _mm256_max_epi32(_mm256_min_epi32(s, limit), _mm256_sub_epi32(_mm256_setzero_si256(), limit));
    const __m256i y = _mm256_add_epi32(f, _mm256_mullo_epi32(q, w));
    return _mm256_min_epi32(_mm256_max_epi32(y, _mm256_setzero_si256()), top);
  }
}

template <ChannelRef Ref, bool Keep, bool Lossless>
[[gnu::target("avx2")]] std::size_t undo_dequantize_avx2(const std::int32_t* p, const std::int32_t* a, const std::int32_t* b,
                                                        std::int32_t* o, const std::uint16_t* f, std::int32_t width,
                                                        std::int32_t limit, std::uint32_t max_value, std::uint16_t* px,
                                                        std::size_t n, std::uint32_t& bad) {
  const __m256i top = _mm256_set1_epi32(std::int32_t(max_value)), w = _mm256_set1_epi32(width), lim = _mm256_set1_epi32(limit);
  __m256i outside = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i f16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(f + i));
    const __m256i y0 = pixels8<Lossless>(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(f16)), sums8<Ref, Keep>(p, a, b, o, i), w,
                                         lim, top, outside);
    const __m256i y1 = pixels8<Lossless>(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(f16, 1)),
                                         sums8<Ref, Keep>(p, a, b, o, i + 8), w, lim, top, outside);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(px + i), _mm256_permute4x64_epi64(_mm256_packus_epi32(y0, y1), 0xD8));
  }
  bad |= std::uint32_t(!_mm256_testz_si256(outside, outside));
  return i;
}

// The kernel for `ref`, storing the sums or not, lossless or not.
template <ChannelRef Ref>
std::size_t undo_dequantize_avx2_for(bool keep, bool lossless, const std::int32_t* p, const std::int32_t* a,
                                     const std::int32_t* b, std::int32_t* o, const std::uint16_t* f, std::int32_t width,
                                     std::int32_t limit, std::uint32_t max_value, std::uint16_t* px, std::size_t n,
                                     std::uint32_t& bad) {
  const auto kernel = lossless ? (keep ? undo_dequantize_avx2<Ref, true, true> : undo_dequantize_avx2<Ref, false, true>)
                               : (keep ? undo_dequantize_avx2<Ref, true, false> : undo_dequantize_avx2<Ref, false, false>);
  return kernel(p, a, b, o, f, width, limit, max_value, px, n, bad);
}
#endif

template <bool Forward>
void combine(ChannelRef ref, std::span<const std::int32_t> plane, std::span<const std::int32_t> first,
             std::span<const std::int32_t> second, std::span<std::int32_t> out) {
  check_sizes(ref, plane.size(), first, second, out.size());
  if (ref == ChannelRef::None) {
    if (out.data() != plane.data()) std::copy(plane.begin(), plane.end(), out.begin());
    return;
  }
  const std::size_t n = plane.size();
  with_reference(ref, first, second, [&](auto reference) {
    for (std::size_t i = 0; i < n; ++i) out[i] = Forward ? wrap_sub(plane[i], reference(i)) : wrap_add(plane[i], reference(i));
  });
}

}  // namespace

std::uint8_t ChannelPlan::byte() const {
  const auto it = std::find(kOrders.begin(), kOrders.end(), order);
  if (it == kOrders.end() || (second != ChannelRef::None && second != ChannelRef::First))
    throw CodecError("channel plan: not a plan");
  return std::uint8_t(std::size_t(it - kOrders.begin()) | (std::size_t(second) << 3) | (std::size_t(third) << 4));
}

ChannelPlan ChannelPlan::from_byte(std::uint8_t b) {
  if ((b & 7) >= kOrders.size() || (b >> 6) != 0) throw CodecError("unknown channel plan");
  ChannelPlan p;
  p.order = kOrders[b & 7];
  p.second = ChannelRef((b >> 3) & 1);
  p.third = ChannelRef((b >> 4) & 3);
  return p;
}

ChannelPlan ChannelPlan::from_legacy_deltas(bool second_minus_first, bool third_minus_second) {
  ChannelPlan p;
  p.second = second_minus_first ? ChannelRef::First : ChannelRef::None;
  p.third = third_minus_second ? ChannelRef::Second : ChannelRef::None;
  return p;
}

bool ChannelPlan::referenced(std::size_t position) const {
  switch (position) {
    case 0: return second == ChannelRef::First || third == ChannelRef::First || third == ChannelRef::Mean;
    case 1: return third == ChannelRef::Second || third == ChannelRef::Mean;
    default: return false;
  }
}

std::size_t ChannelPlan::position(std::size_t channel) const {
  for (std::size_t p = 0; p < 3; ++p)
    if (order[p] == channel) return p;
  throw CodecError("channel plan: no such channel");
}

void apply_channel_ref(ChannelRef ref, std::span<const std::int32_t> plane, std::span<const std::int32_t> first,
                       std::span<const std::int32_t> second, std::span<std::int32_t> out) {
  combine<true>(ref, plane, first, second, out);
}

void undo_channel_ref(ChannelRef ref, std::span<const std::int32_t> plane, std::span<const std::int32_t> first,
                      std::span<const std::int32_t> second, std::span<std::int32_t> out) {
  combine<false>(ref, plane, first, second, out);
}

bool fused_dequantization(const PlaneBound& bound) { return bound.lossless() || uniform_in_32_bits(bound); }

bool undo_channel_ref_dequantize(ChannelRef ref, std::span<const std::int32_t> plane, std::span<const std::int32_t> first,
                                 std::span<const std::int32_t> second, std::span<std::int32_t> out,
                                 std::span<const std::uint16_t> forecast, const PlaneBound& bound,
                                 std::span<std::uint16_t> pixels, SimdPath path) {
  const bool keep_sums = !out.empty();
  check_sizes(ref, plane.size(), first, second, keep_sums ? out.size() : plane.size());
  if (ref == ChannelRef::None) throw CodecError("channel reference: none to undo");
  if (forecast.size() != plane.size() || pixels.size() != plane.size()) throw CodecError("channel reference: plane sizes differ");
  if (!fused_dequantization(bound)) throw CodecError("channel reference: no fused dequantization for this bound");
  const bool lossless = bound.lossless();
  const std::uint32_t max_value = bound.max_value;
  const std::int32_t width = 2 * std::int32_t(bound.tolerance) + 1, limit = std::int32_t(max_value) + 1;
  const std::size_t n = plane.size();
  const std::int32_t* p = plane.data();
  const std::uint16_t* f = forecast.data();
  std::int32_t* o = out.data();
  std::uint16_t* px = pixels.data();
  std::uint32_t out_of_range = 0;
  std::size_t start = 0;
#ifdef TEZIP_HAVE_AVX2_CHANNEL_REF
  if (path >= SimdPath::avx2) {
    const std::int32_t *a = first.data(), *b = second.data();
    const auto simd = [&](auto kernel) {
      start = kernel(keep_sums, lossless, p, a, b, o, f, width, limit, max_value, px, n, out_of_range);
    };
    switch (ref) {
      case ChannelRef::First: simd(undo_dequantize_avx2_for<ChannelRef::First>); break;
      case ChannelRef::Second: simd(undo_dequantize_avx2_for<ChannelRef::Second>); break;
      case ChannelRef::Mean: simd(undo_dequantize_avx2_for<ChannelRef::Mean>); break;
      case ChannelRef::None: break;
    }
  }
#else
  (void)path;
#endif
  // Lossless: the sum, then y = f + sum in 32 bits, where a value below 0 wraps above max_value, so
  // one compare finds both ends (dequantize_plane's test). Uniform bins: dequantize_plane's 32-bit
  // path.
  const auto pass = [&](auto reference, auto keep, auto exact) {
    for (std::size_t i = start; i < n; ++i) {
      const std::int32_t s = wrap_add(p[i], reference(i));
      if constexpr (decltype(keep)::value) o[i] = s;
      if constexpr (decltype(exact)::value) {
        const std::uint32_t y = std::uint32_t(f[i]) + std::uint32_t(s);
        out_of_range |= std::uint32_t(y > max_value);
        px[i] = std::uint16_t(y);
      } else {
        px[i] = std::uint16_t(std::clamp(std::int32_t(f[i]) + std::clamp(s, -limit, limit) * width, 0, std::int32_t(max_value)));
      }
    }
  };
  with_reference(ref, first, second, [&](auto reference) {
    const auto keeping = [&](auto keep) {
      if (lossless) {
        pass(reference, keep, std::true_type{});
      } else {
        pass(reference, keep, std::false_type{});
      }
    };
    if (keep_sums) {
      keeping(std::true_type{});
    } else {
      keeping(std::false_type{});
    }
  });
  return out_of_range != 0;
}

ChannelCosts estimate_channel_costs(std::array<std::span<const std::int32_t>, 3> planes, std::array<bool, 3> intra,
                                    std::size_t width, std::span<std::int32_t> scratch,
                                    const std::array<std::optional<TransformChoice>, 3>& own, bool smooth) {
  const std::size_t n = planes[0].size();
  if (planes[1].size() != n || planes[2].size() != n || scratch.size() < n) throw CodecError("channel plan: plane sizes differ");
  const std::span<std::int32_t> candidate = scratch.first(n);
  const auto estimate = [&](std::size_t k, std::span<const std::int32_t> values) {
    if (intra[k]) return TransformChoice{PlaneTransform::None, estimate_cost(values, width)};
    return choose_transform(values, width, simd_path(), smooth);
  };
  ChannelCosts out;
  for (std::size_t k = 0; k < 3; ++k) {
    out.cost[k][3] = own[k] ? *own[k] : estimate(k, planes[k]);
    const std::size_t a = k == 0 ? 1 : 0, b = k == 2 ? 1 : 2;  // the other two
    apply_channel_ref(ChannelRef::Mean, planes[k], planes[a], planes[b], candidate);
    out.cost[k][k] = estimate(k, candidate);
    for (const std::size_t r : {a, b}) {
      if (r < k && intra[r] == intra[k]) continue;  // estimated with (r, k) below
      apply_channel_ref(ChannelRef::First, planes[k], planes[r], {}, candidate);
      out.cost[k][r] = estimate(k, candidate);
      // A difference and its negation have the same magnitudes and transform choice; their
      // estimates differ by the zigzag's sign bit at most: one serves both.
      if (intra[r] == intra[k]) out.cost[r][k] = out.cost[k][r];
    }
  }
  return out;
}

ChannelChoice plan_cost(const ChannelCosts& frame, const ChannelPlan& plan) {
  ChannelChoice out;
  for (std::size_t p = 0; p < 3; ++p) {
    const std::size_t k = plan.order[p];
    std::size_t r = 3;
    switch (plan.ref(p)) {
      case ChannelRef::None: break;
      case ChannelRef::First: r = plan.order[0]; break;
      case ChannelRef::Second: r = plan.order[1]; break;
      case ChannelRef::Mean: r = k; break;
    }
    out.cost += frame.cost[k][r].cost;
    out.transform[p] = frame.cost[k][r].transform;
  }
  return out;
}

namespace {

constexpr ChannelRef kSecondRefs[] = {ChannelRef::None, ChannelRef::First};
constexpr ChannelRef kThirdRefs[] = {ChannelRef::None, ChannelRef::Second, ChannelRef::First, ChannelRef::Mean};

}  // namespace

ChannelPlan choose_channel_refs(const ChannelCosts& frame, const std::array<std::uint8_t, 3>& order) {
  ChannelPlan best;
  best.order = order;
  std::uint64_t best_cost = UINT64_MAX;
  for (const ChannelRef second : kSecondRefs)
    for (const ChannelRef third : kThirdRefs) {
      const ChannelPlan plan{order, second, third};
      if (const auto cost = plan_cost(frame, plan).cost; cost < best_cost) best = plan, best_cost = cost;
    }
  return best;
}

std::array<std::uint8_t, 3> choose_channel_order(std::span<const ChannelCosts> frames) {
  std::array<std::uint8_t, 3> best = kOrders[0];
  std::uint64_t best_cost = UINT64_MAX;
  for (const auto& order : kOrders) {
    std::uint64_t total = 0;
    for (const auto& f : frames) total += plan_cost(f, choose_channel_refs(f, order)).cost;
    if (total < best_cost) best = order, best_cost = total;
  }
  return best;
}

}  // namespace tezip::codecs
