#include "codecs/transform/plane_transform.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "codecs/codec_error.hpp"
#include "codecs/transform/interpolation.hpp"
#include "codecs/transform/wavefront.hpp"

#include "codecs/transform/wavefront_avx2.hpp"

namespace tezip::codecs {
namespace {

// Wrapping arithmetic: hostile symbols may be anything, and the inverse must still be defined.
inline std::int32_t wrap_sub(std::int32_t a, std::int32_t b) { return std::int32_t(std::uint32_t(a) - std::uint32_t(b)); }
inline std::int32_t wrap_add(std::int32_t a, std::int32_t b) { return std::int32_t(std::uint32_t(a) + std::uint32_t(b)); }

// The interpolation transform (codecs/transform/interpolation.hpp): each value minus (forward)
// or plus (inverse) its prediction from `from`, written to `to`, in the levels' order: the forward
// transform reads the original plane, the inverse (from == to) the values already restored. The
// predictions wrap to 32 bits as the values do.
template <bool kInverse>
void interpolation_levels(const std::int32_t* from, std::int32_t* to, std::size_t width, std::size_t height) {
  interpolation::for_each_level(from, width, height, [&](std::size_t i, std::int64_t prediction) {
    to[i] = kInverse ? wrap_add(from[i], std::int32_t(prediction)) : wrap_sub(from[i], std::int32_t(prediction));
  });
}

// The interpolation's residual at (x, y) from the original plane, on its own.
inline std::int32_t interpolation_residual(const std::int32_t* p, std::size_t width, std::size_t height, std::size_t x,
                                           std::size_t y) {
  return wrap_sub(p[y * width + x], std::int32_t(interpolation::predict_at(p, width, height, x, y)));
}

bool known(PlaneTransform t) {
  return t == PlaneTransform::None || t == PlaneTransform::Left || t == PlaneTransform::Median || t == PlaneTransform::Gradient ||
         t == PlaneTransform::Interpolation;
}

void check_width(std::size_t size, std::size_t width) {
  if (width == 0 || size % width != 0) throw CodecError("plane size is not a multiple of its width");
}

#ifdef TEZIP_HAVE_AVX2_WAVEFRONT
// One step of the median inverse for eight rows (wavefront_avx2.hpp): median8, med()'s value for
// every input, a damaged stream's included; at column 0 the value above.
struct MedianStep {
  [[gnu::target("avx2")]] __m256i operator()(__m256i a, __m256i b, __m256i c, __m256i q, std::size_t i) const {
    __m256i m = wavefront_avx2::median8(a, b, c);
    if (i < 8) m = _mm256_blendv_epi8(m, b, wavefront_avx2::column0(i));
    return _mm256_add_epi32(q, m);
  }
};

// The sums within a vector of eight: three shifted adds.
[[gnu::target("avx2")]] inline __m256i vector_prefix_sums(__m256i v) {
  v = _mm256_add_epi32(v, _mm256_slli_si256(v, 4));  // within each 128-bit half
  v = _mm256_add_epi32(v, _mm256_slli_si256(v, 8));
  const __m256i last_of_low = _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(3));
  return _mm256_add_epi32(v, _mm256_blend_epi32(_mm256_setzero_si256(), last_of_low, 0xF0));
}

// The left transform's inverse on one row, eight values a step: each row's running (wrapping)
// sum, a prefix sum within the vector in three shifted adds plus the carry of the vectors before
// (the portable loop is one serial add per value: 4% of colour video's decoding). The same sums
// (addition modulo 2^32 in any order). Returns the values done; the caller finishes the row.
[[gnu::target("avx2")]] std::size_t prefix_sums_avx2(std::int32_t* row, std::size_t width) {
  __m256i carry = _mm256_setzero_si256();  // every lane: the sum of the values before the vector
  const __m256i last = _mm256_set1_epi32(7);
  std::size_t x = 0;
  for (; x + 8 <= width; x += 8) {
    const __m256i v = _mm256_add_epi32(vector_prefix_sums(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + x))), carry);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + x), v);
    carry = _mm256_permutevar8x32_epi32(v, last);
  }
  return x == 0 ? 1 : x;
}

// prefix_sums_avx2 on two rows at once: each vector's sums wait on the carry of the vector before
// (an add and a permute), so a second row's independent chain fills that wait. Returns the values
// done in each row.
[[gnu::target("avx2")]] std::size_t prefix_sums2_avx2(std::int32_t* row0, std::int32_t* row1, std::size_t width) {
  __m256i carry0 = _mm256_setzero_si256(), carry1 = _mm256_setzero_si256();
  const __m256i last = _mm256_set1_epi32(7);
  std::size_t x = 0;
  for (; x + 8 <= width; x += 8) {
    const __m256i v0 = _mm256_add_epi32(vector_prefix_sums(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row0 + x))), carry0);
    const __m256i v1 = _mm256_add_epi32(vector_prefix_sums(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row1 + x))), carry1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(row0 + x), v0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(row1 + x), v1);
    carry0 = _mm256_permutevar8x32_epi32(v0, last);
    carry1 = _mm256_permutevar8x32_epi32(v1, last);
  }
  return x == 0 ? 1 : x;
}

// The same on sixteen rows (wavefront_avx2.hpp, strip16).
struct MedianStep16 {
  [[gnu::target(TEZIP_WAVEFRONT_AVX512_TARGET)]] __m512i operator()(__m512i a, __m512i b, __m512i c, __m512i q,
                                                                    std::size_t i) const {
    __m512i m = wavefront_avx2::median16(a, b, c);
    if (i < 16) m = _mm512_mask_mov_epi32(m, __mmask16(1u << i), b);
    return _mm512_add_epi32(q, m);
  }
};
#endif

// Each row's running (wrapping) sums over rows [y_begin, y_end): `before(y)` on a row before its
// sums, `after(y)` after them, rows in order. With AVX2 two rows at a time (prefix_sums2_avx2:
// both rows' befores, then their sums, then both afters).
template <class Before, class After>
void running_sums(std::int32_t* p, std::size_t width, std::size_t y_begin, std::size_t y_end, SimdPath path, Before before,
                  After after) {
  std::size_t y = y_begin;
#ifdef TEZIP_HAVE_AVX2_WAVEFRONT
  if (path >= SimdPath::avx2)
    for (; y + 2 <= y_end; y += 2) {
      std::int32_t* row = p + y * width;
      std::int32_t* next = row + width;
      before(y);
      before(y + 1);
      const std::size_t done = prefix_sums2_avx2(row, next, width);
      for (std::size_t x = done; x < width; ++x) row[x] = wrap_add(row[x], row[x - 1]), next[x] = wrap_add(next[x], next[x - 1]);
      after(y);
      after(y + 1);
    }
#else
  (void)path;
#endif
  for (; y < y_end; ++y) {
    std::int32_t* row = p + y * width;
    before(y);
    std::size_t x = 1;
#ifdef TEZIP_HAVE_AVX2_WAVEFRONT
    if (path >= SimdPath::avx2) x = prefix_sums_avx2(row, width);
#endif
    for (; x < width; ++x) row[x] = wrap_add(row[x], row[x - 1]);
    after(y);
  }
}

}  // namespace

void forward_transform(PlaneTransform transform, std::span<const std::int32_t> plane, std::size_t width,
                       std::span<std::int32_t> out) {
  check_width(plane.size(), width);
  if (out.size() != plane.size()) throw CodecError("transform output size differs");
  if (transform == PlaneTransform::None) {
    std::copy(plane.begin(), plane.end(), out.begin());
    return;
  }
  if (!known(transform)) throw CodecError("unknown plane transform");
  const std::int32_t* p = plane.data();
  std::int32_t* o = out.data();
  const std::size_t height = plane.size() / width;
  if (transform == PlaneTransform::Interpolation) return interpolation_levels<false>(p, o, width, height);
  // Every prediction reads original values, so the rows' loops have no chain and the compiler
  // vectorizes them. The median in 32 bits as the decoder's AVX2 step has it: a + b - c where c
  // lies between a and b (no wrap there), else the smaller or the larger: LOCO-I's median for every
  // input (tests/test_plane_transform.cpp).
  for (std::size_t y = 0; y < height; ++y) {
    const std::int32_t* row = p + y * width;
    std::int32_t* dst = o + y * width;
    if (y == 0) {
      dst[0] = row[0];
      for (std::size_t x = 1; x < width; ++x) dst[x] = wrap_sub(row[x], row[x - 1]);
      continue;
    }
    const std::int32_t* up = row - width;
    dst[0] = wrap_sub(row[0], up[0]);
    if (transform == PlaneTransform::Left) {
      for (std::size_t x = 1; x < width; ++x) dst[x] = wrap_sub(row[x], row[x - 1]);
      continue;
    }
    if (transform == PlaneTransform::Gradient) {
      for (std::size_t x = 1; x < width; ++x) dst[x] = wrap_sub(wrap_sub(row[x], row[x - 1]), wrap_sub(up[x], up[x - 1]));
      continue;
    }
    for (std::size_t x = 1; x < width; ++x) {
      const std::int32_t a = row[x - 1], b = up[x], c = up[x - 1];
      const std::int32_t lo = std::min(a, b), hi = std::max(a, b);
      std::int32_t m = wrap_sub(wrap_add(a, b), c);
      m = c > hi ? lo : m;
      m = c < lo ? hi : m;
      dst[x] = wrap_sub(row[x], m);
    }
  }
}

void inverse_transform(PlaneTransform transform, std::span<std::int32_t> plane, std::size_t width) {
  check_width(plane.size(), width);
  inverse_transform_rows(transform, plane, width, 0, plane.size() / width);
}

void inverse_transform_rows(PlaneTransform transform, std::span<std::int32_t> plane, std::size_t width,
                            std::size_t y_begin, std::size_t y_end, SimdPath path) {
  check_width(plane.size(), width);
  if (transform == PlaneTransform::None) return;
  if (!known(transform)) throw CodecError("unknown plane transform");
  if (y_end > plane.size() / width || y_begin > y_end) throw std::invalid_argument("inverse_transform_rows: rows outside the plane");
  std::int32_t* p = plane.data();
  if (transform == PlaneTransform::Interpolation) {
    if (y_begin != 0 || y_end != plane.size() / width)
      throw std::invalid_argument("inverse_transform_rows: the interpolation transform inverts whole planes only");
    return interpolation_levels<true>(p, p, width, y_end);
  }
  // Row by row, each transform's edge cases hoisted out of the loops (the decoder's hot path); the
  // same arithmetic as forward_transform's, so the same values (tests/test_plane_transform.cpp).
  if (transform == PlaneTransform::Gradient) {
    // v - a - b + c is (v - b) - (a - c): the row's running sums give each value less the one
    // above (the first column's value is already that, the first row's are the values), then the
    // row above is added. No chain runs down the rows.
    const auto add_above = [&](std::size_t y) {
      if (y == 0) return;
      std::int32_t* row = p + y * width;
      const std::int32_t* up = row - width;
      for (std::size_t x = 0; x < width; ++x) row[x] = wrap_add(row[x], up[x]);
    };
    return running_sums(p, width, y_begin, y_end, path, [](std::size_t) {}, add_above);
  }
  if (transform == PlaneTransform::Left) {
    // The first column from above: a row's first value is final before its sums, so the next
    // row's first value (the row above's first plus its own) is known before either row's sums.
    const auto first_from_above = [&](std::size_t y) {
      if (y > 0) p[y * width] = wrap_add(p[y * width], p[(y - 1) * width]);
    };
    return running_sums(p, width, y_begin, y_end, path, first_from_above, [](std::size_t) {});
  }
  // A lambda, not the function's address: median_rows inlines it.
  const auto median = [](std::int32_t a, std::int32_t b, std::int32_t c) { return med_clamped(a, b, c); };
  const auto rec = [](std::int32_t prediction, std::int32_t v) { return wrap_add(v, prediction); };
#ifdef TEZIP_HAVE_AVX2_WAVEFRONT
  // Whole strips of 8 rows below the first: eight rows a vector (wavefront_avx2.hpp); the rest,
  // and rows whose constant_rows shortcut applies, four rows at a time.
  if (path >= SimdPath::avx2 && width >= 16) {
    MedianStep step;
    // With AVX-512, strips of 16 rows first: the serial chain of each step serves twice the rows.
    if (path >= SimdPath::avx512) {
      MedianStep16 step16;
      return wavefront_avx2::median_rows16<std::int32_t>(p, p, width, y_begin, y_end, median, rec, step, step16);
    }
    return wavefront_avx2::median_rows8<std::int32_t>(p, p, width, y_begin, y_end, median, rec, step);
  }
#else
  (void)path;
#endif
  median_rows<std::int32_t>(p, p, width, y_begin, y_end, median, rec);
}

namespace {

// Bits an order-0 coder would spend: the entropy of the values' magnitude classes (bit lengths
// of the zigzagged values) plus the bits below each value's leading one. Unlike a plain sum of bit
// lengths, it sees that many exact zeros are almost free.
class CostEstimate {
 public:
  void add(std::int32_t v) { ++histogram_[std::bit_width(zigzag(v))]; }
  void add_count(std::size_t bucket, std::uint64_t count) { histogram_[bucket] += count; }
  void merge(const CostEstimate& other) {
    for (std::size_t b = 0; b < std::size(histogram_); ++b) histogram_[b] += other.histogram_[b];
  }
  std::uint64_t bits() const {
    std::uint64_t n = 0, mantissa_bits = 0;  // the bits below the leading one: bucket - 1 each
    for (std::size_t b = 0; b < std::size(histogram_); ++b) {
      n += histogram_[b];
      mantissa_bits += histogram_[b] * (b > 1 ? b - 1 : 0);
    }
    double entropy = 0;
    for (auto c : histogram_)
      if (c) entropy -= double(c) * std::log2(double(c) / double(n));
    return std::uint64_t(entropy) + mantissa_bits;
  }

 private:
  std::uint64_t histogram_[33] = {};
};

// The four transforms' residuals of element x > 0 of a row below the first: as it is, against
// its left neighbour, against the median of its left, upper and upper-left neighbours, against
// their gradient.
struct Residuals {
  std::int32_t none, left, median, gradient;
};
inline Residuals residuals(const std::int32_t* row, const std::int32_t* up, std::size_t x) {
  const std::int32_t left = wrap_sub(row[x], row[x - 1]);
  return {row[x], left, wrap_sub(row[x], med_clamped(row[x - 1], up[x], up[x - 1])), wrap_sub(left, wrap_sub(up[x], up[x - 1]))};
}

#ifdef TEZIP_HAVE_AVX2_WAVEFRONT
// A CostEstimate's histogram, eight values a vector. A value's bucket (its zigzagged bit length)
// from the exponent of its float conversion (exact below 2^24; larger values shifted right by 8
// first, 8 added back), counted in byte counters: bucket b adds 1 << 8 (b mod 8) to the 64-bit
// accumulator of its octave (a shift of 64 or more gives 0 in the others), flushed before a byte
// could overflow. Buckets 24 and up (values of 2^23 and beyond) are counted one by one. The same
// counts as CostEstimate::add, without its chains of increments to one counter.
class BucketCounterAvx2 {
 public:
  explicit BucketCounterAvx2(CostEstimate& cost) : cost_(cost) {}
  BucketCounterAvx2(const BucketCounterAvx2&) = delete;
  BucketCounterAvx2& operator=(const BucketCounterAvx2&) = delete;
  ~BucketCounterAvx2() { flush(); }

  // Values [0, n): whole vectors, then one by one.
  [[gnu::target("avx2")]] void add(const std::int32_t* values, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) add(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + i)));
    for (; i < n; ++i) cost_.add(values[i]);
  }
  [[gnu::target("avx2")]] void add(__m256i v) {
    const __m256i z = _mm256_xor_si256(_mm256_slli_epi32(v, 1), _mm256_srai_epi32(v, 31));
    const __m256i large = _mm256_cmpgt_epi32(_mm256_srli_epi32(z, 24), _mm256_setzero_si256());
    const __m256i exact = _mm256_blendv_epi8(z, _mm256_srli_epi32(z, 8), large);
    const __m256i exponent = _mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(exact)), 23);
    __m256i bucket = _mm256_max_epi32(_mm256_sub_epi32(exponent, _mm256_set1_epi32(126)), _mm256_setzero_si256());
    bucket = _mm256_add_epi32(bucket, _mm256_and_si256(large, _mm256_set1_epi32(8)));
    if (const int rare = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(bucket, _mm256_set1_epi32(23))))) {
      alignas(32) std::int32_t lanes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
      for (int k = 0; k < 8; ++k)
        if (rare & (1 << k)) cost_.add(lanes[k]);
    }
    const __m256i shift = _mm256_slli_epi32(bucket, 3);
    const __m256i low = _mm256_cvtepu32_epi64(_mm256_castsi256_si128(shift));
    const __m256i high = _mm256_cvtepu32_epi64(_mm256_extracti128_si256(shift, 1));
    const __m256i one = _mm256_set1_epi64x(1);
    for (int octave = 0; octave < kOctaves; ++octave) {
      const __m256i base = _mm256_set1_epi64x(64 * octave);
      const __m256i l = _mm256_sllv_epi64(one, _mm256_sub_epi64(low, base));
      const __m256i h = _mm256_sllv_epi64(one, _mm256_sub_epi64(high, base));
      acc_[octave] = _mm256_add_epi64(acc_[octave], _mm256_add_epi64(l, h));
    }
    if (++steps_ == kFlushSteps) flush();
  }
  [[gnu::target("avx2")]] void flush() {
    for (int octave = 0; octave < kOctaves; ++octave) {
      alignas(32) std::uint64_t lanes[4];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc_[octave]);
      acc_[octave] = _mm256_setzero_si256();
      for (const std::uint64_t lane : lanes)
        for (int k = 0; k < 8; ++k) cost_.add_count(8 * octave + k, (lane >> (8 * k)) & 0xff);
    }
    steps_ = 0;
  }

 private:
  static constexpr int kOctaves = 3;       // buckets 0-23 in byte counters
  static constexpr int kFlushSteps = 127;  // each step adds at most 2 to a byte counter
  CostEstimate& cost_;
  __m256i acc_[kOctaves] = {};
  int steps_ = 0;
};

// choose_transform's four histograms over columns [1, width) of a sampled row below the first.
[[gnu::target("avx2")]] void transform_histograms_avx2(const std::int32_t* row, const std::int32_t* up, std::size_t width,
                                                       BucketCounterAvx2 (&counters)[4], CostEstimate (&cost)[4]) {
  std::size_t x = 1;
  for (; x + 8 <= width; x += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + x));
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + x - 1));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(up + x));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(up + x - 1));
    const __m256i m = wavefront_avx2::median8(a, b, c);
    const __m256i left = _mm256_sub_epi32(v, a);
    counters[0].add(v);
    counters[1].add(left);
    counters[2].add(_mm256_sub_epi32(v, m));
    counters[3].add(_mm256_sub_epi32(left, _mm256_sub_epi32(b, c)));
  }
  for (; x < width; ++x) {
    const Residuals r = residuals(row, up, x);
    cost[0].add(r.none);
    cost[1].add(r.left);
    cost[2].add(r.median);
    cost[3].add(r.gradient);
  }
}
#endif

}  // namespace

// Every fourth row is a fair sample of a plane's statistics at a quarter of the cost.
std::size_t cost_sample_step(std::size_t height) { return height >= 16 ? 4 : 1; }

namespace {

// Counts values [0, n) into `cost`: the AVX2 counter or one by one, the same counts.
void count_values(const std::int32_t* values, std::size_t n, CostEstimate& cost, SimdPath path) {
#ifdef TEZIP_HAVE_AVX2_WAVEFRONT
  if (path >= SimdPath::avx2) {
    BucketCounterAvx2(cost).add(values, n);
    return;
  }
#else
  (void)path;
#endif
  for (std::size_t i = 0; i < n; ++i) cost.add(values[i]);
}

}  // namespace

std::uint64_t estimate_cost_rows(std::span<const std::int32_t> sampled, SimdPath path) {
  CostEstimate cost;
  count_values(sampled.data(), sampled.size(), cost, path);
  return cost.bits();
}

std::uint64_t estimate_cost(std::span<const std::int32_t> plane, std::size_t width, SimdPath path) {
  check_width(plane.size(), width);
  const std::size_t height = plane.size() / width;
  CostEstimate cost;
  for (std::size_t y = 0; y < height; y += cost_sample_step(height)) count_values(plane.data() + y * width, width, cost, path);
  return cost.bits();
}

std::uint64_t estimate_context_cost(std::span<const std::int32_t> plane, std::size_t width, bool polyphase) {
  check_width(plane.size(), width);
  const std::size_t height = plane.size() / width;
  constexpr std::size_t kContexts = 8, kBuckets = 33;
  // counts[context][bucket], as CostEstimate's histograms; each value's bucket computed once, into
  // rows with a zero column on each side (the row above's read at x - 1, x, x + 1).
  std::array<std::array<std::uint32_t, kBuckets>, kContexts> counts{};
  std::vector<std::uint8_t> up(width + 2), row(width + 2);
  const auto bucket = [](std::int32_t v) { return std::uint8_t(std::bit_width(zigzag(v))); };
  // Row y of the plane in its layout: in the polyphase one, raster row 2y (2(y - h) + 1 past the
  // h = ceil(height / 2) even rows), its even columns, then its odd ones.
  const std::size_t even_rows = (height + 1) / 2, even_columns = (width + 1) / 2;
  const auto buckets_of = [&](std::size_t y, std::vector<std::uint8_t>& out) {
    if (!polyphase) {
      const std::int32_t* values = plane.data() + y * width;
      for (std::size_t x = 0; x < width; ++x) out[x + 1] = bucket(values[x]);
      return;
    }
    const std::int32_t* values = plane.data() + (y < even_rows ? 2 * y : 2 * (y - even_rows) + 1) * width;
    for (std::size_t x = 0; x < even_columns; ++x) out[x + 1] = bucket(values[2 * x]);
    for (std::size_t x = even_columns; x < width; ++x) out[x + 1] = bucket(values[2 * (x - even_columns) + 1]);
  };
  // Pairs of rows (the estimates' sample is every 4th row: in raster order, of one parity only),
  // a quarter of the rows; the first of a pair is the second's row above.
  const std::size_t step = 2 * cost_sample_step(height);
  std::size_t last = SIZE_MAX;  // the row whose buckets `row` holds
  for (std::size_t y = 1; y < height; y += (y % step == 1 && step > 2) ? 1 : step - 1) {
    if (last == y - 1) {
      up.swap(row);
    } else {
      buckets_of(y - 1, up);
    }
    buckets_of(y, row);
    last = y;
    for (std::size_t x = 0; x < width; ++x) {
      const std::uint32_t activity = up[x] + up[x + 1] + up[x + 2] + 2u * row[x] + (x >= 1 ? row[x - 1] : 0u);
      ++counts[std::min<std::size_t>(kContexts - 1, std::bit_width(activity))][row[x + 1]];
    }
  }
  std::uint64_t bits = 0;
  for (const auto& histogram : counts) {
    CostEstimate cost;
    for (std::size_t b = 0; b < kBuckets; ++b) cost.add_count(b, histogram[b]);
    bits += cost.bits();
  }
  return bits;
}

TransformChoice choose_transform(std::span<const std::int32_t> plane, std::size_t width, SimdPath path, bool smooth) {
  check_width(plane.size(), width);
  const std::size_t height = plane.size() / width;
  const std::size_t row_step = cost_sample_step(height);
  // The edge cases hoisted out of the row loop, and two histograms a transform (even and odd
  // columns, merged) so that consecutive increments do not wait on each other: the same counts.
  // The first row and column: the left transform's prediction, the median's and the gradient's
  // are one value there (the left neighbour, or in the first column the one above).
  CostEstimate cost[4][2];
  const auto add = [&](int parity, std::int32_t v, std::int32_t left, std::int32_t edge) {
    cost[0][parity].add(v);
    cost[1][parity].add(wrap_sub(v, left));
    cost[2][parity].add(wrap_sub(v, edge));
    cost[3][parity].add(wrap_sub(v, edge));
  };
  if (height == 0) return {PlaneTransform::None, 0};
  const std::int32_t* first = plane.data();
  add(0, first[0], 0, 0);
  for (std::size_t x = 1; x < width; ++x) add(int(x & 1), first[x], first[x - 1], first[x - 1]);
#ifdef TEZIP_HAVE_AVX2_WAVEFRONT
  if (path >= SimdPath::avx2) {
    CostEstimate vector[4];
    {
      BucketCounterAvx2 counters[4] = {BucketCounterAvx2(vector[0]), BucketCounterAvx2(vector[1]), BucketCounterAvx2(vector[2]),
                                       BucketCounterAvx2(vector[3])};
      for (std::size_t y = row_step; y < height; y += row_step) {
        const std::int32_t* row = plane.data() + y * width;
        add(0, row[0], row[-std::ptrdiff_t(width)], row[-std::ptrdiff_t(width)]);
        transform_histograms_avx2(row, row - width, width, counters, vector);
      }
    }  // the counters flush
    for (int t = 0; t < 4; ++t) cost[t][1].merge(vector[t]);
  } else
#else
  (void)path;
#endif
  {
    for (std::size_t y = row_step; y < height; y += row_step) {
      const std::int32_t* row = plane.data() + y * width;
      const std::int32_t* up = row - width;
      add(0, row[0], up[0], up[0]);
      for (std::size_t x = 1; x < width; ++x) {
        const Residuals r = residuals(row, up, x);
        cost[0][x & 1].add(r.none);
        cost[1][x & 1].add(r.left);
        cost[2][x & 1].add(r.median);
        cost[3][x & 1].add(r.gradient);
      }
    }
  }
  for (auto& c : cost) c[0].merge(c[1]);
  // Ties keep the simpler transform, in this order.
  constexpr PlaneTransform kOrder[4] = {PlaneTransform::None, PlaneTransform::Left, PlaneTransform::Median,
                                        PlaneTransform::Gradient};
  TransformChoice best{PlaneTransform::None, cost[0][0].bits()};
  for (int t = 1; t < (smooth ? 4 : 3); ++t)
    if (const auto bits = cost[t][0].bits(); bits < best.cost) best = {kOrder[t], bits};
  // The interpolation is weighed only where the gradient beat the median: on a smooth field. A
  // camera's or a film's planes never take the gradient (every one measured), and its estimate,
  // one value at a time, would cost them time for nothing.
  if (best.transform == PlaneTransform::Gradient)
    if (const auto bits = estimate_interpolation_cost(plane, width); bits < best.cost) best = {PlaneTransform::Interpolation, bits};
  return best;
}

std::uint64_t estimate_interpolation_cost(std::span<const std::int32_t> plane, std::size_t width) {
  check_width(plane.size(), width);
  const std::size_t height = plane.size() / width, row_step = cost_sample_step(height);
  CostEstimate cost;
  std::uint64_t sampled = 0;
  for (std::size_t y = 0; y < height; ++y) {
    if (row_step > 1 && (y / row_step) % row_step != 0) continue;
    for (std::size_t x = 0; x < width; ++x) cost.add(interpolation_residual(plane.data(), width, height, x, y));
    sampled += width;
  }
  if (sampled == 0) return 0;
  const std::uint64_t others = (height + row_step - 1) / row_step * width;  // the values the other estimates read
  return std::uint64_t(double(cost.bits()) * double(others) / double(sampled) + 0.5);
}

}  // namespace tezip::codecs
