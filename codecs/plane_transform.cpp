#include "codecs/plane_transform.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "codecs/codec_error.hpp"
#include "codecs/wavefront.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TEZIP_HAVE_AVX2_MEDIAN 1
#endif

namespace tezip::codecs {
namespace {

// Wrapping arithmetic: hostile symbols may be anything, and the inverse must still be defined.
inline std::int32_t wrap_sub(std::int32_t a, std::int32_t b) { return std::int32_t(std::uint32_t(a) - std::uint32_t(b)); }
inline std::int32_t wrap_add(std::int32_t a, std::int32_t b) { return std::int32_t(std::uint32_t(a) + std::uint32_t(b)); }

inline std::int32_t med(std::int32_t a, std::int32_t b, std::int32_t c) {
  const std::int32_t lo = std::min(a, b), hi = std::max(a, b);
  if (c >= hi) return lo;
  if (c <= lo) return hi;
  return wrap_sub(wrap_add(a, b), c);
}

// med() as a clamp: in 64 bits a + b - c cannot wrap, and clamped to [min, max] it is med()'s value
// for every input (c >= max gives at most min, c <= min at least max); the decoder's and the cost
// estimate's form (fewer branches than med()'s three-way test).
inline std::int32_t med_clamped(std::int32_t a, std::int32_t b, std::int32_t c) {
  const std::int64_t lo = std::min(a, b), hi = std::max(a, b);
  return std::int32_t(std::clamp(std::int64_t(a) + b - c, lo, hi));
}

// Prediction of element i from already known elements of `p` (original values on both sides).
inline std::int32_t predict(PlaneTransform t, const std::int32_t* p, std::size_t i, std::size_t x, std::size_t width) {
  if (i == 0) return 0;
  if (i < width) return p[i - 1];
  if (x == 0) return p[i - width];
  if (t == PlaneTransform::Left) return p[i - 1];
  return med(p[i - 1], p[i - width], p[i - width - 1]);
}

void check_width(std::size_t size, std::size_t width) {
  if (width == 0 || size % width != 0) throw CodecError("plane size is not a multiple of its width");
}

#ifdef TEZIP_HAVE_AVX2_MEDIAN

// 8 x 8 int32 transpose in registers: r[j] lane k <- r[k] lane j.
[[gnu::target("avx2")]] inline void transpose8(__m256i r[8]) {
  __m256i t[8], u[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_epi32(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_epi32(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = _mm256_unpacklo_epi64(t[k], t[k + 2]);
    u[k + 1] = _mm256_unpackhi_epi64(t[k], t[k + 2]);
    u[k + 2] = _mm256_unpacklo_epi64(t[k + 1], t[k + 3]);
    u[k + 3] = _mm256_unpackhi_epi64(t[k + 1], t[k + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x20);
    r[k + 4] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x31);
  }
}

// The median inverse of rows [y, y + 8) (y >= 1, the row above already reconstructed), the eight
// rows as the eight lanes of one vector: at step i lane k reconstructs column i - k of row y + k,
// the wavefront of wavefront.hpp eight rows deep. Lane k's upper neighbours are lane k - 1's last
// two outputs (one lane shift), lane 0's the row above. The rows go through `scratch` (8 + 1 rows
// of width + 32, zero-initialized margins) so that the skewed loads and stores (row k shifted by
// k columns, then transposed: 8 steps' inputs in 8 registers) stay in bounds. The median is med()'s
// exactly: a + b - c where c lies between a and b (no wrap possible), else min or max (c above the
// larger gives the smaller and the reverse), so the values equal the portable path's for any input.
[[gnu::target("avx2")]] void median_strip8_avx2(std::int32_t* p, std::size_t width, std::size_t y, std::int32_t* scratch) {
  const std::size_t stride = width + 32;
  std::int32_t* up = scratch + 8;
  std::int32_t* row0 = scratch + stride + 8;
  std::memcpy(up, p + (y - 1) * width, width * sizeof(std::int32_t));
  for (std::size_t k = 0; k < 8; ++k) std::memcpy(row0 + k * stride, p + (y + k) * width, width * sizeof(std::int32_t));
  const __m256i shift = _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6);
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i a = _mm256_setzero_si256(), c = _mm256_setzero_si256();
  const std::size_t steps = width + 7;
  for (std::size_t x0 = 0; x0 < steps; x0 += 8) {
    __m256i r[8];
    for (std::size_t k = 0; k < 8; ++k)
      r[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row0 + k * stride + x0 - k));
    transpose8(r);
    for (int j = 0; j < 8; ++j) {
      const __m256i b = _mm256_blend_epi32(_mm256_permutevar8x32_epi32(a, shift), _mm256_set1_epi32(up[x0 + j]), 0x01);
      const __m256i lo = _mm256_min_epi32(a, b), hi = _mm256_max_epi32(a, b);
      __m256i m = _mm256_sub_epi32(_mm256_add_epi32(a, b), c);
      m = _mm256_blendv_epi8(m, lo, _mm256_cmpgt_epi32(c, hi));
      m = _mm256_blendv_epi8(m, hi, _mm256_cmpgt_epi32(lo, c));
      if (x0 == 0) m = _mm256_blendv_epi8(m, b, _mm256_cmpeq_epi32(lanes, _mm256_set1_epi32(j)));  // column 0: the one above
      a = _mm256_add_epi32(r[j], m);
      r[j] = a;
      c = b;
    }
    transpose8(r);
    for (std::size_t k = 0; k < 8; ++k)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row0 + k * stride + x0 - k), r[k]);
  }
  for (std::size_t k = 0; k < 8; ++k) std::memcpy(p + (y + k) * width, row0 + k * stride, width * sizeof(std::int32_t));
}

#endif

}  // namespace

void forward_transform(PlaneTransform transform, std::span<const std::int32_t> plane, std::size_t width,
                       std::span<std::int32_t> out) {
  check_width(plane.size(), width);
  if (out.size() != plane.size()) throw CodecError("transform output size differs");
  if (transform == PlaneTransform::None) {
    std::copy(plane.begin(), plane.end(), out.begin());
    return;
  }
  for (std::size_t i = 0, x = 0; i < plane.size(); ++i, x = (x + 1 == width ? 0 : x + 1))
    out[i] = wrap_sub(plane[i], predict(transform, plane.data(), i, x, width));
}

void inverse_transform(PlaneTransform transform, std::span<std::int32_t> plane, std::size_t width) {
  check_width(plane.size(), width);
  inverse_transform_rows(transform, plane, width, 0, plane.size() / width);
}

void inverse_transform_rows(PlaneTransform transform, std::span<std::int32_t> plane, std::size_t width,
                            std::size_t y_begin, std::size_t y_end, SimdPath path) {
  check_width(plane.size(), width);
  if (transform == PlaneTransform::None) return;
  if (transform != PlaneTransform::Left && transform != PlaneTransform::Median)
    throw CodecError("unknown plane transform");
  if (y_end > plane.size() / width || y_begin > y_end) throw std::invalid_argument("inverse_transform_rows: rows outside the plane");
  // Row by row, the cases of predict() hoisted out of the loops (the decoder's hot path); the
  // same arithmetic, so the same values (tests/test_plane_transform.cpp checks it against predict()).
  std::int32_t* p = plane.data();
  if (transform == PlaneTransform::Left) {
    for (std::size_t y = y_begin; y < y_end; ++y) {
      std::int32_t* row = p + y * width;
      if (y > 0) row[0] = wrap_add(row[0], row[-std::ptrdiff_t(width)]);
      for (std::size_t x = 1; x < width; ++x) row[x] = wrap_add(row[x], row[x - 1]);
    }
    return;
  }
  // A lambda, not the function's address: median_rows inlines it.
  const auto median = [](std::int32_t a, std::int32_t b, std::int32_t c) { return med_clamped(a, b, c); };
  const auto rec = [](std::int32_t prediction, std::int32_t v) { return wrap_add(v, prediction); };
#ifdef TEZIP_HAVE_AVX2_MEDIAN
  // Whole strips of 8 rows below the first: eight rows a vector (median_strip8_avx2); the rest,
  // and rows whose constant_rows shortcut applies, four rows at a time.
  if (path >= SimdPath::avx2 && width >= 16) {
    thread_local std::vector<std::int32_t> scratch;
    std::size_t y = y_begin;
    if (y == 0) median_rows<std::int32_t>(p, p, width, 0, std::min<std::size_t>(y_end, 1), median, rec), y = 1;
    for (; y + 8 <= y_end; y += 8) {
      const std::int32_t* up = p + (y - 1) * width;
      if (constant_rows(p + y * width, 8, up, width)) {
        std::fill(p + y * width, p + (y + 8) * width, up[0]);
        continue;
      }
      if (scratch.size() < 9 * (width + 32)) scratch.assign(9 * (width + 32), 0);
      median_strip8_avx2(p, width, y, scratch.data());
    }
    median_rows<std::int32_t>(p, p, width, y, y_end, median, rec);
    return;
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

}  // namespace

// Every fourth row is a fair sample of a plane's statistics at a quarter of the cost.
std::size_t cost_sample_step(std::size_t height) { return height >= 16 ? 4 : 1; }

std::uint64_t estimate_cost_rows(std::span<const std::int32_t> sampled) {
  CostEstimate cost;
  for (const std::int32_t v : sampled) cost.add(v);
  return cost.bits();
}

std::uint64_t estimate_cost(std::span<const std::int32_t> plane, std::size_t width) {
  check_width(plane.size(), width);
  const std::size_t height = plane.size() / width;
  CostEstimate cost;
  for (std::size_t y = 0; y < height; y += cost_sample_step(height))
    for (std::size_t i = y * width; i < (y + 1) * width; ++i) cost.add(plane[i]);
  return cost.bits();
}

TransformChoice choose_transform(std::span<const std::int32_t> plane, std::size_t width) {
  check_width(plane.size(), width);
  const std::size_t height = plane.size() / width;
  const std::size_t row_step = cost_sample_step(height);
  // predict()'s cases hoisted out of the row loop, and two histograms a transform (even and odd
  // columns, merged) so that consecutive increments do not wait on each other: the same counts.
  CostEstimate cost[3][2];
  const auto add = [&](int parity, std::int32_t v, std::int32_t left, std::int32_t median) {
    cost[0][parity].add(v);
    cost[1][parity].add(wrap_sub(v, left));
    cost[2][parity].add(wrap_sub(v, median));
  };
  for (std::size_t y = 0; y < height; y += row_step) {
    const std::int32_t* row = plane.data() + y * width;
    if (y == 0) {
      add(0, row[0], 0, 0);
      for (std::size_t x = 1; x < width; ++x) add(int(x & 1), row[x], row[x - 1], row[x - 1]);
      continue;
    }
    const std::int32_t* up = row - width;
    add(0, row[0], up[0], up[0]);
    for (std::size_t x = 1; x < width; ++x) add(int(x & 1), row[x], row[x - 1], med_clamped(row[x - 1], up[x], up[x - 1]));
  }
  for (auto& c : cost) c[0].merge(c[1]);
  // Ties keep the simpler transform.
  TransformChoice best{PlaneTransform::None, cost[0][0].bits()};
  for (int t = 1; t < 3; ++t)
    if (const auto bits = cost[t][0].bits(); bits < best.cost) best = {PlaneTransform(t), bits};
  return best;
}

}  // namespace tezip::codecs
