#include "codecs/transform/block_motion.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "codecs/buffer_pool.hpp"
#include "codecs/codec_error.hpp"
#include "codecs/transform/plane_transform.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "codecs/transform/wavefront_avx2.hpp"
#define TEZIP_HAVE_AVX2_MOTION 1
#endif

namespace tezip::codecs {
namespace {

// The magnitude of residual r's bin at `tolerance` (bins of 2t + 1 centred on 0: (|r| + t) / (2t + 1)),
// by a float division: exact, since a quotient that is not whole stays at least 1 / (2t + 1) from
// the next whole number, far more than float's rounding of quotients below 2^24 (and it vectorizes).
inline std::int32_t bin_magnitude(std::int32_t r, std::uint32_t tolerance) {
  if (tolerance == 0) return std::abs(r);
  return std::int32_t((float(std::abs(r)) + float(tolerance)) / float(2 * tolerance + 1));
}

constexpr std::uint32_t kBlock = 2 * kMotionUnit;

// The upper bounds of residual_context's classes but the last: an activity's class is how many
// of them it passes (classes 0, 1-2, 3-5, 6-11, 12-23 and 24 or more).
constexpr std::array<std::uint32_t, kResidualContexts - 1> kActivityBounds{0, 2, 5, 11, 23};

struct Rect {
  std::uint32_t x = 0, y = 0, w = 0, h = 0;
};

// The rows of a block inside the reference: bilinear weights in quarters (w00 + w01 + w10 + w11 =
// 16), rounded to nearest. Acc is the arithmetic's width: 16 bits are exact for pixels below 4096
// (16 * 4095 + 8 < 65536), and vectorize with twice the lanes of 32 (SSE2 has no 32-bit multiply).
// `out` has rows of out_stride values.
template <class Acc, std::uint32_t W>
[[gnu::always_inline]] inline void predict_inside(const std::uint16_t* src, std::uint32_t width, const Rect& r,
                                                  std::uint32_t fx, std::uint32_t fy, std::uint16_t* out,
                                                  std::size_t out_stride) {
  const std::uint32_t w = W ? W : r.w;  // W = 0: the block's own width
  const Acc w00 = Acc((4 - fx) * (4 - fy)), w01 = Acc(fx * (4 - fy)), w10 = Acc((4 - fx) * fy), w11 = Acc(fx * fy);
  const Acc ax = Acc(4 - fx), bx = Acc(fx), ay = Acc(4 - fy), by = Acc(fy);
  for (std::uint32_t y = 0; y < r.h; ++y, src += width, out += out_stride) {
    const std::uint16_t* below = src + (fy ? width : 0);
    if (!fx && !fy) {
      std::copy(src, src + w, out);
    } else if (!fy) {
      for (std::uint32_t x = 0; x < w; ++x) out[x] = std::uint16_t(Acc(Acc(src[x] * ax + src[x + 1] * bx) + 2) >> 2);
    } else if (!fx) {
      for (std::uint32_t x = 0; x < w; ++x) out[x] = std::uint16_t(Acc(Acc(src[x] * ay + below[x] * by) + 2) >> 2);
    } else {
      for (std::uint32_t x = 0; x < w; ++x)
        out[x] = std::uint16_t(
            Acc(Acc(src[x] * w00 + src[x + 1] * w01 + below[x] * w10 + below[x + 1] * w11) + 8) >> 4);
    }
  }
}

// predict_inside for any block: 16-bit arithmetic when `narrow` (pixels below 4096), the areas'
// common widths fixed.
[[gnu::always_inline]] inline void predict_inside_any(const std::uint16_t* src, std::uint32_t width, const Rect& r,
                                                      std::uint32_t fx, std::uint32_t fy, bool narrow, std::uint16_t* out,
                                                      std::size_t out_stride) {
  if (narrow) {
    if (r.w == 16) return predict_inside<std::uint16_t, 16>(src, width, r, fx, fy, out, out_stride);
    if (r.w == 8) return predict_inside<std::uint16_t, 8>(src, width, r, fx, fy, out, out_stride);
    return predict_inside<std::uint16_t, 0>(src, width, r, fx, fy, out, out_stride);
  }
  predict_inside<std::uint32_t, 0>(src, width, r, fx, fy, out, out_stride);
}

// The same arithmetic compiled for the portable path and for AVX2 (twice the lanes, and a 32-bit
// multiply for 16-bit data): the same values by construction, and tests compare both.
void predict_inside_portable(const std::uint16_t* src, std::uint32_t width, const Rect& r, std::uint32_t fx,
                             std::uint32_t fy, bool narrow, std::uint16_t* out, std::size_t out_stride) {
  predict_inside_any(src, width, r, fx, fy, narrow, out, out_stride);
}

#ifdef TEZIP_HAVE_AVX2_MOTION
template <std::uint32_t W>
[[gnu::target("avx2")]] inline __m256i load_row(const std::uint16_t* p) {
  if constexpr (W == 16) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  } else {
    return _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
}

template <std::uint32_t W>
[[gnu::target("avx2")]] inline void store_row(std::uint16_t* p, __m256i v) {
  if constexpr (W == 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(v));
  }
}

// predict_inside<std::uint16_t, W> in registers: 16 or 8 pixels a row, the same 16-bit sums (the
// compiler unrolls the fixed-width loops into scalar code instead of vectorizing them).
template <std::uint32_t W>
[[gnu::target("avx2")]] void predict_narrow_avx2(const std::uint16_t* src, std::uint32_t width, const Rect& r,
                                                std::uint32_t fx, std::uint32_t fy, std::uint16_t* out, std::size_t out_stride) {
  const __m256i w00 = _mm256_set1_epi16(short((4 - fx) * (4 - fy))), w01 = _mm256_set1_epi16(short(fx * (4 - fy)));
  const __m256i w10 = _mm256_set1_epi16(short((4 - fx) * fy)), w11 = _mm256_set1_epi16(short(fx * fy));
  const __m256i ax = _mm256_set1_epi16(short(4 - fx)), bx = _mm256_set1_epi16(short(fx));
  const __m256i ay = _mm256_set1_epi16(short(4 - fy)), by = _mm256_set1_epi16(short(fy));
  const __m256i two = _mm256_set1_epi16(2), eight = _mm256_set1_epi16(8);
  for (std::uint32_t y = 0; y < r.h; ++y, src += width, out += out_stride) {
    const std::uint16_t* below = src + (fy ? width : 0);
    if (!fx && !fy) {
      store_row<W>(out, load_row<W>(src));
    } else if (!fy) {
      const __m256i sum = _mm256_add_epi16(_mm256_mullo_epi16(load_row<W>(src), ax), _mm256_mullo_epi16(load_row<W>(src + 1), bx));
      store_row<W>(out, _mm256_srli_epi16(_mm256_add_epi16(sum, two), 2));
    } else if (!fx) {
      const __m256i sum = _mm256_add_epi16(_mm256_mullo_epi16(load_row<W>(src), ay), _mm256_mullo_epi16(load_row<W>(below), by));
      store_row<W>(out, _mm256_srli_epi16(_mm256_add_epi16(sum, two), 2));
    } else {
      const __m256i top = _mm256_add_epi16(_mm256_mullo_epi16(load_row<W>(src), w00), _mm256_mullo_epi16(load_row<W>(src + 1), w01));
      const __m256i bottom = _mm256_add_epi16(_mm256_mullo_epi16(load_row<W>(below), w10), _mm256_mullo_epi16(load_row<W>(below + 1), w11));
      store_row<W>(out, _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(top, bottom), eight), 4));
    }
  }
}

[[gnu::target("avx2")]] void predict_inside_avx2(const std::uint16_t* src, std::uint32_t width, const Rect& r,
                                                std::uint32_t fx, std::uint32_t fy, bool narrow, std::uint16_t* out,
                                                std::size_t out_stride) {
  if (narrow && r.w == 16) return predict_narrow_avx2<16>(src, width, r, fx, fy, out, out_stride);
  if (narrow && r.w == 8) return predict_narrow_avx2<8>(src, width, r, fx, fy, out, out_stride);
  predict_inside_any(src, width, r, fx, fy, narrow, out, out_stride);
}
#endif

// predict_inside through the kernels of `path`: the same values on every path.
void predict_inside_on(SimdPath path, const std::uint16_t* src, std::uint32_t width, const Rect& r, std::uint32_t fx,
                       std::uint32_t fy, bool narrow, std::uint16_t* out, std::size_t out_stride) {
#ifdef TEZIP_HAVE_AVX2_MOTION
  if (path >= SimdPath::avx2) return predict_inside_avx2(src, width, r, fx, fy, narrow, out, out_stride);
#endif
  (void)path;
  predict_inside_portable(src, width, r, fx, fy, narrow, out, out_stride);
}

// The block of `reference` displaced by v, written to out (r.w x r.h, rows out_stride apart):
// bilinear between the four pixels around each sample, weights in quarters, rounded to nearest.
// Samples outside the reference take the nearest edge pixel. `max_value`: no reference pixel
// exceeds it.
void predict(std::span<const std::uint16_t> reference, std::uint32_t width, std::uint32_t height, const Rect& r,
             MotionVector v, std::uint16_t* out, std::size_t out_stride, std::uint32_t max_value, SimdPath path) {
  const int ix = v.x >> 2, iy = v.y >> 2;  // floor: -1 quarter = one pixel left, plus three quarters
  const std::uint32_t fx = v.x & 3, fy = v.y & 3;
  const int x0 = int(r.x) + ix, y0 = int(r.y) + iy;
  const bool inside = x0 >= 0 && y0 >= 0 && x0 + int(r.w) + (fx != 0) <= int(width) && y0 + int(r.h) + (fy != 0) <= int(height);
  const std::uint16_t* src = reference.data() + (inside ? std::size_t(y0) * width + x0 : 0);
  std::uint32_t stride = width;
  const bool narrow = max_value < 4096;
  if (!inside && x0 >= 0 && x0 + int(r.w) + (fx != 0) <= int(width)) {
    // Inside across, past the top or bottom edge (most such calls: the search's bands of 16 or 32
    // rows): the rows whose samples lie inside in one call, each other row from its own and the
    // next row clamped in place (stride 0 where both are one row), no window copied. The same
    // samples as the window below; the search on cup's trial bands spent 7% of encoding in it.
    const int last = int(height) - 1, h = int(r.h);
    const int lo = std::clamp(-y0, 0, h), hi = std::clamp(last + 1 - int(fy != 0) - y0, lo, h);
    for (int y = 0; y < h;) {
      if (y == lo && hi > lo) {
        const std::size_t at = std::size_t(y0 + y) * width + std::size_t(x0);
        predict_inside_on(path, reference.data() + at, width, Rect{r.x, r.y, r.w, std::uint32_t(hi - lo)}, fx, fy, narrow,
                          out + std::size_t(y) * out_stride, out_stride);
        y = hi;
        continue;
      }
      const int a = std::clamp(y0 + y, 0, last), b = std::clamp(y0 + y + 1, 0, last);
      predict_inside_on(path, reference.data() + std::size_t(a) * width + std::size_t(x0), std::uint32_t(b - a) * width,
                        Rect{r.x, r.y, r.w, 1}, fx, fy, narrow, out + std::size_t(y) * out_stride, out_stride);
      ++y;
    }
    return;
  }
  std::array<std::uint16_t, (kBlock + 1) * (kBlock + 1)> window;
  if (!inside) {
    // The (w + 1) x (h + 1) samples around the block, each clamped to the nearest edge pixel,
    // then the same arithmetic as inside (a twelfth of encoding went to a per-pixel clamped loop).
    // Each row: the clamped columns left of the reference, a copy of those inside, the clamped
    // ones right of it (the same samples as clamping every column; a fifth of the encoder's motion
    // time on 96 x 96 frames went to the per-sample clamps).
    stride = r.w + 1;
    const int n = int(r.w) + 1;
    const int left = std::clamp(-x0, 0, n);                  // columns x0 + x < 0
    const int inside_end = std::clamp(int(width) - x0, left, n);  // columns x0 + x < width
    for (std::uint32_t y = 0; y <= r.h; ++y) {
      const std::uint16_t* row = reference.data() + std::size_t(std::clamp(y0 + int(y), 0, int(height) - 1)) * width;
      std::uint16_t* w = window.data() + y * stride;
      std::fill(w, w + left, row[0]);
      if (inside_end > left) std::copy(row + (x0 + left), row + (x0 + inside_end), w + left);
      std::fill(w + inside_end, w + n, row[width - 1]);
    }
    src = window.data();
  }
  predict_inside_on(path, src, stride, r, fx, fy, narrow, out, out_stride);
}

// The sum of absolute differences of h rows of w pixels (strides sa, sb); W = 0: any w. The
// search's areas are 16 or 8 pixels wide but at the frame's edges.
template <std::uint32_t W>
std::uint64_t sad_fixed(const std::uint16_t* a, std::size_t sa, const std::uint16_t* b, std::size_t sb, std::uint32_t w,
                        std::uint32_t h) {
  if constexpr (W != 0) w = W;
  std::uint32_t sum = 0;  // at most 16 x 16 x 65535 < 2^32
  for (std::uint32_t y = 0; y < h; ++y, a += sa, b += sb)
    for (std::uint32_t x = 0; x < w; ++x) sum += std::uint32_t(std::abs(int(a[x]) - int(b[x])));
  return sum;
}

#ifdef TEZIP_HAVE_AVX2_MOTION
// The sum of a vector's eight 32-bit lanes, and of two 64-bit ones.
[[gnu::target("avx2")]] inline std::uint32_t sum_lanes32(__m256i v) {
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i t = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  return std::uint32_t(_mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1))));
}
[[gnu::target("avx2")]] inline std::uint64_t sum_lanes64(__m128i v) {
  return std::uint64_t(_mm_cvtsi128_si64(v)) + std::uint64_t(_mm_extract_epi64(v, 1));
}

// 16 or 8 columns: |a - b| as the or of both saturating differences (exact for any 16 bits),
// widened to 32-bit lanes and summed.
template <std::uint32_t W>
[[gnu::target("avx2")]] std::uint64_t sad_avx2(const std::uint16_t* a, std::size_t sa, const std::uint16_t* b,
                                              std::size_t sb, std::uint32_t h) {
  const __m256i zero = _mm256_setzero_si256();
  __m256i acc = zero;
  for (std::uint32_t y = 0; y < h; ++y, a += sa, b += sb) {
    __m256i d;
    if constexpr (W == 16) {
      const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
      const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
      d = _mm256_or_si256(_mm256_subs_epu16(va, vb), _mm256_subs_epu16(vb, va));
    } else {
      const __m128i va = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
      const __m128i vb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
      d = _mm256_zextsi128_si256(_mm_or_si128(_mm_subs_epu16(va, vb), _mm_subs_epu16(vb, va)));
    }
    acc = _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_unpacklo_epi16(d, zero), _mm256_unpackhi_epi16(d, zero)));
  }
  return sum_lanes32(acc);
}
#endif

#ifdef TEZIP_HAVE_AVX2_MOTION
// sad_avx2 for pixels that fit a byte (8-bit data): two rows packed to bytes (saturating, so exact
// below 256), their absolute differences summed by vpsadbw: a third of the instructions. 16 or 8
// columns; an odd last row alone.
template <std::uint32_t W>
[[gnu::target("avx2")]] std::uint64_t sad_bytes_avx2(const std::uint16_t* a, std::size_t sa, const std::uint16_t* b,
                                                    std::size_t sb, std::uint32_t h) {
  __m128i acc = _mm_setzero_si128();
  std::uint32_t y = 0;
  if constexpr (W == 16) {
    const __m256i zero = _mm256_setzero_si256();
    __m256i wide = zero;
    for (; y + 2 <= h; y += 2, a += 2 * sa, b += 2 * sb) {
      const __m256i va = _mm256_packus_epi16(load_row<16>(a), load_row<16>(a + sa));
      const __m256i vb = _mm256_packus_epi16(load_row<16>(b), load_row<16>(b + sb));
      wide = _mm256_add_epi64(wide, _mm256_sad_epu8(va, vb));
    }
    if (y < h)
      wide = _mm256_add_epi64(wide, _mm256_sad_epu8(_mm256_packus_epi16(load_row<16>(a), zero),
                                                    _mm256_packus_epi16(load_row<16>(b), zero)));
    acc = _mm_add_epi64(_mm256_castsi256_si128(wide), _mm256_extracti128_si256(wide, 1));
  } else {
    const __m128i zero = _mm_setzero_si128();
    for (; y + 2 <= h; y += 2, a += 2 * sa, b += 2 * sb) {
      const __m128i va = _mm_packus_epi16(_mm256_castsi256_si128(load_row<8>(a)), _mm256_castsi256_si128(load_row<8>(a + sa)));
      const __m128i vb = _mm_packus_epi16(_mm256_castsi256_si128(load_row<8>(b)), _mm256_castsi256_si128(load_row<8>(b + sb)));
      acc = _mm_add_epi64(acc, _mm_sad_epu8(va, vb));
    }
    if (y < h)
      acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_packus_epi16(_mm256_castsi256_si128(load_row<8>(a)), zero),
                                            _mm_packus_epi16(_mm256_castsi256_si128(load_row<8>(b)), zero)));
  }
  return sum_lanes64(acc);
}
#endif

#ifdef TEZIP_HAVE_AVX2_MOTION
// An area's own rows packed to bytes as sad_bytes_avx2 packs them, two rows a vector (16 columns:
// 32 bytes; 8: 16), so that each candidate's SAD packs only its own side: the search costs some
// 30 candidates a block and 20 a quarter against one packing (h even).
template <std::uint32_t W>
[[gnu::target("avx2")]] void pack_area_bytes(const std::uint16_t* a, std::size_t sa, std::uint32_t h, std::uint8_t* out) {
  for (std::uint32_t y = 0; y + 2 <= h; y += 2, a += 2 * sa, out += 2 * W) {
    if constexpr (W == 16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_packus_epi16(load_row<16>(a), load_row<16>(a + sa)));
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(_mm256_castsi256_si128(load_row<8>(a)),
                                                                         _mm256_castsi256_si128(load_row<8>(a + sa))));
    }
  }
}

// sad_bytes_avx2 against an area packed by pack_area_bytes: the same sums.
template <std::uint32_t W>
[[gnu::target("avx2")]] std::uint64_t sad_packed_avx2(const std::uint8_t* a, const std::uint16_t* b, std::size_t sb,
                                                     std::uint32_t h) {
  __m128i acc;
  if constexpr (W == 16) {
    __m256i wide = _mm256_setzero_si256();
    for (std::uint32_t y = 0; y + 2 <= h; y += 2, a += 2 * W, b += 2 * sb) {
      const __m256i vb = _mm256_packus_epi16(load_row<16>(b), load_row<16>(b + sb));
      wide = _mm256_add_epi64(wide, _mm256_sad_epu8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)), vb));
    }
    acc = _mm_add_epi64(_mm256_castsi256_si128(wide), _mm256_extracti128_si256(wide, 1));
  } else {
    acc = _mm_setzero_si128();
    for (std::uint32_t y = 0; y + 2 <= h; y += 2, a += 2 * W, b += 2 * sb) {
      const __m128i vb = _mm_packus_epi16(_mm256_castsi256_si128(load_row<8>(b)), _mm256_castsi256_si128(load_row<8>(b + sb)));
      acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)), vb));
    }
  }
  return sum_lanes64(acc);
}
#endif

// `bytes`: no pixel of either side exceeds 255.
std::uint64_t sad_rows(const std::uint16_t* a, std::size_t sa, const std::uint16_t* b, std::size_t sb, std::uint32_t w,
                       std::uint32_t h, bool bytes, SimdPath path) {
#ifdef TEZIP_HAVE_AVX2_MOTION
  if (path >= SimdPath::avx2 && bytes && w == 16) return sad_bytes_avx2<16>(a, sa, b, sb, h);
  if (path >= SimdPath::avx2 && bytes && w == 8) return sad_bytes_avx2<8>(a, sa, b, sb, h);
  if (path >= SimdPath::avx2 && w == 16) return sad_avx2<16>(a, sa, b, sb, h);
  if (path >= SimdPath::avx2 && w == 8) return sad_avx2<8>(a, sa, b, sb, h);
#else
  (void)bytes;
#endif
  (void)path;
  if (w == 16) return sad_fixed<16>(a, sa, b, sb, w, h);
  if (w == 8) return sad_fixed<8>(a, sa, b, sb, w, h);
  return sad_fixed<0>(a, sa, b, sb, w, h);
}

#ifdef TEZIP_HAVE_AVX2_MOTION
// bits_of of a lossless table, areas 16 or 8 wide, computed: value_bits(d) = 1 + 2 bit_width(v)
// with v = zigzag(d) / 2 = d ^ (d >> 31), bit_width(v) from the exponent of float(v) (exact below
// 2^24; 0 gives 0). Eight residuals a step without the table's lookups (a third of the search's
// cost of settling a block; a gather of the table's entries was no faster on AMD Zen 4).
template <std::uint32_t W>
[[gnu::target("avx2")]] std::uint64_t lossless_bits_avx2(const std::uint16_t* row, std::uint32_t width, std::uint32_t h,
                                                        const std::uint16_t* p, std::size_t stride) {
  const __m256i exponent_bias = _mm256_set1_epi32(126), zero = _mm256_setzero_si256(), one = _mm256_set1_epi32(1);
  __m256i acc = zero;
  for (std::uint32_t y = 0; y < h; ++y, row += width, p += stride)
    for (std::uint32_t x = 0; x < W; x += 8) {
      const __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + x)));
      const __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + x)));
      const __m256i d = _mm256_sub_epi32(a, b);
      const __m256i v = _mm256_xor_si256(d, _mm256_srai_epi32(d, 31));
      const __m256i e = _mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(v)), 23);
      const __m256i width_bits = _mm256_max_epi32(_mm256_sub_epi32(e, exponent_bias), zero);
      acc = _mm256_add_epi32(acc, _mm256_add_epi32(one, _mm256_slli_epi32(width_bits, 1)));
    }
  return sum_lanes32(acc);
}

// bits_of of any table, areas 16 or 8 wide: each residual's entry gathered as the low byte of the
// four bytes at it (the table has three bytes beyond its last entry).
template <std::uint32_t W>
[[gnu::target("avx2")]] std::uint64_t table_bits_avx2(const std::uint16_t* row, std::uint32_t width, std::uint32_t h,
                                                     const std::uint16_t* p, std::size_t stride, const std::uint8_t* bits) {
  const __m256i byte = _mm256_set1_epi32(0xff);
  __m256i acc = _mm256_setzero_si256();
  for (std::uint32_t y = 0; y < h; ++y, row += width, p += stride)
    for (std::uint32_t x = 0; x < W; x += 8) {
      const __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + x)));
      const __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + x)));
      const __m256i g = _mm256_i32gather_epi32(reinterpret_cast<const int*>(bits), _mm256_sub_epi32(a, b), 1);
      acc = _mm256_add_epi32(acc, _mm256_and_si256(g, byte));
    }
  return sum_lanes32(acc);
}

[[gnu::target("avx2")]] inline __m256i load(const std::int32_t* q) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)); }

// bin_magnitude of `count` residuals, eight at a time.
[[gnu::target("avx2")]] void bin_magnitudes_avx2(const std::int32_t* s, std::size_t count, std::uint32_t tolerance,
                                                std::int32_t* m) {
  const __m256 t = _mm256_set1_ps(float(tolerance)), width = _mm256_set1_ps(float(2 * tolerance + 1));
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256i a = _mm256_abs_epi32(load(s + i));
    const __m256i v = tolerance == 0 ? a
                                     : _mm256_cvttps_epi32(_mm256_div_ps(_mm256_add_ps(_mm256_cvtepi32_ps(a), t), width));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(m + i), v);
  }
  for (; i < count; ++i) m[i] = bin_magnitude(s[i], tolerance);
}

// context_residuals where every neighbour is read (the area and its margin inside the plane), W + 2
// columns a row: W of them eight at a time, the last two one by one.
template <std::uint32_t W>
[[gnu::target("avx2")]] void context_residuals_avx2(const std::uint16_t* in, std::uint32_t width, std::uint32_t h,
                                                   const std::uint16_t* f, std::size_t stride, std::int32_t* s) {
  for (std::uint32_t y = 0; y <= h; ++y, in += width, f += stride, s += W + 2) {
    for (std::uint32_t x = 0; x < W; x += 8) {
      const __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + x)));
      const __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(f + x)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + x), _mm256_sub_epi32(a, b));
    }
    s[W] = int(in[W]) - int(f[W]);
    s[W + 1] = int(in[W + 1]) - int(f[W + 1]);
  }
}

// context_bits_portable, 8 residuals a step: the activity from four unaligned loads, its class by
// comparisons with the classes' bounds, each price gathered as the low byte of the four at it.
template <std::uint32_t W>
[[gnu::target("avx2")]] std::uint64_t context_bits_avx2(const std::int32_t* s, const std::int32_t* m, std::uint32_t h,
                                                       const ResidualBits& table) {
  constexpr std::uint32_t row = W + 2;
  const __m128i shift = _mm_cvtsi32_si128(int(table.context_shift));
  const __m256i n = _mm256_set1_epi32(int(table.bits.size())), offset = _mm256_set1_epi32(table.offset);
  __m256i bounds[kActivityBounds.size()];
  for (std::size_t i = 0; i < kActivityBounds.size(); ++i) bounds[i] = _mm256_set1_epi32(int(kActivityBounds[i]));
  const __m256i byte = _mm256_set1_epi32(0xff);
  const int* prices = reinterpret_cast<const int*>(table.context_bits.data());
  __m256i acc = _mm256_setzero_si256();
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < W; x += 8) {
      const std::int32_t* up = m + y * row + x;        // the row above, from column x - 1
      const std::int32_t* at = m + (y + 1) * row + x;  // this row, from column x - 1
      __m256i activity = _mm256_add_epi32(_mm256_add_epi32(load(at), load(up)), _mm256_add_epi32(load(up + 1), load(up + 2)));
      activity = _mm256_srl_epi32(activity, shift);
      // The class: how many bounds the activity passes (each comparison -1 where it does).
      __m256i k = _mm256_setzero_si256();
      for (const __m256i bound : bounds) k = _mm256_sub_epi32(k, _mm256_cmpgt_epi32(activity, bound));
      const __m256i index = _mm256_add_epi32(_mm256_mullo_epi32(k, n), _mm256_add_epi32(load(s + (y + 1) * row + x + 1), offset));
      acc = _mm256_add_epi32(acc, _mm256_and_si256(_mm256_i32gather_epi32(prices, index, 1), byte));
    }
  return sum_lanes32(acc);
}
#endif

// The residuals over area r and around it (area_residual_bits: `margin`; 0 where a neighbour is
// not read), rows of r.w + 2 from the row above r, column 0 the column left of r, into `s`.
void context_residuals(const std::uint16_t* plane, std::uint32_t width, const Rect& r, const std::uint16_t* p,
                       std::size_t stride, bool margin, std::int32_t* s) {
  const std::uint32_t row = r.w + 2;
  // The columns and rows of `s` read: those inside the plane where there is a margin, else r's own.
  // (Column x is the plane's column r.x + x - 1, row y its row r.y + y - 1.)
  const std::uint32_t x0 = margin && r.x >= 1 ? 0 : 1, y0 = margin && r.y >= 1 ? 0 : 1;
  const std::uint32_t x1 = margin ? std::min<std::uint32_t>(row, width - r.x + 1) : r.w + 1;
  if (x0 > 0 || y0 > 0 || x1 < row) std::fill(s, s + (r.h + 1) * row, 0);
  for (std::uint32_t y = y0; y <= r.h; ++y) {
    const std::uint16_t* in = plane + std::size_t(r.y + y - 1) * width + r.x - 1;
    const std::uint16_t* f = p + (std::ptrdiff_t(y) - 1) * std::ptrdiff_t(stride) - 1;
    for (std::uint32_t x = x0; x < x1; ++x) s[y * row + x] = int(in[x]) - int(f[x]);
  }
}

// The table's context prices of the residuals `s` of area r (context_residuals), `m` their bins'
// magnitudes.
std::uint64_t context_bits_portable(const std::int32_t* s, const std::int32_t* m, const Rect& r, const ResidualBits& table) {
  const std::uint32_t row = r.w + 2, shift = table.context_shift;
  const std::size_t n = table.bits.size();
  std::uint64_t sum = 0;
  for (std::uint32_t y = 0; y < r.h; ++y)
    for (std::uint32_t x = 0; x < r.w; ++x) {
      const std::int32_t* up = m + y * row + x;        // the row above, from column x - 1
      const std::int32_t* at = m + (y + 1) * row + x;  // this row, from column x - 1
      const auto activity = std::uint32_t(at[0] + up[0] + up[1] + up[2]);
      sum += table.context_bits[residual_context(activity, shift) * n + std::size_t(s[(y + 1) * row + x + 1] + table.offset)];
    }
  return sum;
}

// The table's bits of the residual over area r; p: the forecast block, rows `stride` apart.
std::uint64_t bits_of(std::span<const std::uint16_t> plane, std::uint32_t width, const Rect& r, const std::uint16_t* p,
                      std::size_t stride, const ResidualBits& table, SimdPath path, bool margin = false) {
  if (!table.context_bits.empty() && r.w <= kBlock && r.h <= kBlock) {
    std::array<std::int32_t, (kBlock + 2) * (kBlock + 1)> residuals, magnitudes;
    const std::size_t count = (r.h + 1) * (r.w + 2);
#ifdef TEZIP_HAVE_AVX2_MOTION
    if (path >= SimdPath::avx2 && (r.w == 16 || r.w == 8)) {
      if (margin && r.x >= 1 && r.y >= 1 && r.x + r.w + 1 <= width) {
        const std::uint16_t* in = plane.data() + std::size_t(r.y - 1) * width + r.x - 1;
        const std::uint16_t* f = p - stride - 1;
        if (r.w == 16) context_residuals_avx2<16>(in, width, r.h, f, stride, residuals.data());
        else context_residuals_avx2<8>(in, width, r.h, f, stride, residuals.data());
      } else {
        context_residuals(plane.data(), width, r, p, stride, margin, residuals.data());
      }
      bin_magnitudes_avx2(residuals.data(), count, table.tolerance, magnitudes.data());
      return r.w == 16 ? context_bits_avx2<16>(residuals.data(), magnitudes.data(), r.h, table)
                       : context_bits_avx2<8>(residuals.data(), magnitudes.data(), r.h, table);
    }
#endif
    context_residuals(plane.data(), width, r, p, stride, margin, residuals.data());
    for (std::size_t i = 0; i < count; ++i) magnitudes[i] = bin_magnitude(residuals[i], table.tolerance);
    return context_bits_portable(residuals.data(), magnitudes.data(), r, table);
  }
  std::uint64_t sum = 0;
  const std::uint8_t* bits = table.bits.data() + table.offset;
  const std::uint16_t* row = plane.data() + std::size_t(r.y) * width + r.x;
#ifdef TEZIP_HAVE_AVX2_MOTION
  if (path >= SimdPath::avx2 && table.lossless && r.w == 16) return lossless_bits_avx2<16>(row, width, r.h, p, stride);
  if (path >= SimdPath::avx2 && table.lossless && r.w == 8) return lossless_bits_avx2<8>(row, width, r.h, p, stride);
  if (path >= SimdPath::avx2 && r.w == 16) return table_bits_avx2<16>(row, width, r.h, p, stride, bits);
  if (path >= SimdPath::avx2 && r.w == 8) return table_bits_avx2<8>(row, width, r.h, p, stride, bits);
#else
  (void)path;
#endif
  for (std::uint32_t y = 0; y < r.h; ++y, row += width, p += stride)
    for (std::uint32_t x = 0; x < r.w; ++x) sum += bits[int(row[x]) - int(p[x])];
  return sum;
}

// Bits of one zigzagged value under the estimate the plane transforms use (codecs/transform/plane_transform).
std::uint32_t value_bits(std::int32_t d) { return 1 + 2 * std::uint32_t(std::bit_width(zigzag(d) >> 1)); }
std::uint32_t vector_bits(MotionVector v, MotionVector pred) { return value_bits(v.x - pred.x) + value_bits(v.y - pred.y); }

MotionVector median(MotionVector a, MotionVector b, MotionVector c) {
  auto med = [](int p, int q, int r) { return std::max(std::min(p, q), std::min(std::max(p, q), r)); };
  return {std::int16_t(med(a.x, b.x, c.x)), std::int16_t(med(a.y, b.y, c.y))};
}

// The prediction of the vector of the area whose top-left unit is (ux, uy) and that is `span` units
// wide: the median of its left, upper and upper-right neighbours (the upper-left one where the
// upper-right is not coded yet); a missing neighbour counts as zero. Coding order: blocks in raster
// order, the units of a block in raster order (z order of 2 x 2). So the left, upper and upper-left
// units, where the plane has them, are always coded before; the upper-right one too, unless it lies
// in the next block of the same block row (uy odd and ux + span past this block). (Tests check
// this against the order's definition.)
MotionVector predict_vector(const MotionField& f, std::uint32_t ux, std::uint32_t uy, std::uint32_t span) {
  const std::size_t stride = f.units_x();
  const MotionVector* at = f.units.data() + std::size_t(uy) * stride + ux;
  const bool has_left = ux > 0, has_up = uy > 0;
  const std::uint32_t rx = ux + span;
  const bool has_right = has_up && rx < stride && (uy % 2 == 0 || rx / 2 == ux / 2);
  if (has_left && !has_up) return at[-1];  // the first row: the left neighbour alone
  const MotionVector left = has_left ? at[-1] : MotionVector{};
  const MotionVector up = has_up ? at[-std::ptrdiff_t(stride)] : MotionVector{};
  const MotionVector right = has_right               ? at[std::ptrdiff_t(span) - std::ptrdiff_t(stride)]
                             : has_left && has_up ? at[-std::ptrdiff_t(stride) - 1]
                                                  : MotionVector{};
  return median(left, up, right);
}

Rect unit_rect(const MotionField& f, std::uint32_t ux, std::uint32_t uy, std::uint32_t span) {
  Rect r{ux * kMotionUnit, uy * kMotionUnit, span * kMotionUnit, span * kMotionUnit};
  r.w = std::min(r.w, f.width - r.x);
  r.h = std::min(r.h, f.height - r.y);
  return r;
}

void set_units(MotionField& f, std::uint32_t ux, std::uint32_t uy, std::uint32_t span, MotionVector v) {
  for (std::uint32_t y = uy; y < std::min(uy + span, f.units_y()); ++y)
    for (std::uint32_t x = ux; x < std::min(ux + span, f.units_x()); ++x) f.units[std::size_t(y) * f.units_x() + x] = v;
}

// A spatial block's forecast: the rounded mean of the reference's pixels under the block.
// Sums of at most 16 x 16 pixels fit 32 bits (256 x 65535 < 2^24): vector lanes twice as wide as
// 64-bit sums would allow, the block's usual width fixed (W = 0: any).
template <std::uint32_t W>
std::uint32_t block_sum(const std::uint16_t* row, std::uint32_t width, std::uint32_t w, std::uint32_t h) {
  if constexpr (W != 0) w = W;
  std::uint32_t sum = 0;
  for (std::uint32_t y = 0; y < h; ++y, row += width)
    for (std::uint32_t x = 0; x < w; ++x) sum += row[x];
  return sum;
}

std::uint16_t block_dc(std::span<const std::uint16_t> reference, std::uint32_t width, const Rect& r) {
  const std::uint16_t* row = reference.data() + std::size_t(r.y) * width + r.x;
  const std::uint32_t sum = r.w == kBlock ? block_sum<kBlock>(row, width, r.w, r.h) : block_sum<0>(row, width, r.w, r.h);
  const std::uint32_t n = r.w * r.h;
  return std::uint16_t((sum + n / 2) / n);
}

MotionVector clamp_vector(int x, int y) {
  return {std::int16_t(std::clamp(x, -kMotionRange, kMotionRange)), std::int16_t(std::clamp(y, -kMotionRange, kMotionRange))};
}

// The reference at each of the 15 sub-pixel phases (fx, fy in quarters, not both 0), each computed
// once, on first use, by predict's own arithmetic over the whole plane: the search's half- and
// quarter-pixel candidates then cost a SAD against memory, not an interpolation of their block
// each (a block meets about 25 of them, its quarters as many again: some 3 interpolated pixels per
// pixel of the plane and phase, and the calls' own cost, against 1). Positions whose four samples
// leave the reference are not stored: predict() clamps them.
class SubpelPlanes {
 public:
  SubpelPlanes(std::span<const std::uint16_t> reference, std::uint32_t width, std::uint32_t height, std::uint32_t max_value,
               SimdPath path)
      : reference_(reference), width_(width), height_(height), narrow_(max_value < 4096), path_(path) {}

  // The block r displaced by v, in a plane of row stride width(); nullptr where predict() would
  // reach outside the reference (or v is whole-pixel: the reference itself serves).
  const std::uint16_t* block(const Rect& r, MotionVector v) {
    const std::uint32_t fx = v.x & 3, fy = v.y & 3;
    if (!fx && !fy) return nullptr;
    const int x0 = int(r.x) + (v.x >> 2), y0 = int(r.y) + (v.y >> 2);
    if (x0 < 0 || y0 < 0 || x0 + int(r.w) + (fx != 0) > int(width_) || y0 + int(r.h) + (fy != 0) > int(height_)) return nullptr;
    return phase(fx, fy) + std::size_t(y0) * width_ + std::size_t(x0);
  }

 private:
  const std::uint16_t* phase(std::uint32_t fx, std::uint32_t fy) {
    auto& plane = phases_[fy * 4 + fx];
    if (plane.empty()) {
      plane.resize(std::size_t(width_) * height_);
      // Rows and columns whose samples stay inside: the last column (fx) and row (fy) are not.
      const Rect row{0, 0, width_ - (fx != 0), 1};
      for (std::uint32_t y = 0; y + (fy != 0) < height_; ++y)
        predict_inside_on(path_, reference_.data() + std::size_t(y) * width_, width_, row, fx, fy, narrow_,
                          plane.data() + std::size_t(y) * width_, width_);
    }
    return plane.data();
  }

  std::span<const std::uint16_t> reference_;
  std::uint32_t width_, height_;
  bool narrow_;
  SimdPath path_;
  std::array<std::vector<std::uint16_t, BufferAllocator<std::uint16_t>>, 16> phases_;
};

// Searches one area: candidates first, then a square pattern of shrinking whole-pixel steps, then
// the eight half-pixel and then quarter-pixel neighbours. Cost: SAD + lambda * estimated vector bits.
class AreaSearch {
 public:
  AreaSearch(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> reference, SubpelPlanes& subpel,
             const MotionField& f, const Rect& r, MotionVector pred, double lambda, const ResidualBits* bits,
             std::uint32_t max_value, SimdPath path)
      : plane_(plane), reference_(reference), subpel_(subpel), f_(f), r_(r), pred_(pred), lambda_(lambda), bits_(bits),
        max_value_(max_value), path_(path) {
#ifdef TEZIP_HAVE_AVX2_MOTION
    // 8-bit areas of whole rows pairs: packed once (sad_packed_avx2); others as sad_rows does.
    packed_ = path >= SimdPath::avx2 && max_value < 256 && (r.w == 16 || r.w == 8) && r.h % 2 == 0;
    const std::uint16_t* a = plane.data() + std::size_t(r.y) * f.width + r.x;
    if (packed_ && r.w == 16) pack_area_bytes<16>(a, f.width, r.h, packed_area_.data());
    if (packed_ && r.w == 8) pack_area_bytes<8>(a, f.width, r.h, packed_area_.data());
#endif
  }

  // Decides between the search's best vector, the zero vector and the predicted one by estimated
  // bits (residual and vector); the result's cost is then in bits. Without a bit table the SAD
  // search's choice stands, its cost in SAD units.
  void settle() {
    if (!bits_) return;
    double best = 1e300;
    MotionVector chosen{};
    const std::array<MotionVector, 3> candidates{best_, MotionVector{}, pred_};
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const MotionVector v = candidates[i];
      // A vector met before costs the same and cannot win (often all three are one: static areas).
      if (std::find(candidates.begin(), candidates.begin() + i, v) != candidates.begin() + i) continue;
      std::size_t stride = 0;
      const std::uint16_t* p = forecast(v, stride);
      // The residual contexts read the forecast one pixel around the block where it lies inside the
      // reference (or a sub-pixel plane) there.
      const int x0 = int(r_.x) + (v.x >> 2), y0 = int(r_.y) + (v.y >> 2);
      const bool margin = stride == f_.width && x0 >= 1 && y0 >= 1 && x0 + int(r_.w) + 2 <= int(f_.width) &&
                          y0 + int(r_.h) + 1 <= int(f_.height);
      const double c = double(bits_of(plane_, f_.width, r_, p, stride, *bits_, path_, margin)) +
                       double(bits_->unit) * vector_bits(v, pred_);
      if (c < best) best = c, chosen = v;
    }
    if (!(chosen == best_)) best_sad_ = sad_of(chosen);
    best_ = chosen;
    best_cost_ = best;
  }
  // What one bit of a flag costs in the units of best_cost().
  double bit_cost() const { return bits_ ? double(bits_->unit) : lambda_; }

  // The block r displaced by v, its rows `stride` apart: whole-pixel vectors inside the reference
  // (most of the search) straight from it, others inside from a sub-pixel plane, the rest (reaching
  // past the edges) predicted into the buffer.
  const std::uint16_t* forecast(MotionVector v, std::size_t& stride) {
    const int x0 = int(r_.x) + (v.x >> 2), y0 = int(r_.y) + (v.y >> 2);
    stride = f_.width;
    if (!(v.x & 3) && !(v.y & 3) && x0 >= 0 && y0 >= 0 && x0 + int(r_.w) <= int(f_.width) && y0 + int(r_.h) <= int(f_.height))
      return reference_.data() + std::size_t(y0) * f_.width + std::size_t(x0);
    if (const std::uint16_t* p = subpel_.block(r_, v)) return p;
    predict(reference_, f_.width, f_.height, r_, v, buffer_.data(), r_.w, max_value_, path_);
    stride = r_.w;
    return buffer_.data();
  }
  std::uint64_t sad_of(MotionVector v) {
    std::size_t stride = 0;
    const std::uint16_t* p = forecast(v, stride);
#ifdef TEZIP_HAVE_AVX2_MOTION
    if (packed_) return r_.w == 16 ? sad_packed_avx2<16>(packed_area_.data(), p, stride, r_.h)
                                   : sad_packed_avx2<8>(packed_area_.data(), p, stride, r_.h);
#endif
    return sad_rows(plane_.data() + std::size_t(r_.y) * f_.width + r_.x, f_.width, p, stride, r_.w, r_.h, max_value_ < 256,
                    path_);
  }
  double cost_of(MotionVector v, std::uint64_t* sad_out = nullptr) {
    const std::uint64_t s = sad_of(v);
    if (sad_out) *sad_out = s;
    return double(s) + lambda_ * vector_bits(v, pred_);
  }
  void consider(MotionVector v) {
    if (tried(v)) return;
    std::uint64_t s;
    const double c = cost_of(v, &s);
    if (c < best_cost_) best_cost_ = c, best_ = v, best_sad_ = s;
  }
  // A square of 8 neighbours moved while it improves, at each step size; stops early on an exact
  // match. (A diamond of 4 was measured: the same archives on the datasets, 10% less encoding time,
  // but it loses a uniform 10.5 pixel translation that the square finds.)
  void refine(std::span<const int> steps) {
    for (std::size_t k = 0; k < steps.size() && best_sad_ > 0; ++k) {
      const int step = steps[k];
      for (int round = 0; round < 4 && best_sad_ > 0; ++round) {
        const MotionVector centre = best_;
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx)
            if (dx || dy) consider(clamp_vector(centre.x + dx * step, centre.y + dy * step));
        if (best_ == centre) break;
      }
    }
  }
  MotionVector best() const { return best_; }
  double best_cost() const { return best_cost_; }
  std::uint64_t best_sad() const { return best_sad_; }

 private:
  // Whether v was tried before; the first kMaxTried distinct vectors are remembered (a linear
  // scan of them was a tenth of encoding). Open addressing over kSlots > kMaxTried slots, so a
  // probe always ends at a free slot.
  bool tried(MotionVector v) {
    const std::uint32_t key = (std::uint32_t(std::uint16_t(v.x)) << 16) | std::uint16_t(v.y);
    std::uint32_t h = (key * 0x9E3779B1u) >> (32 - kSlotBits);
    while (occupied_[h >> 6] >> (h & 63) & 1) {
      if (keys_[h] == key) return true;
      h = (h + 1) & (kSlots - 1);
    }
    if (tried_count_ < kMaxTried) {
      occupied_[h >> 6] |= std::uint64_t{1} << (h & 63);
      keys_[h] = key;
      ++tried_count_;
    }
    return false;
  }
  static constexpr std::uint32_t kSlotBits = 7, kSlots = 1u << kSlotBits, kMaxTried = 96;
  std::span<const std::uint16_t> plane_, reference_;
  SubpelPlanes& subpel_;
  const MotionField& f_;
  Rect r_;
  MotionVector pred_;
  double lambda_;
  const ResidualBits* bits_;
  std::uint32_t max_value_;
  SimdPath path_;
  std::array<std::uint16_t, kBlock * kBlock> buffer_;  // written before it is read (forecast)
  bool packed_ = false;
  std::array<std::uint8_t, kBlock * kBlock> packed_area_;  // with packed_: the area's rows as bytes
  std::array<std::uint32_t, kSlots> keys_;
  std::array<std::uint64_t, kSlots / 64> occupied_{};
  std::uint32_t tried_count_ = 0;
  MotionVector best_{};
  double best_cost_ = 1e300;
  std::uint64_t best_sad_ = 0;
};

// Exact copies (synthetic, rendered or sparse frames: Moving MNIST's digits, masks, screen content)
// sit in narrow minima that a pattern search started from the neighbours' vectors walks past. Video
// coders for screen content (HEVC SCC, VVC) find them by hashing: every whole-pixel 8 x 8 window of
// the reference that is not flat, keyed by a polynomial hash of its pixels, so that a unit of the
// plane looks up the windows equal to it. Flat windows are left out (the zero and predicted
// vectors already find those), and every candidate is checked by its SAD, so a collision costs a
// wasted try, never a wrong choice.
constexpr std::uint64_t power(std::uint64_t b, int e) { return e == 0 ? 1 : b * power(b, e - 1); }
constexpr std::uint64_t sum_of_powers(std::uint64_t b, int n) { return n == 0 ? 0 : power(b, n - 1) + sum_of_powers(b, n - 1); }

class ExactMatches {
 public:
  ExactMatches(std::span<const std::uint16_t> reference, std::uint32_t width, std::uint32_t height) : width_(width) {
    if (width < kMotionUnit || height < kMotionUnit) return;
    const std::uint32_t nx = width - kMotionUnit + 1, ny = height - kMotionUnit + 1;
    // Row hashes of every 8-pixel run, then the column sums of 8 of them, both rolling.
    std::vector<std::uint64_t> rows(std::size_t(nx) * height);
    for (std::uint32_t y = 0; y < height; ++y) {
      const std::uint16_t* p = reference.data() + std::size_t(y) * width;
      std::uint64_t h = 0;
      for (std::uint32_t x = 0; x < kMotionUnit; ++x) h = h * kA + p[x];
      rows[std::size_t(y) * nx] = h;
      for (std::uint32_t x = 1; x < nx; ++x) {
        h = (h - p[x - 1] * kA7) * kA + p[x + kMotionUnit - 1];
        rows[std::size_t(y) * nx + x] = h;
      }
    }
    std::vector<std::pair<std::uint64_t, std::uint32_t>> raster;  // in raster order of the windows
    raster.reserve(std::size_t(nx) * ny);
    std::vector<std::uint64_t> column(nx, 0);
    for (std::uint32_t y = 0; y < kMotionUnit; ++y)
      for (std::uint32_t x = 0; x < nx; ++x) column[x] = column[x] * kC + rows[std::size_t(y) * nx + x];
    for (std::uint32_t y = 0; y < ny; ++y) {
      if (y > 0)
        for (std::uint32_t x = 0; x < nx; ++x)
          column[x] = (column[x] - rows[std::size_t(y - 1) * nx + x] * kC7) * kC + rows[std::size_t(y + kMotionUnit - 1) * nx + x];
      for (std::uint32_t x = 0; x < nx; ++x)
        if (column[x] != reference[std::size_t(y) * width + x] * kFlat) raster.push_back({column[x], y * width + x});
    }
    sort_entries(raster);
  }
  bool empty() const { return entries_.empty(); }

  // Calls f(vector) for windows of the reference whose hash equals the plane's 8 x 8 window at
  // (x, y) and whose displacement is in range; at most kTries calls, in raster order of the windows.
  template <class F>
  void each(std::span<const std::uint16_t> plane, std::uint32_t x, std::uint32_t y, std::uint32_t height, F&& f) const {
    if (entries_.empty() || x + kMotionUnit > width_ || y + kMotionUnit > height) return;
    std::uint64_t h = 0;
    for (std::uint32_t j = 0; j < kMotionUnit; ++j) {
      const std::uint16_t* p = plane.data() + std::size_t(y + j) * width_ + x;
      std::uint64_t r = 0;
      for (std::uint32_t i = 0; i < kMotionUnit; ++i) r = r * kA + p[i];
      h = h * kC + r;
    }
    if (h == plane[std::size_t(y) * width_ + x] * kFlat) return;
    auto it = std::lower_bound(entries_.begin(), entries_.end(), std::pair<std::uint64_t, std::uint32_t>{h, 0});
    int calls = 0;
    for (int scanned = 0; it != entries_.end() && it->first == h && scanned < kScan && calls < kTries; ++it, ++scanned) {
      const int dx = 4 * (int(it->second % width_) - int(x)), dy = 4 * (int(it->second / width_) - int(y));
      if (std::abs(dx) > kMotionRange || std::abs(dy) > kMotionRange) continue;
      f(MotionVector{std::int16_t(dx), std::int16_t(dy)});
      ++calls;
    }
  }

 private:
  static constexpr std::uint64_t kA = 0x9E3779B97F4A7C15ull, kC = 0xC2B2AE3D27D4EB4Full;
  static constexpr std::uint64_t kA7 = power(kA, kMotionUnit - 1), kC7 = power(kC, kMotionUnit - 1);
  // The hash of a window of one value v is v * kFlat (the hash is linear in the pixels).
  static constexpr std::uint64_t kFlat = sum_of_powers(kA, kMotionUnit) * sum_of_powers(kC, kMotionUnit);
  static constexpr int kTries = 4, kScan = 64;

  // entries_ = `raster` sorted by (hash, position), as std::sort would order it, in two steps: a
  // counting sort by the hashes' top bits (stable: positions stay in raster order), then each bucket
  // (a few entries) by (hash, position). A std::sort of the whole was a fifth of encoding mbt/cube,
  // whose exact copies make most frames look for moved ones.
  void sort_entries(const std::vector<std::pair<std::uint64_t, std::uint32_t>>& raster) {
    const int bits = std::clamp(int(std::bit_width(raster.size())) - 2, 1, 16);
    std::vector<std::uint32_t> start((std::size_t{1} << bits) + 1, 0);
    for (const auto& e : raster) ++start[(e.first >> (64 - bits)) + 1];
    for (std::size_t b = 1; b < start.size(); ++b) start[b] += start[b - 1];
    entries_.resize(raster.size());
    std::vector<std::uint32_t> next(start.begin(), start.end() - 1);
    for (const auto& e : raster) entries_[next[e.first >> (64 - bits)]++] = e;
    for (std::size_t b = 0; b + 1 < start.size(); ++b) {
      const auto first = entries_.begin() + start[b], last = entries_.begin() + start[b + 1];
      if (last - first > 16) {
        std::sort(first, last);
      } else {
        for (auto i = first; i != last; ++i)  // insertion sort
          for (auto j = i; j != first && *j < *(j - 1); --j) std::iter_swap(j, j - 1);
      }
    }
  }

  std::uint32_t width_ = 0;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> entries_;
};

constexpr std::array<int, 4> kBlockSteps{32, 16, 8, 4};  // whole pixels, in quarter-pixel units
constexpr std::array<int, 2> kUnitSteps{8, 4};
constexpr std::array<int, 1> kHalfStep{2};
constexpr std::array<int, 1> kQuarterStep{1};

}  // namespace

std::uint64_t area_residual_bits(std::span<const std::uint16_t> plane, std::uint32_t width, std::uint32_t x, std::uint32_t y,
                                 std::uint32_t w, std::uint32_t h, const std::uint16_t* forecast, std::size_t stride,
                                 const ResidualBits& table, SimdPath path, bool margin) {
  if (!simd_supported(path)) throw std::invalid_argument("area_residual_bits: this CPU cannot run the kernel path");
  return bits_of(plane, width, Rect{x, y, w, h}, forecast, stride, table, path, margin);
}

namespace {

// The quantization bin of residual r at `tolerance` (bins of 2 * tolerance + 1 centred on 0).
std::int32_t residual_bin(std::int32_t r, std::uint32_t tolerance) {
  const std::int32_t t = std::int32_t(tolerance), width = 2 * t + 1;
  return r >= 0 ? (r + t) / width : -((t - r) / width);
}

// The median transform's residual of column x >= 1 of a row below the first, clamped to
// [-reach, reach].
inline std::int32_t clamped_median_residual(const std::int32_t* row, const std::int32_t* up, std::size_t x, std::int32_t reach) {
  return std::clamp(row[x] - med_clamped(row[x - 1], up[x], up[x - 1]), -reach, reach);
}

// Counts of values in [0, bins). Where the bins are few the counts are kept in four copies, each
// value going to the next copy in turn: on a residual that repeats one value, four increments of
// one counter in a row each wait on the store before them.
class Histogram {
 public:
  explicit Histogram(std::size_t bins) : bins_(bins), copies_(bins <= 4096 ? 4 : 1), counts_(copies_ * bins, 0) {}

  // Counts value(i) for i in [0, n).
  template <class Value>
  void add(std::size_t n, Value value) {
    std::size_t i = 0;
    if (copies_ == 4) {
      std::uint32_t* c = counts_.data();
      for (; i + 4 <= n; i += 4) {
        ++c[value(i)];
        ++c[bins_ + value(i + 1)];
        ++c[2 * bins_ + value(i + 2)];
        ++c[3 * bins_ + value(i + 3)];
      }
    }
    for (; i < n; ++i) ++counts_[value(i)];
  }

  std::vector<std::uint32_t> total() const {
    std::vector<std::uint32_t> sum(counts_.begin(), counts_.begin() + std::ptrdiff_t(bins_));
    for (std::size_t k = 1; k < copies_; ++k)
      for (std::size_t b = 0; b < bins_; ++b) sum[b] += counts_[k * bins_ + b];
    return sum;
  }

 private:
  std::size_t bins_, copies_;
  std::vector<std::uint32_t> counts_;
};

}  // namespace

ResidualBits ResidualBits::uniform(std::uint32_t max_value, std::uint32_t tolerance) {
  ResidualBits table;
  table.offset = std::int32_t(max_value);
  table.lossless = tolerance == 0;
  table.tolerance = tolerance;
  // Three zero bytes beyond the last entry: choose_spatial_blocks' AVX2 sum reads four bytes at an
  // entry.
  table.bits.resize(2 * std::size_t(max_value) + 1 + 3);
  for (std::int32_t r = -table.offset; r <= table.offset; ++r)
    table.bits[std::size_t(r + table.offset)] = std::uint8_t(value_bits(residual_bin(r, tolerance)));
  return table;
}

ResidualBits ResidualBits::measured(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> forecast,
                                   const ResidualBits& prior) {
  Histogram counts(2 * std::size_t(prior.offset) + 1);
  const std::uint16_t* p = plane.data();
  const std::uint16_t* q = forecast.data();
  const std::int32_t offset = prior.offset;
  counts.add(plane.size(), [&](std::size_t i) { return std::uint32_t(std::int32_t(p[i]) - q[i] + offset); });
  return measured(counts.total(), plane.size(), prior);
}

ResidualBits ResidualBits::measured(std::span<const std::uint32_t> counts, std::uint64_t total, const ResidualBits& prior) {
  // Quarter bits: 2, 4 or 8 entries a bit gave archives within 0.01% of each other (mbt/cube,
  // Megamind's luma). The prior's weight (4, 64 or 1024 pixels' worth) left mire2 at abs 2 0.6%
  // larger than the uniform table with any of them.
  constexpr std::uint32_t kUnit = 4;
  constexpr double kPriorWeight = 4;
  const std::int32_t offset = prior.offset;
  const bool lossless = prior.tolerance == 0;  // each residual its own bin
  const auto bin = [&](std::int32_t r) { return lossless ? r : residual_bin(r, prior.tolerance); };
  const std::int32_t bins = bin(offset);
  std::vector<std::uint64_t> in_bin(2 * std::size_t(bins) + 1, 0);
  for (std::int32_t r = -offset; r <= offset; ++r) in_bin[std::size_t(bin(r) + bins)] += counts[std::size_t(r + offset)];
  // A bin never met is priced by the prior alone, which depends only on its value_bits: computed
  // once for each (16-bit tables have 131,071 bins, most of them never met).
  std::array<int, 64> unmet_price;
  unmet_price.fill(-1);
  std::vector<std::uint8_t> price(in_bin.size());
  for (std::size_t k = 0; k < in_bin.size(); ++k) {
    const std::uint32_t v = value_bits(std::int32_t(k) - bins);
    if (in_bin[k] == 0 && unmet_price[v] >= 0) {
      price[k] = std::uint8_t(unmet_price[v]);
      continue;
    }
    const double prior_share = std::exp2(-double(v));
    const double share = (double(in_bin[k]) + kPriorWeight * prior_share) / (double(total) + kPriorWeight);
    price[k] = std::uint8_t(std::clamp<long>(std::lround(-std::log2(share) * kUnit), 0, 255));
    if (in_bin[k] == 0) unmet_price[v] = price[k];
  }
  ResidualBits table;
  table.offset = offset;
  table.unit = kUnit;
  table.tolerance = prior.tolerance;
  table.bits.assign(prior.bits.size(), 0);
  for (std::int32_t r = -offset; r <= offset; ++r) table.bits[std::size_t(r + offset)] = price[std::size_t(bin(r) + bins)];
  return table;
}

std::size_t residual_context(std::uint32_t activity, std::uint32_t shift) {
  const std::uint32_t m = activity >> shift;
  std::size_t k = 0;
  for (const std::uint32_t bound : kActivityBounds) k += m > bound;
  return k;
}

ResidualBits ResidualBits::measured_in_contexts(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> forecast,
                                                std::uint32_t width, const ResidualBits& prior) {
  if (width == 0 || plane.size() != forecast.size() || plane.size() % width != 0) return measured(plane, forecast, prior);
  const std::size_t bins = 2 * std::size_t(prior.offset) + 1, n = prior.bits.size();
  // The activity's shift from the residual's mean magnitude m: none below 8, else the bits of 4m
  // beyond 5 (a typical activity of 4m then in the classes' upper half). (From the bins' magnitudes
  // in bounded modes instead: `datasets/sample` at abs 2 0.32% larger, the rest the same or worse.)
  std::uint64_t magnitudes = 0;
  for (std::size_t i = 0; i < plane.size(); ++i) magnitudes += std::uint64_t(std::abs(int(plane[i]) - int(forecast[i])));
  const std::uint64_t typical = plane.empty() ? 0 : 4 * magnitudes / plane.size();
  const std::uint32_t shift = std::uint32_t(std::max(0, int(std::bit_width(typical)) - 5));
  // Magnitudes of the row above and of this row (column x at x + 1), and this row's count indices
  // (context k, residual r: k * bins + r + offset), counted by a Histogram of its four copies.
  std::vector<std::int32_t> above(width + 2, 0), current(width + 2, 0);
  std::vector<std::uint32_t> index(width);
  const std::uint32_t offset = std::uint32_t(prior.offset);
  Histogram counted(kResidualContexts * bins);
  for (std::size_t y = 0; y < plane.size() / width; ++y) {
    const std::uint16_t* in = plane.data() + y * width;
    const std::uint16_t* f = forecast.data() + y * width;
    for (std::uint32_t x = 0; x < width; ++x) current[x + 1] = bin_magnitude(int(in[x]) - int(f[x]), prior.tolerance);
    for (std::uint32_t x = 0; x < width; ++x) {
      // residual_context as a sum of comparisons, so that the loop vectorizes.
      const std::uint32_t m = std::uint32_t(current[x] + above[x] + above[x + 1] + above[x + 2]) >> shift;
      std::uint32_t k = 0;
      for (const std::uint32_t bound : kActivityBounds) k += m > bound;
      index[x] = k * std::uint32_t(bins) + std::uint32_t(in[x]) + offset - std::uint32_t(f[x]);
    }
    counted.add(width, [&](std::size_t x) { return index[x]; });
    above.swap(current);
  }
  const std::vector<std::uint32_t> counts = counted.total();
  std::array<std::uint64_t, kResidualContexts> totals{};
  // The plane's own prices (measured) from the same counts, every context's summed.
  std::vector<std::uint32_t> all(bins, 0);
  for (std::size_t k = 0; k < kResidualContexts; ++k)
    for (std::size_t b = 0; b < bins; ++b) all[b] += counts[k * bins + b], totals[k] += counts[k * bins + b];
  ResidualBits table = measured(all, plane.size(), prior);
  table.context_shift = shift;
  table.context_bits.assign(kResidualContexts * n, 0);
  for (std::size_t k = 0; k < kResidualContexts; ++k) {
    const ResidualBits in_context =
        measured(std::span<const std::uint32_t>(counts).subspan(k * bins, bins), totals[k], prior);
    std::copy(in_context.bits.begin(), in_context.bits.end(), table.context_bits.begin() + std::ptrdiff_t(k * n));
  }
  return table;
}

MotionField::MotionField(std::uint32_t w, std::uint32_t h) : width(w), height(h) {
  units.assign(std::size_t(units_x()) * units_y(), MotionVector{});
  modes.assign(std::size_t(blocks_x()) * blocks_y(), 0);
}

namespace {

struct PassResult {
  double cost = 0;                  // the sum of the chosen areas' costs (bits with a table, else SAD units)
  std::size_t exact_moved = 0;      // areas not flat matched exactly by a non-zero vector
  std::size_t inexact = 0;          // areas left with a residual
};

// One pass of the search over every block, in coding order, into result (field, sad).
PassResult search_pass(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> reference,
                       SubpelPlanes& subpel, const MotionField* hint, const ResidualBits* bits, double lambda,
                       const ExactMatches* exact, std::uint32_t max_value, SimdPath path, MotionSearch& result) {
  MotionField& f = result.field;
  const bool use_hint = hint && hint->width == f.width && hint->height == f.height;
  PassResult pass;
  // An exact match of a flat area (sky, a black border, saturation) says nothing about copies.
  auto flat = [&](const Rect& r) {
    const std::uint16_t first = plane[std::size_t(r.y) * f.width + r.x];
    for (std::uint32_t y = 0; y < r.h; ++y) {
      const std::uint16_t* row = plane.data() + std::size_t(r.y + y) * f.width + r.x;
      for (std::uint32_t x = 0; x < r.w; ++x)
        if (row[x] != first) return false;
    }
    return true;
  };
  auto tally = [&](std::uint64_t sad, MotionVector v, const Rect& r) {
    if (sad > 0) ++pass.inexact;
    else if (!(v == MotionVector{}) && !flat(r)) ++pass.exact_moved;
  };
  for (std::uint32_t by = 0; by < f.blocks_y(); ++by)
    for (std::uint32_t bx = 0; bx < f.blocks_x(); ++bx) {
      const std::uint32_t ux = 2 * bx, uy = 2 * by;
      const Rect r = unit_rect(f, ux, uy, 2);
      const MotionVector pred = predict_vector(f, ux, uy, 2);
      AreaSearch whole(plane, reference, subpel, f, r, pred, lambda, bits, max_value, path);
      whole.consider({});
      whole.consider(pred);
      auto unit_at = [&](std::int64_t x, std::int64_t y) -> const MotionVector* {
        if (x < 0 || y < 0 || x >= f.units_x() || y >= f.units_y()) return nullptr;
        return &f.units[std::size_t(y) * f.units_x() + std::size_t(x)];
      };
      if (const auto* v = unit_at(std::int64_t(ux) - 1, uy)) whole.consider(*v);
      if (const auto* v = unit_at(ux, std::int64_t(uy) - 1)) whole.consider(*v);
      if (const auto* v = unit_at(std::int64_t(ux) + 2, std::int64_t(uy) - 1)) whole.consider(*v);
      if (use_hint) whole.consider(hint->units[std::size_t(uy) * f.units_x() + ux]);
      if (exact && whole.best_sad() > 0)
        for (std::uint32_t q = 0; q < 4; ++q)
          exact->each(plane, r.x + (q % 2) * kMotionUnit, r.y + (q / 2) * kMotionUnit, f.height,
                      [&](MotionVector v) { whole.consider(v); });
      whole.refine(kBlockSteps);
      whole.refine(kHalfStep);
      whole.refine(kQuarterStep);
      whole.settle();
      const double whole_cost = whole.best_cost() + whole.bit_cost();  // the split flag
      set_units(f, ux, uy, 2, whole.best());

      // The four quarters, each from the block's vector, where the block is whole units.
      const bool full = ux + 1 < f.units_x() && uy + 1 < f.units_y();
      double split_cost = whole.bit_cost();
      std::uint64_t split_sad = 0;
      std::array<MotionVector, 4> quarter{};
      std::array<std::uint64_t, 4> quarter_sad{};
      if (full && whole.best_sad() > 0) {
        // The predictions of later quarters see the earlier quarters' vectors: they are written
        // into the field as they are found, and the block's vector is put back if the split loses.
        for (std::uint32_t q = 0; q < 4 && split_cost < whole_cost; ++q) {
          const std::uint32_t qx = ux + q % 2, qy = uy + q / 2;
          const MotionVector qpred = predict_vector(f, qx, qy, 1);
          const Rect qr = unit_rect(f, qx, qy, 1);
          AreaSearch part(plane, reference, subpel, f, qr, qpred, lambda, bits, max_value, path);
          part.consider(whole.best());
          part.consider(qpred);
          part.consider({});
          if (use_hint) part.consider(hint->units[std::size_t(qy) * f.units_x() + qx]);
          if (exact && part.best_sad() > 0) exact->each(plane, qr.x, qr.y, f.height, [&](MotionVector v) { part.consider(v); });
          part.refine(kUnitSteps);
          part.refine(kHalfStep);
          part.refine(kQuarterStep);
          part.settle();
          quarter[q] = part.best();
          quarter_sad[q] = part.best_sad();
          f.units[std::size_t(qy) * f.units_x() + qx] = part.best();
          split_cost += part.best_cost();
          split_sad += part.best_sad();
        }
      }
      if (full && whole.best_sad() > 0 && split_cost < whole_cost) {
        f.modes[std::size_t(by) * f.blocks_x() + bx] = 1;
        for (std::uint32_t q = 0; q < 4; ++q) {
          f.units[std::size_t(uy + q / 2) * f.units_x() + ux + q % 2] = quarter[q];
          tally(quarter_sad[q], quarter[q], unit_rect(f, ux + q % 2, uy + q / 2, 1));
        }
        result.sad += split_sad;
        pass.cost += split_cost;
      } else {
        set_units(f, ux, uy, 2, whole.best());
        result.sad += whole.best_sad();
        pass.cost += whole_cost;
        tally(whole.best_sad(), whole.best(), r);
      }
    }
  return pass;
}

}  // namespace

MotionSearch search_motion(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> reference,
                           std::uint32_t width, const MotionField* hint, const ResidualBits* bits,
                           std::uint32_t max_value, SimdPath path, ResidualPrices prices) {
  if (!simd_supported(path)) throw std::invalid_argument("search_motion: this CPU cannot run the kernel path");
  const std::uint32_t height = width ? std::uint32_t(plane.size() / width) : 0;
  MotionSearch result;
  result.field = MotionField(width, height);
  if (plane.empty() || reference.size() != plane.size()) return result;
  // lambda converts estimated bits into SAD: a residual of mean magnitude b costs about log2(b) + c
  // bits per pixel, so one bit is worth b * ln 2 of SAD. b is this plane's own previous-frame residual.
  std::uint64_t zero_sad = 0;
  std::uint32_t largest = 0;
  for (std::size_t i = 0; i < plane.size(); ++i) {
    zero_sad += std::uint64_t(std::abs(int(plane[i]) - int(reference[i])));
    largest = std::max<std::uint32_t>(largest, std::max(plane[i], reference[i]));
  }
  result.zero_sad = zero_sad;
  // The pixels' own largest value picks the SAD kernels (bytes where they all fit): the result is
  // the same for any bound at least that, and the luma of a colour transform, whose frames range
  // over twice the pixels', stays below 256 on 8-bit video.
  max_value = std::min(max_value, largest);
  const double lambda = 0.69 * std::max(0.25, double(zero_sad) / double(plane.size()));

  SubpelPlanes subpel(reference, width, height, max_value, path);
  ResidualBits measured;
  if (bits && (prices == ResidualPrices::measured || prices == ResidualPrices::contextual)) {
    std::vector<std::uint16_t, BufferAllocator<std::uint16_t>> forecast(plane.size());
    if (hint && hint->width == width && hint->height == height) {
      compensate(*hint, reference, forecast, max_value, path);
    } else {
      MotionSearch first;
      first.field = MotionField(width, height);
      search_pass(plane, reference, subpel, hint, bits, lambda, nullptr, max_value, path, first);
      compensate(first.field, reference, forecast, max_value, path);
    }
    // `contextual`: each residual priced in its context, as the coder codes it (docs/defaults.md,
    // "Residual prices in context for the motion search").
    measured = prices == ResidualPrices::contextual ? ResidualBits::measured_in_contexts(plane, forecast, width, *bits)
                                                     : ResidualBits::measured(plane, forecast, *bits);
    bits = &measured;
  }
  const PassResult first = search_pass(plane, reference, subpel, hint, bits, lambda, nullptr, max_value, path, result);
  // The hashed candidates cost a sorted table of the reference and a second pass (on a 768 x 576
  // frame about as much as the first); they are looked for only where the pattern search has
  // shown the frame to be made of exact copies, at least one in five of its textured areas matched
  // exactly by a moved block, and residuals are left beside them, and kept where they lower the
  // cost. Camera video has no such matches; decoded video (vtest) has a few, 8 in 1644 areas per
  // frame, where the second pass found nothing and cost 30% of the encoding time.
  if (first.inexact > 0 && first.exact_moved * 4 >= first.inexact) {
    const ExactMatches exact(reference, width, height);
    if (!exact.empty()) {
      MotionSearch again;
      again.field = MotionField(width, height);
      again.zero_sad = zero_sad;
      const PassResult second = search_pass(plane, reference, subpel, hint, bits, lambda, &exact, max_value, path, again);
      if (second.cost < first.cost) result = std::move(again);
    }
  }
  // The bits the coded field will take, with the predictions of the final field.
  std::vector<std::uint32_t> symbols;
  append_motion_symbols(result.field, symbols);
  for (const auto s : symbols) result.vector_bits += 1 + 2 * std::uint64_t(std::bit_width(s >> 1));
  return result;
}

#ifdef TEZIP_HAVE_AVX2_MOTION
namespace {

// The median transform's residual of columns x..x+7 of a row below the first (x >= 1), clamped to
// [low, high] (the median forecast: wavefront_avx2::median8).
[[gnu::target("avx2")]] inline __m256i clamped_median_residual8(const std::int32_t* row, const std::int32_t* up, std::uint32_t x,
                                                                __m256i low, __m256i high) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + x));
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + x - 1));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(up + x));
  const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(up + x - 1));
  return _mm256_min_epi32(_mm256_max_epi32(_mm256_sub_epi32(v, wavefront_avx2::median8(a, b, c)), low), high);
}

// choose_spatial_blocks' estimate over columns [x0, x1) of a row below the first, x0 >= 1: the
// clamped residual's bits eight columns a vector, each gathered as the low byte of the four at
// its entry (`bits` points at entry 0 of a table with three bytes beyond its last entry); the rest
// one by one.
[[gnu::target("avx2")]] std::uint64_t median_bits_row_avx2(const std::int32_t* row, const std::int32_t* up, std::uint32_t x0,
                                                         std::uint32_t x1, const std::uint8_t* bits, std::int32_t reach) {
  __m256i acc = _mm256_setzero_si256();
  const __m256i low = _mm256_set1_epi32(-reach), high = _mm256_set1_epi32(reach), byte = _mm256_set1_epi32(0xff);
  std::uint32_t x = x0;
  for (; x + 8 <= x1; x += 8) {
    const __m256i d = clamped_median_residual8(row, up, x, low, high);
    const __m256i g = _mm256_i32gather_epi32(reinterpret_cast<const int*>(bits), d, 1);
    acc = _mm256_add_epi32(acc, _mm256_and_si256(g, byte));
  }
  alignas(32) std::uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  std::uint64_t sum = 0;
  for (const std::uint32_t lane : lanes) sum += lane;
  for (; x < x1; ++x) sum += bits[clamped_median_residual(row, up, x, reach)];
  return sum;
}

// The same residuals over columns [x0, x1) shifted by `reach` into [0, 2 reach]: the bins
// choose_spatial_blocks counts.
[[gnu::target("avx2")]] void median_bins_row_avx2(const std::int32_t* row, const std::int32_t* up, std::uint32_t x0,
                                                  std::uint32_t x1, std::int32_t reach, std::uint32_t* out) {
  const __m256i low = _mm256_set1_epi32(-reach), high = _mm256_set1_epi32(reach);
  std::uint32_t x = x0;
  for (; x + 8 <= x1; x += 8)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x), _mm256_add_epi32(clamped_median_residual8(row, up, x, low, high), high));
  for (; x < x1; ++x) out[x] = std::uint32_t(clamped_median_residual(row, up, x, reach) + reach);
}

}  // namespace
#endif

std::size_t choose_spatial_blocks(MotionField& f, std::span<const std::uint16_t> plane,
                                  std::span<const std::uint16_t> reference, std::span<const std::uint16_t> forecast,
                                  const ResidualBits& table, SimdPath path) {
  const std::size_t size = std::size_t(f.width) * f.height;
  if (plane.size() != size || reference.size() != size || forecast.size() != size || table.bits.empty()) return 0;
  // The residual plane as decided so far: the forecast's residual, x - DC in the spatial blocks.
  std::vector<std::int32_t, BufferAllocator<std::int32_t>> w(size);
  for (std::size_t i = 0; i < size; ++i) w[i] = std::int32_t(plane[i]) - std::int32_t(forecast[i]);
  const std::int32_t reach = table.offset;
  const std::size_t width = f.width;
  // The median transform's prediction of w[i] (forward_transform's edges: the first row from the
  // left, the first column from above).
  const auto median_of = [&](std::size_t y, std::size_t x) -> std::int64_t {
    const std::int32_t* row = w.data() + y * width;
    const std::int32_t* up = row - width;
    return y == 0 ? (x > 0 ? row[x - 1] : 0) : x == 0 ? up[0] : med_clamped(row[x - 1], up[x], up[x - 1]);
  };
  // w[y, x]'s residual under it, clamped to the table's reach.
  const auto clamped_residual = [&](std::size_t y, std::size_t x) {
    return std::clamp<std::int64_t>(w[y * width + x] - median_of(y, x), -reach, reach);
  };
#ifdef TEZIP_HAVE_AVX2_MOTION
  const bool simd = path >= SimdPath::avx2 && table.bits.size() >= 2 * std::size_t(reach) + 4;
#else
  (void)path;
#endif
  // The table's bins priced by the median transform of the whole residual, counted a row at a time.
  Histogram counts(2 * std::size_t(reach) + 1);
  std::vector<std::uint32_t> row_bins(width);
  for (std::size_t y = 0; y < f.height; ++y) {
    std::size_t x0 = 0;
#ifdef TEZIP_HAVE_AVX2_MOTION
    if (simd && y > 0 && width > 1) {
      row_bins[0] = std::uint32_t(clamped_residual(y, 0) + reach);
      median_bins_row_avx2(w.data() + y * width, w.data() + (y - 1) * width, 1, std::uint32_t(width), reach, row_bins.data());
      x0 = width;
    }
#endif
    for (std::size_t x = x0; x < width; ++x)
      row_bins[x] = std::uint32_t(clamped_residual(y, x) + reach);
    counts.add(width, [&](std::size_t x) { return row_bins[x]; });
  }
  const ResidualBits prices = ResidualBits::measured(counts.total(), size, table);
  const std::uint8_t* bits = prices.bits.data() + reach;
  // The estimated bits of the block's values under the median transform.
  auto median_bits = [&](const Rect& r) {
    std::uint64_t sum = 0;
    for (std::uint32_t y = r.y; y < r.y + r.h; ++y) {
#ifdef TEZIP_HAVE_AVX2_MOTION
      if (simd && y > 0) {
        const std::int32_t* row = w.data() + y * width;
        std::uint32_t x0 = r.x;
        if (x0 == 0) sum += bits[clamped_residual(y, 0)], x0 = 1;
        sum += median_bits_row_avx2(row, row - width, x0, r.x + r.w, bits, reach);
        continue;
      }
#endif
      for (std::uint32_t x = r.x; x < r.x + r.w; ++x) sum += bits[clamped_residual(y, x)];
    }
    return sum;
  };
  std::size_t marked = 0;
  std::array<std::int32_t, kBlock * kBlock> kept;
  for (std::uint32_t by = 0; by < f.blocks_y(); ++by)
    for (std::uint32_t bx = 0; bx < f.blocks_x(); ++bx) {
      std::uint8_t& mode = f.modes[std::size_t(by) * f.blocks_x() + bx];
      const std::uint32_t ux = 2 * bx, uy = 2 * by;
      const Rect r = unit_rect(f, ux, uy, 2);
      // What the block's vectors cost, as append_motion_symbols will predict them.
      std::uint64_t vectors = 0;
      const std::uint32_t span = mode == kSplitBlock ? 1 : 2;
      for (std::uint32_t y = uy; y < std::min(uy + 2, f.units_y()); y += span)
        for (std::uint32_t x = ux; x < std::min(ux + 2, f.units_x()); x += span)
          vectors += prices.unit * vector_bits(f.units[std::size_t(y) * f.units_x() + x], predict_vector(f, x, y, span));
      const std::uint64_t inter = median_bits(r) + vectors;
      const std::int32_t dc = block_dc(reference, f.width, r);
      for (std::uint32_t y = 0; y < r.h; ++y)
        for (std::uint32_t x = 0; x < r.w; ++x) {
          const std::size_t i = (r.y + y) * width + r.x + x;
          kept[y * r.w + x] = w[i];
          w[i] = std::int32_t(plane[i]) - dc;
        }
      // Two bits for the mode symbol's larger alphabet.
      if (median_bits(r) + 2 * prices.unit < inter) {
        mode = kSpatialBlock;
        set_units(f, ux, uy, 2, predict_vector(f, ux, uy, 2));
        ++marked;
      } else {
        for (std::uint32_t y = 0; y < r.h; ++y)
          std::copy(kept.begin() + y * r.w, kept.begin() + (y + 1) * r.w, w.begin() + std::ptrdiff_t((r.y + y) * width + r.x));
      }
    }
  return marked;
}

void compensate(const MotionField& f, std::span<const std::uint16_t> reference, std::span<std::uint16_t> out,
                std::uint32_t max_value, SimdPath path) {
  if (!simd_supported(path)) throw std::invalid_argument("compensate: this CPU cannot run the kernel path");
  if (reference.size() != std::size_t(f.width) * f.height || out.size() != reference.size())
    throw CodecError("motion field and plane sizes differ");
  for (std::uint32_t by = 0; by < f.blocks_y(); ++by)
    for (std::uint32_t bx = 0; bx < f.blocks_x(); ++bx) {
      // The reference under the next row of blocks, brought into L2 a block row ahead: the
      // reference was written a frame earlier and has left the cache, and its rows lie a plane's
      // width apart, where the hardware prefetcher does not follow (the copy of a zero vector's
      // block waited on them: half the compensation's time on colour vtest).
      if (bx % 2 == 0) {
        const std::uint32_t y0 = std::min(f.height - 1, (by + 1) * 2 * kMotionUnit);
        const std::uint32_t y1 = std::min(f.height - 1, y0 + 2 * kMotionUnit);
        const std::uint16_t* column = reference.data() + std::size_t(bx) * 2 * kMotionUnit;
        for (std::uint32_t y = y0; y <= y1; ++y) __builtin_prefetch(column + std::size_t(y) * f.width, 0, 2);
      }
      const std::uint8_t mode = f.modes[std::size_t(by) * f.blocks_x() + bx];
      if (mode == kSpatialBlock) {
        const Rect r = unit_rect(f, 2 * bx, 2 * by, 2);
        const std::uint16_t dc = block_dc(reference, f.width, r);
        for (std::uint32_t y = 0; y < r.h; ++y) {
          std::uint16_t* row = out.data() + std::size_t(r.y + y) * f.width + r.x;
          std::fill(row, row + r.w, dc);
        }
        continue;
      }
      const std::uint32_t span = mode == kSplitBlock ? 1 : 2;
      for (std::uint32_t uy = 2 * by; uy < std::min(2 * by + 2, f.units_y()); uy += span)
        for (std::uint32_t ux = 2 * bx; ux < std::min(2 * bx + 2, f.units_x()); ux += span) {
          const Rect r = unit_rect(f, ux, uy, span);
          // Straight into the plane: the block's rows f.width apart.
          predict(reference, f.width, f.height, r, f.units[std::size_t(uy) * f.units_x() + ux],
                  out.data() + std::size_t(r.y) * f.width + r.x, f.width, max_value, path);
        }
    }
}

MotionField scale_field(const MotionField& field, int num, int den) {
  if (den <= 0) throw CodecError("motion vector scale with a non-positive denominator");
  MotionField out = field;
  auto scale = [&](int v) {
    const long p = long(v) * num;
    const long q = p >= 0 ? (p + den / 2) / den : -((-p + den / 2) / den);
    return int(std::clamp<long>(q, -kMotionRange, kMotionRange));
  };
  for (auto& v : out.units) v = {std::int16_t(scale(v.x)), std::int16_t(scale(v.y))};
  return out;
}

MotionField chain_field(const MotionField& field, const MotionField& next) {
  if (next.width != field.width || next.height != field.height) throw CodecError("motion fields of different sizes chained");
  MotionField out = field;
  const std::int64_t nx = field.units_x(), ny = field.units_y(), unit = 4 * std::int64_t(kMotionUnit);  // a unit in quarter pixels
  auto unit_at = [&](std::int64_t quarter, std::int64_t n) {
    return std::clamp<std::int64_t>(quarter >= 0 ? quarter / unit : -1, 0, n - 1);
  };
  for (std::int64_t uy = 0; uy < ny; ++uy)
    for (std::int64_t ux = 0; ux < nx; ++ux) {
      MotionVector& v = out.units[std::size_t(uy * nx + ux)];
      const std::int64_t at = unit_at(uy * unit + unit / 2 + v.y, ny) * nx + unit_at(ux * unit + unit / 2 + v.x, nx);
      const MotionVector w = next.units[std::size_t(at)];
      v = {std::int16_t(std::clamp<int>(v.x + w.x, -kMotionRange, kMotionRange)),
           std::int16_t(std::clamp<int>(v.y + w.y, -kMotionRange, kMotionRange))};
    }
  return out;
}

void append_motion_symbols(const MotionField& field, std::vector<std::uint32_t>& out) {
  // Spatial blocks' units take their predicted vectors as they come, as the reader sets them.
  MotionField f = field;
  for (std::uint32_t by = 0; by < f.blocks_y(); ++by)
    for (std::uint32_t bx = 0; bx < f.blocks_x(); ++bx) {
      const std::uint8_t mode = f.modes[std::size_t(by) * f.blocks_x() + bx];
      out.push_back(mode);
      if (mode == kSpatialBlock) {
        set_units(f, 2 * bx, 2 * by, 2, predict_vector(f, 2 * bx, 2 * by, 2));
        continue;
      }
      const std::uint32_t span = mode == kSplitBlock ? 1 : 2;
      for (std::uint32_t uy = 2 * by; uy < std::min(2 * by + 2, f.units_y()); uy += span)
        for (std::uint32_t ux = 2 * bx; ux < std::min(2 * bx + 2, f.units_x()); ux += span) {
          const MotionVector v = f.units[std::size_t(uy) * f.units_x() + ux];
          const MotionVector p = predict_vector(f, ux, uy, span);
          out.push_back(zigzag(v.x - p.x));
          out.push_back(zigzag(v.y - p.y));
        }
    }
}

MotionField read_motion_symbols(std::span<const std::uint32_t> symbols, std::size_t& pos, std::uint32_t width,
                                std::uint32_t height, bool spatial) {
  MotionField f(width, height);
  auto next = [&] {
    if (pos >= symbols.size()) throw CodecError("motion vectors end early");
    return symbols[pos++];
  };
  for (std::uint32_t by = 0; by < f.blocks_y(); ++by)
    for (std::uint32_t bx = 0; bx < f.blocks_x(); ++bx) {
      const std::uint32_t flag = next();
      if (flag > (spatial ? kSpatialBlock : kSplitBlock)) throw CodecError("bad motion block mode");
      const bool split = flag == kSplitBlock;
      if (split && (2 * bx + 1 >= f.units_x() || 2 * by + 1 >= f.units_y()))
        throw CodecError("split motion block at the plane's edge");
      f.modes[std::size_t(by) * f.blocks_x() + bx] = std::uint8_t(flag);
      if (flag == kSpatialBlock) {
        set_units(f, 2 * bx, 2 * by, 2, predict_vector(f, 2 * bx, 2 * by, 2));
        continue;
      }
      const std::uint32_t span = split ? 1 : 2;
      for (std::uint32_t uy = 2 * by; uy < std::min(2 * by + 2, f.units_y()); uy += span)
        for (std::uint32_t ux = 2 * bx; ux < std::min(2 * bx + 2, f.units_x()); ux += span) {
          const MotionVector p = predict_vector(f, ux, uy, span);
          const std::int64_t x = std::int64_t(p.x) + unzigzag(next()), y = std::int64_t(p.y) + unzigzag(next());
          if (std::abs(x) > kMotionRange || std::abs(y) > kMotionRange) throw CodecError("motion vector out of range");
          set_units(f, ux, uy, span, MotionVector{std::int16_t(x), std::int16_t(y)});
        }
    }
  return f;
}


namespace {

// One row of smooth_forecast's horizontal pass: h[x] = in[x - 1] + w in[x] + in[x + 1] (w the centre
// weight), edges repeated. Integer sums, so the compilers' vectors (and the AVX2 build of it below)
// give the same values.
inline void smooth_row_loop(const std::uint16_t* in, std::size_t width, std::uint32_t w, std::uint32_t* h) {
  if (width == 1) {
    h[0] = (w + 2) * in[0];
    return;
  }
  h[0] = (w + 1) * in[0] + in[1];
  for (std::size_t x = 1; x + 1 < width; ++x) h[x] = std::uint32_t{in[x - 1]} + w * in[x] + in[x + 1];
  h[width - 1] = std::uint32_t{in[width - 2]} + (w + 1) * in[width - 1];
}

// The vertical pass over three rows of sums: (a + w b + c + (w + 2)^2 / 2) >> shift, (w + 2)^2 = 2^shift.
inline void smooth_column_loop(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c, std::size_t width,
                               std::uint32_t w, unsigned shift, std::uint16_t* out) {
  const std::uint32_t half = std::uint32_t{1} << (shift - 1);
  for (std::size_t x = 0; x < width; ++x) out[x] = static_cast<std::uint16_t>((a[x] + w * b[x] + c[x] + half) >> shift);
}

#if defined(__x86_64__) || defined(__i386__)
[[gnu::target("avx2")]] void smooth_row_avx2(const std::uint16_t* in, std::size_t width, std::uint32_t w,
                                             std::uint32_t* h) {
  smooth_row_loop(in, width, w, h);
}
[[gnu::target("avx2")]] void smooth_column_avx2(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                                                std::size_t width, std::uint32_t w, unsigned shift, std::uint16_t* out) {
  smooth_column_loop(a, b, c, width, w, shift, out);
}
#endif

}  // namespace

void smooth_forecast(std::span<const std::uint16_t> in, std::size_t width, std::span<std::uint16_t> out, Smoothing strength,
                     SimdPath path) {
  if (width == 0 || in.size() % width != 0 || out.size() != in.size())
    throw std::invalid_argument("smooth_forecast: not whole rows, or an output of another size");
  const std::uint32_t w = strength == Smoothing::strong ? 2 : 6;  // [1 2 1] / 4 or [1 6 1] / 8 each way
  const unsigned shift = strength == Smoothing::strong ? 4 : 6;
  const std::size_t height = in.size() / width;
  if (height == 0) return;
#if defined(__x86_64__) || defined(__i386__)
  const bool avx2 = path >= SimdPath::avx2;
#else
  (void)path;
#endif
  auto row = [&](std::size_t y, std::uint32_t* h) {
#if defined(__x86_64__) || defined(__i386__)
    if (avx2) return smooth_row_avx2(in.data() + y * width, width, w, h);
#endif
    smooth_row_loop(in.data() + y * width, width, w, h);
  };
  // Three rows of horizontal sums, rotated: the row above, this one, the one below.
  std::vector<std::uint32_t> sums(3 * width);
  std::uint32_t* h[3] = {sums.data(), sums.data() + width, sums.data() + 2 * width};
  row(0, h[1]);
  std::copy_n(h[1], width, h[0]);
  for (std::size_t y = 0; y < height; ++y) {
    if (y + 1 < height) row(y + 1, h[2]); else std::copy_n(h[1], width, h[2]);
    std::uint16_t* o = out.data() + y * width;
#if defined(__x86_64__) || defined(__i386__)
    if (avx2) {
      smooth_column_avx2(h[0], h[1], h[2], width, w, shift, o);
    } else
#endif
      smooth_column_loop(h[0], h[1], h[2], width, w, shift, o);
    std::uint32_t* first = h[0];
    h[0] = h[1], h[1] = h[2], h[2] = first;
  }
}

}  // namespace tezip::codecs
