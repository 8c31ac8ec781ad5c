#include "codecs/quantize/linear_quantizer.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <type_traits>

#include "codecs/buffer_pool.hpp"
#include "codecs/codec_error.hpp"
#include "codecs/transform/wavefront.hpp"
#include "codecs/quantize/error_bound.hpp"
#include "codecs/transform/interpolation.hpp"
#include "codecs/transform/plane_transform.hpp"

#include "codecs/transform/wavefront_avx2.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TEZIP_HAVE_AVX2_DEQUANTIZE 1
#endif

namespace tezip::codecs {
namespace {

#ifdef TEZIP_HAVE_AVX2_DEQUANTIZE
// Eight 32-bit lanes to eight 16-bit pixels (values already within 0..65535).
[[gnu::target("avx2")]] inline void store_pixels(std::uint16_t* out, __m256i v) {
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(packed));
}

[[gnu::target("avx2")]] inline __m256i load_forecast(const std::uint16_t* f) {
  return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(f)));
}

// UniformBins::bin of eight residuals: (|r| + e) * m >> 32 (m < 2^32 since w >= 3) by two
// 32 x 32 -> 64-bit multiplications (even and odd lanes), with the residual's sign (r == 0: bin 0,
// since e < w).
[[gnu::target("avx2")]] inline __m256i uniform_bin8(__m256i r, __m256i e, __m256i m) {
  const __m256i u = _mm256_add_epi32(_mm256_abs_epi32(r), e);
  const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(u, m), 32);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(u, 32), m);
  return _mm256_sign_epi32(_mm256_blend_epi32(even, odd, 0xAA), r);
}

// dequantize_plane's uniform path in 32 bits (the caller checked that it cannot overflow): the
// symbol clamped to +-limit bins, then f + q w clamped to the pixel range.
[[gnu::target("avx2")]] std::size_t dequantize_uniform_avx2(const std::int32_t* q, const std::uint16_t* f, std::uint16_t* out,
                                                           std::size_t n, std::int32_t w, std::int32_t limit, std::int32_t max_value) {
  const __m256i vw = _mm256_set1_epi32(w), lo = _mm256_set1_epi32(-limit), hi = _mm256_set1_epi32(limit);
  const __m256i zero = _mm256_setzero_si256(), top = _mm256_set1_epi32(max_value);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i qi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i));
    qi = _mm256_max_epi32(_mm256_min_epi32(qi, hi), lo);
    const __m256i y = _mm256_add_epi32(load_forecast(f + i), _mm256_mullo_epi32(qi, vw));
    store_pixels(out + i, _mm256_min_epi32(_mm256_max_epi32(y, zero), top));
  }
  return i;
}

// dequantize_plane's lossless path, 16 pixels a step: f + q, pixels packed in registers. Returns
// the pixels done; `bad` is set where a pixel left [0, max_value] (compared unsigned: below 0
// wraps above max_value; such pixels saturate instead of wrapping, and the plane is refused).
[[gnu::target("avx2")]] std::size_t dequantize_lossless_avx2(const std::int32_t* q, const std::uint16_t* f, std::uint16_t* out,
                                                            std::size_t n, std::uint32_t max_value, std::uint32_t& bad) {
  const __m256i top = _mm256_set1_epi32(std::int32_t(max_value));
  __m256i outside = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i f16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(f + i));
    const __m256i y0 = _mm256_add_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(f16)),
                                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i)));
    const __m256i y1 = _mm256_add_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(f16, 1)),
                                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i + 8)));
    outside = _mm256_or_si256(outside, _mm256_xor_si256(_mm256_max_epu32(y0, top), top));
    outside = _mm256_or_si256(outside, _mm256_xor_si256(_mm256_max_epu32(y1, top), top));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permute4x64_epi64(_mm256_packus_epi32(y0, y1), 0xD8));
  }
  bad |= std::uint32_t(!_mm256_testz_si256(outside, outside));
  return i;
}

// quantize_plane's uniform path: each residual's bin (uniform_bin8), then f + q w clamped to the
// pixel range. Returns the pixels done (whole vectors).
[[gnu::target("avx2")]] std::size_t quantize_uniform_avx2(const std::uint16_t* x, const std::uint16_t* f, std::int32_t* q,
                                                         std::uint16_t* out, std::size_t n, std::int32_t e, std::int32_t w,
                                                         std::uint32_t m, std::int32_t max_value) {
  const __m256i ve = _mm256_set1_epi32(e), vw = _mm256_set1_epi32(w), vm = _mm256_set1_epi32(std::int32_t(m));
  const __m256i zero = _mm256_setzero_si256(), top = _mm256_set1_epi32(max_value);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i fi = load_forecast(f + i);
    const __m256i qi = uniform_bin8(_mm256_sub_epi32(load_forecast(x + i), fi), ve, vm);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), qi);
    const __m256i y = _mm256_add_epi32(fi, _mm256_mullo_epi32(qi, vw));
    store_pixels(out + i, _mm256_min_epi32(_mm256_max_epi32(y, zero), top));
  }
  return i;
}
#endif

// The bin of residual r for half width e: bins of width 2e + 1 centred on the forecast.
inline std::int32_t bin_index(std::int32_t r, std::int32_t e) {
  if (e == 0) return r;
  const std::int32_t w = 2 * e + 1;
  return r >= 0 ? (r + e) / w : -((-r + e) / w);
}

// A lossless intra pixel (the portable rows: the first, those past the SIMD strips): y = f + q; a
// value above max_value (a negative sum wraps above it too) sets *out_of_range.
struct LosslessPixel {
  std::uint32_t max_value;
  std::uint32_t* out_of_range;
  std::uint16_t operator()(std::uint32_t f, std::int32_t q) const {
    const std::uint32_t y = f + std::uint32_t(q);
    *out_of_range |= std::uint32_t(y > max_value);
    return std::uint16_t(y);
  }
};

// An intra pixel in uniform bins of width w: f + q w clamped to the pixel range.
struct UniformPixel {
  std::int64_t w, max_value;
  std::uint16_t operator()(std::uint32_t f, std::int32_t q) const {
    return std::uint16_t(std::clamp<std::int64_t>(std::int64_t(f) + std::int64_t(q) * w, 0, max_value));
  }
};

// The intra reconstruction by the mean of four: out[i] = rec(mean_forecast(out, i), symbols[i]) in
// scan order, each row's left pixel carried in a register. A row's chain (an add, a shift, rec and
// the truncation to 16 bits, about 4 cycles a pixel) is latency-bound, so rows go in pairs, the
// second two columns behind the first (its up-right neighbour is the first row's pixel just made):
// two chains side by side (alone, a sixth of decoding ViSP's ellipse-1, whose planes nearly all
// take the mean).
template <class Rec>
void mean_rows(const std::int32_t* symbols, std::size_t width, std::size_t height, std::uint16_t* out, Rec rec) {
  const auto one_row = [&](std::size_t y) {
    const std::int32_t* s = symbols + y * width;
    std::uint16_t* row = out + y * width;
    if (y == 0) {
      std::uint32_t left = 0;
      for (std::size_t x = 0; x < width; ++x) left = row[x] = rec(left, s[x]);
      return;
    }
    const std::uint16_t* up = row - width;
    std::uint32_t left = row[0] = rec(up[0], s[0]);
    for (std::size_t x = 1; x < width; ++x) {
      const std::uint32_t d = x + 1 < width ? up[x + 1] : up[x];
      left = row[x] = rec(mean_of_four(left, up[x - 1], up[x], d), s[x]);
    }
  };
  if (height == 0) return;
  one_row(0);
  std::size_t y = 1;
  for (; width >= 3 && y + 1 < height; y += 2) {
    const std::uint16_t* up = out + (y - 1) * width;
    std::uint16_t* a = out + y * width;
    std::uint16_t* b = a + width;
    const std::int32_t* sa = symbols + y * width;
    const std::int32_t* sb = sa + width;
    // Row a's columns 0 and 1, row b's column 0 (its upper pixel, a[0]).
    std::uint32_t a0 = a[0] = rec(up[0], sa[0]);
    std::uint32_t a1 = a[1] = rec(mean_of_four(a0, up[0], up[1], up[2]), sa[1]);
    std::uint32_t lb = b[0] = rec(a0, sb[0]);
    // Then row a at x and row b at x - 1, whose up-right neighbour is a[x]; a0, a1: a[x - 2], a[x - 1].
    for (std::size_t x = 2; x < width; ++x) {
      const std::uint32_t d = x + 1 < width ? up[x + 1] : up[x];
      const std::uint32_t ax = a[x] = rec(mean_of_four(a1, up[x - 1], up[x], d), sa[x]);
      lb = b[x - 1] = rec(mean_of_four(lb, a0, a1, ax), sb[x - 1]);
      a0 = a1, a1 = ax;
    }
    // Row b's last column: its up-right neighbour is its upper one.
    b[width - 1] = rec(mean_of_four(lb, a0, a1, a1), sb[width - 1]);
  }
  for (; y < height; ++y) one_row(y);
}

// The intra reconstruction of a plane: out[i] = rec(intra_forecast(out, i), symbols[i]), in scan
// order (four rows at a time, codecs/transform/wavefront.hpp).
template <class Rec>
void intra_rows(const std::int32_t* symbols, std::size_t width, std::size_t height, std::uint16_t* out, Rec rec) {
  // A lambda, not the function's address: median_rows inlines it.
  const auto median = [](std::uint32_t a, std::uint32_t b, std::uint32_t c) { return med_pixels(a, b, c); };
  median_rows<std::uint32_t>(symbols, out, width, 0, height, median, rec);
}

#ifdef TEZIP_HAVE_AVX2_WAVEFRONT
// One step of the intra reconstruction for eight rows (wavefront_avx2.hpp): the median of
// reconstructed pixels (no wrap: they are 16-bit) or, at column 0, the pixel above, then `Rec`.
template <class Rec>
struct IntraStep {
  Rec rec;
  [[gnu::target("avx2")]] __m256i operator()(__m256i a, __m256i b, __m256i c, __m256i q, std::size_t i) {
    const __m256i lo = _mm256_min_epi32(a, b), hi = _mm256_max_epi32(a, b);
    // (a - c) + b: a - c waits only on the left neighbour, beside the permute that gives b.
    __m256i f = _mm256_max_epi32(lo, _mm256_min_epi32(hi, _mm256_add_epi32(_mm256_sub_epi32(a, c), b)));
    if (i < 8) f = _mm256_blendv_epi8(f, b, wavefront_avx2::column0(i));
    return rec(f, q, i);
  }
};

// Lossless: y = f + q as unsigned 32 bits, kept to 16 bits as the portable path stores it; a pixel
// lane above max_value (a negative sum wraps above it too) marks the plane out of range.
struct LosslessRec {
  __m256i max_value, bad;
  std::size_t width;
  [[gnu::target("avx2")]] __m256i operator()(__m256i f, __m256i q, std::size_t i) {
    const __m256i y = _mm256_add_epi32(f, q);
    const __m256i within = _mm256_cmpeq_epi32(_mm256_max_epu32(y, max_value), max_value);
    // Every lane is a pixel but in the first and last steps of a strip.
    const __m256i pixels = i >= 7 && i < width ? _mm256_set1_epi32(-1) : wavefront_avx2::inside(i, width);
    bad = _mm256_or_si256(bad, _mm256_andnot_si256(within, pixels));
    return _mm256_and_si256(y, _mm256_set1_epi32(0xFFFF));
  }
};

// A uniform tolerance in 32 bits (the caller checked it cannot overflow): the symbol clamped to
// +-limit bins, f + q w clamped to the pixel range, as dequantize_plane's loop.
struct UniformRec {
  __m256i w, low, high, max_value;
  [[gnu::target("avx2")]] __m256i operator()(__m256i f, __m256i q, std::size_t) const {
    q = _mm256_max_epi32(_mm256_min_epi32(q, high), low);
    const __m256i y = _mm256_add_epi32(f, _mm256_mullo_epi32(q, w));
    return _mm256_min_epi32(_mm256_max_epi32(y, _mm256_setzero_si256()), max_value);
  }
};

// IntraStep, LosslessRec and UniformRec on sixteen rows (AVX-512, wavefront_avx2.hpp's strip16):
// the same arithmetic lane by lane.
template <class Rec>
struct IntraStep16 {
  Rec rec;
  [[gnu::target(TEZIP_WAVEFRONT_AVX512_TARGET)]] __m512i operator()(__m512i a, __m512i b, __m512i c, __m512i q,
                                                                    std::size_t i) {
    const __m512i lo = _mm512_min_epi32(a, b), hi = _mm512_max_epi32(a, b);
    // (a - c) + b: a - c waits only on the left neighbour, beside the permute that gives b.
    __m512i f = _mm512_max_epi32(lo, _mm512_min_epi32(hi, _mm512_add_epi32(_mm512_sub_epi32(a, c), b)));
    if (i < 16) f = _mm512_mask_mov_epi32(f, __mmask16(1u << i), b);
    return rec(f, q, i);
  }
};

struct LosslessRec16 {
  __m512i max_value;
  __mmask16 bad;
  std::size_t width;
  [[gnu::target(TEZIP_WAVEFRONT_AVX512_TARGET)]] __m512i operator()(__m512i f, __m512i q, std::size_t i) {
    const __m512i y = _mm512_add_epi32(f, q);
    const __mmask16 pixels = i >= 15 && i < width ? __mmask16(0xFFFF) : wavefront_avx2::inside16(i, width);
    bad |= _mm512_mask_cmpgt_epu32_mask(pixels, y, max_value);
    return _mm512_and_si512(y, _mm512_set1_epi32(0xFFFF));
  }
};

struct UniformRec16 {
  __m512i w, low, high, max_value;
  [[gnu::target(TEZIP_WAVEFRONT_AVX512_TARGET)]] __m512i operator()(__m512i f, __m512i q, std::size_t) const {
    q = _mm512_max_epi32(_mm512_min_epi32(q, high), low);
    const __m512i y = _mm512_add_epi32(f, _mm512_mullo_epi32(q, w));
    return _mm512_min_epi32(_mm512_max_epi32(y, _mm512_setzero_si512()), max_value);
  }
};

// The intra reconstruction with strips of 8 rows in AVX2 (wavefront_avx2.hpp).
template <class Step, class Rec>
[[gnu::target("avx2")]] void intra_rows_avx2(const std::int32_t* symbols, std::size_t width, std::size_t height,
                                            std::uint16_t* out, Step& step, Rec rec) {
  const auto median = [](std::uint32_t a, std::uint32_t b, std::uint32_t c) { return med_pixels(a, b, c); };
  wavefront_avx2::median_rows8<std::uint32_t>(symbols, out, width, 0, height, median, rec, step);
}

// The same with strips of 16 rows first (AVX-512): the serial chain of each step serves twice the
// rows.
template <class Step, class Rec, class Step16>
[[gnu::target(TEZIP_WAVEFRONT_AVX512_TARGET)]] void intra_rows_avx512(const std::int32_t* symbols, std::size_t width,
                                                                     std::size_t height, std::uint16_t* out, Step& step,
                                                                     Rec rec, Step16& step16) {
  const auto median = [](std::uint32_t a, std::uint32_t b, std::uint32_t c) { return med_pixels(a, b, c); };
  wavefront_avx2::median_rows16<std::uint32_t>(symbols, out, width, 0, height, median, rec, step, step16);
}

// dequantize_plane_intra's lossless case; true when a pixel left the range.
[[gnu::target("avx2")]] bool intra_lossless_avx2(const std::int32_t* symbols, std::size_t width, std::size_t height,
                                                std::uint16_t* out, std::uint32_t max_value) {
  std::uint32_t out_of_range = 0;
  const LosslessPixel rec{max_value, &out_of_range};
  IntraStep<LosslessRec> step{{_mm256_set1_epi32(int(max_value)), _mm256_setzero_si256(), width}};
  intra_rows_avx2(symbols, width, height, out, step, rec);
  return out_of_range != 0 || !_mm256_testz_si256(step.rec.bad, step.rec.bad);
}

[[gnu::target(TEZIP_WAVEFRONT_AVX512_TARGET)]] bool intra_lossless_avx512(const std::int32_t* symbols, std::size_t width,
                                                                         std::size_t height, std::uint16_t* out,
                                                                         std::uint32_t max_value) {
  std::uint32_t out_of_range = 0;
  const LosslessPixel rec{max_value, &out_of_range};
  IntraStep<LosslessRec> step{{_mm256_set1_epi32(int(max_value)), _mm256_setzero_si256(), width}};
  IntraStep16<LosslessRec16> step16{{_mm512_set1_epi32(int(max_value)), 0, width}};
  intra_rows_avx512(symbols, width, height, out, step, rec, step16);
  return out_of_range != 0 || !_mm256_testz_si256(step.rec.bad, step.rec.bad) || step16.rec.bad != 0;
}

// dequantize_plane_intra's uniform case where 32 bits suffice.
[[gnu::target("avx2")]] void intra_uniform_avx2(const std::int32_t* symbols, std::size_t width, std::size_t height,
                                               std::uint16_t* out, std::int32_t w, std::int32_t max_value) {
  const UniformPixel rec{w, max_value};
  const int limit = max_value + 1;
  IntraStep<UniformRec> step{{_mm256_set1_epi32(w), _mm256_set1_epi32(-limit), _mm256_set1_epi32(limit),
                              _mm256_set1_epi32(max_value)}};
  intra_rows_avx2(symbols, width, height, out, step, rec);
}

[[gnu::target(TEZIP_WAVEFRONT_AVX512_TARGET)]] void intra_uniform_avx512(const std::int32_t* symbols, std::size_t width,
                                                                        std::size_t height, std::uint16_t* out,
                                                                        std::int32_t w, std::int32_t max_value) {
  const UniformPixel rec{w, max_value};
  const int limit = max_value + 1;
  IntraStep<UniformRec> step{{_mm256_set1_epi32(w), _mm256_set1_epi32(-limit), _mm256_set1_epi32(limit),
                              _mm256_set1_epi32(max_value)}};
  IntraStep16<UniformRec16> step16{{_mm512_set1_epi32(w), _mm512_set1_epi32(-limit), _mm512_set1_epi32(limit),
                                    _mm512_set1_epi32(max_value)}};
  intra_rows_avx512(symbols, width, height, out, step, rec, step16);
}

// IntraStep's `Rec` for quantize_plane_intra's uniform loop: its input is the original pixel x,
// and it returns the reconstruction f + bin(x - f) w clamped to the pixel range, which the next
// pixels are forecast from.
struct QuantizeRec {
  __m256i e, w, m, max_value;
  [[gnu::target("avx2")]] __m256i operator()(__m256i f, __m256i x, std::size_t) const {
    const __m256i y = _mm256_add_epi32(f, _mm256_mullo_epi32(uniform_bin8(_mm256_sub_epi32(x, f), e, m), w));
    return _mm256_min_epi32(_mm256_max_epi32(y, _mm256_setzero_si256()), max_value);
  }
};

// quantize_plane_intra's uniform case in AVX2, in two passes: the reconstruction, whose chain of
// forecasts runs sixteen (then eight) rows at once as the decoder's wavefront does, rows below
// whole strips and row 0 the portable way; then each pixel's bin from the finished reconstruction,
// which gives every forecast again without a chain (the forecast of a pixel depends only on
// reconstructed neighbours, so it is the one the first pass used). The same symbols and pixels as
// the portable loop.
[[gnu::target("avx2")]] void intra_quantize_avx2(const std::uint16_t* plane, std::size_t width, std::size_t height,
                                                const UniformBins& bins, std::int32_t max_value, std::int32_t* symbols,
                                                std::uint16_t* recon) {
  const auto scalar = [&](std::size_t y) {
    for (std::size_t i = y * width, x = 0; x < width; ++i, ++x) {
      const std::int32_t f = std::int32_t(intra_forecast(std::span<const std::uint16_t>(recon, (y + 1) * width), i, x, width));
      recon[i] = std::uint16_t(std::clamp(f + bins.bin(std::int32_t(plane[i]) - f) * bins.w, 0, max_value));
    }
  };
  scalar(0);
  IntraStep<QuantizeRec> step{{_mm256_set1_epi32(bins.e), _mm256_set1_epi32(bins.w), _mm256_set1_epi32(std::int32_t(bins.m)),
                                _mm256_set1_epi32(max_value)}};
  std::size_t y = 1;
  for (; y + 16 <= height; y += 16) wavefront_avx2::strips8<2>(plane, recon, width, y, step);
  for (; y + 8 <= height; y += 8) wavefront_avx2::strips8<1>(plane, recon, width, y, step);
  for (; y < height; ++y) scalar(y);
  // The bins: the first row and column the portable way, the rest eight a step.
  const __m256i e = step.rec.e, m = step.rec.m;
  for (std::size_t row = 0; row < height; ++row) {
    const std::uint16_t* x = plane + row * width;
    const std::uint16_t* r = recon + row * width;
    std::int32_t* q = symbols + row * width;
    std::size_t col = 0;
    if (row > 0 && width > 8) {
      const std::uint16_t* up = r - width;
      q[0] = bins.bin(std::int32_t(x[0]) - std::int32_t(up[0]));
      for (col = 1; col + 8 <= width; col += 8) {
        const __m256i f = wavefront_avx2::median8(load_forecast(r + col - 1), load_forecast(up + col), load_forecast(up + col - 1));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + col), uniform_bin8(_mm256_sub_epi32(load_forecast(x + col), f), e, m));
      }
    }
    for (; col < width; ++col) {
      const std::size_t i = row * width + col;
      q[col] = bins.bin(std::int32_t(x[col]) -
                        std::int32_t(intra_forecast(std::span<const std::uint16_t>(recon, (row + 1) * width), i, col, width)));
    }
  }
}
#endif

void check_sizes(std::size_t a, std::size_t b, std::size_t c) {
  if (a != b || a != c) throw CodecError("plane buffers differ in size");
}

}  // namespace

LinearQuantizer::LinearQuantizer(const PlaneBound& bound) : bound_(bound) {}

std::uint32_t LinearQuantizer::half_width(std::uint32_t f) const {
  if (bound_.pointwise_rel > 0) {
    const double rel = bound_.pointwise_rel;
    return pointwise_tolerance(rel / (1.0 + rel), f);
  }
  return bound_.tolerance;
}

std::int32_t LinearQuantizer::quantize(std::uint32_t x, std::uint32_t f, std::uint16_t& recon,
                                       std::vector<std::uint16_t>& literals) const {
  const std::int32_t e = std::int32_t(half_width(f));
  const std::int32_t r = std::int32_t(x) - std::int32_t(f);
  const std::int32_t q = bin_index(r, e);
  reconstruct(q, f, recon);
  if (bound_.pointwise_rel > 0 &&
      std::uint32_t(std::abs(std::int32_t(recon) - std::int32_t(x))) > pointwise_tolerance(bound_.pointwise_rel, x)) {
    literals.push_back(std::uint16_t(x));
    recon = std::uint16_t(x);
    return escape();
  }
  return q;
}

bool LinearQuantizer::reconstruct(std::int32_t q, std::uint32_t f, std::uint16_t& recon) const {
  if (q == escape() && bound_.pointwise_rel > 0) return false;
  const std::int64_t w = 2 * std::int64_t(half_width(f)) + 1;
  const std::int64_t y = std::int64_t(f) + std::int64_t(q) * w;
  recon = std::uint16_t(std::clamp<std::int64_t>(y, 0, bound_.max_value));
  return true;
}

std::uint16_t LiteralCursor::next() {
  if (position_ >= literals_.size()) throw CodecError("escape literals run out");
  return literals_[position_++];
}

void quantize_plane(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> forecast,
                    const PlaneBound& bound, std::span<std::int32_t> symbols, std::span<std::uint16_t> recon,
                    std::vector<std::uint16_t>& literals, SimdPath path) {
  check_sizes(plane.size(), forecast.size(), symbols.size());
  if (bound.lossless()) {  // lossless: the hot path, kept branch-free
    if (!recon.empty()) check_sizes(plane.size(), recon.size(), recon.size());
    for (std::size_t i = 0; i < plane.size(); ++i) symbols[i] = std::int32_t(plane[i]) - std::int32_t(forecast[i]);
    if (!recon.empty()) std::copy(plane.begin(), plane.end(), recon.begin());
    return;
  }
  check_sizes(plane.size(), recon.size(), recon.size());
  if (bound.pointwise_rel <= 0 && UniformBins::exact(bound.tolerance)) {
    // A uniform tolerance: no escapes, one bin width; vectorizable.
    const UniformBins bins(bound.tolerance);
    const std::int32_t max_value = std::int32_t(bound.max_value);
    std::size_t start = 0;
#ifdef TEZIP_HAVE_AVX2_DEQUANTIZE
    if (path >= SimdPath::avx2)
      start = quantize_uniform_avx2(plane.data(), forecast.data(), symbols.data(), recon.data(), plane.size(), bins.e, bins.w,
                                    std::uint32_t(bins.m), max_value);
#else
    (void)path;
#endif
    for (std::size_t i = start; i < plane.size(); ++i) {
      const std::int32_t f = forecast[i];
      const std::int32_t q = bins.bin(std::int32_t(plane[i]) - f);
      symbols[i] = q;
      recon[i] = std::uint16_t(std::clamp(f + q * bins.w, 0, max_value));
    }
    return;
  }
  const LinearQuantizer quantizer(bound);
  for (std::size_t i = 0; i < plane.size(); ++i) symbols[i] = quantizer.quantize(plane[i], forecast[i], recon[i], literals);
}

void dequantize_plane(std::span<const std::int32_t> symbols, std::span<const std::uint16_t> forecast,
                      const PlaneBound& bound, std::span<std::uint16_t> recon, LiteralCursor& literals, SimdPath path) {
  check_sizes(symbols.size(), forecast.size(), recon.size());
  (void)path;
  if (bound.lossless()) {
    // Branch-free and vectorizable: a value below 0 wraps to a huge unsigned one.
    const std::uint32_t max_value = bound.max_value;
    const std::int32_t* q = symbols.data();
    const std::uint16_t* f = forecast.data();
    std::uint16_t* out = recon.data();
    std::uint32_t out_of_range = 0;
    std::size_t start = 0;
#ifdef TEZIP_HAVE_AVX2_DEQUANTIZE
    // 16 pixels a step, packed in registers (an earlier AVX2 loop of 8, 2026-12-02, measured 0.97x
    // on mire2 and 1.05x on vtest and was not kept; this one: docs/performance.md, thirteenth session).
    if (path >= SimdPath::avx2) start = dequantize_lossless_avx2(q, f, out, symbols.size(), max_value, out_of_range);
#endif
    for (std::size_t i = start; i < symbols.size(); ++i) {
      const std::uint32_t y = std::uint32_t(f[i]) + std::uint32_t(q[i]);
      out_of_range |= std::uint32_t(y > max_value);
      out[i] = std::uint16_t(y);
    }
    if (out_of_range) throw CodecError("lossless residual leaves the pixel range");
    return;
  }
  if (bound.pointwise_rel <= 0) {  // a uniform tolerance: one bin width for the whole plane, no escapes
    const std::int64_t w = 2 * std::int64_t(bound.tolerance) + 1, max_value = bound.max_value;
    const std::int32_t* q = symbols.data();
    const std::uint16_t* f = forecast.data();
    std::uint16_t* out = recon.data();
    const std::int32_t limit = std::int32_t(max_value) + 1;
    if (uniform_in_32_bits(bound)) {
      // 32-bit arithmetic, which the compiler vectorizes: a symbol beyond +-(max + 1) bins lands
      // outside the pixel range either way, so clamping it first changes no result.
      const std::int32_t w32 = std::int32_t(w), m32 = std::int32_t(max_value);
      std::size_t start = 0;
#ifdef TEZIP_HAVE_AVX2_DEQUANTIZE
      if (path >= SimdPath::avx2) start = dequantize_uniform_avx2(q, f, out, symbols.size(), w32, limit, m32);
#endif
      for (std::size_t i = start; i < symbols.size(); ++i) {
        const std::int32_t qi = std::clamp(q[i], -limit, limit);
        out[i] = std::uint16_t(std::clamp(std::int32_t(f[i]) + qi * w32, 0, m32));
      }
      return;
    }
    for (std::size_t i = 0; i < symbols.size(); ++i)
      out[i] = std::uint16_t(std::clamp<std::int64_t>(std::int64_t(f[i]) + std::int64_t(q[i]) * w, 0, max_value));
    return;
  }
  const LinearQuantizer quantizer(bound);
  for (std::size_t i = 0; i < symbols.size(); ++i)
    if (!quantizer.reconstruct(symbols[i], forecast[i], recon[i])) recon[i] = literals.next();
}

namespace {

// The closed loop of interpolated planes: in the levels' order, each position's prediction from
// the reconstructed residuals before it (the pixel less the forecast; without a forecast, the
// pixel) added to its forecast and clamped to the pixel range; `code(i, prediction)` returns the
// position's bin. Writes the reconstruction to `recon`.
template <class Code>
void interpolated_closed_loop(std::span<const std::uint16_t> forecast, std::size_t width, std::size_t height,
                              const PlaneBound& bound, std::span<std::uint16_t> recon, Code&& code) {
  const std::int64_t w = 2 * std::int64_t(bound.tolerance) + 1, max_value = bound.max_value;
  const auto closed = [&](auto* residual, auto forecast_at) {
    interpolation::for_each_level(residual, width, height, [&](std::size_t i, std::int64_t prediction) {
      const std::int64_t f = forecast_at(i);
      const std::int64_t p = std::clamp<std::int64_t>(f + prediction, 0, max_value);
      const std::int64_t y = std::clamp<std::int64_t>(p + std::int64_t(code(i, p)) * w, 0, max_value);
      recon[i] = std::uint16_t(y);
      residual[i] = std::remove_reference_t<decltype(*residual)>(y - f);
    });
  };
  if (forecast.empty()) return closed(recon.data(), [](std::size_t) { return std::int64_t{0}; });
  std::vector<std::int32_t, BufferAllocator<std::int32_t>> residual(recon.size());  // pooled, written before read
  closed(residual.data(), [&](std::size_t i) { return std::int64_t(forecast[i]); });
}

void check_interpolated(std::size_t size, std::span<const std::uint16_t> forecast, std::size_t width, const PlaneBound& bound) {
  if (width == 0 || size % width != 0) throw CodecError("plane size is not a multiple of its width");
  if (!forecast.empty() && forecast.size() != size) throw CodecError("plane buffers differ in size");
  if (bound.pointwise_rel > 0) throw std::invalid_argument("interpolated planes: a pointwise bound");
}

}  // namespace

void quantize_plane_interpolated(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> forecast,
                                 std::size_t width, const PlaneBound& bound, std::span<std::int32_t> symbols,
                                 std::span<std::uint16_t> recon) {
  check_sizes(plane.size(), symbols.size(), recon.size());
  check_interpolated(plane.size(), forecast, width, bound);
  const std::int32_t e = std::int32_t(bound.tolerance);
  const UniformBins bins(bound.tolerance);
  const bool exact = UniformBins::exact(bound.tolerance);
  interpolated_closed_loop(forecast, width, plane.size() / width, bound, recon, [&](std::size_t i, std::int64_t p) {
    const std::int32_t r = std::int32_t(plane[i]) - std::int32_t(p);
    return symbols[i] = exact ? bins.bin(r) : bin_index(r, e);
  });
}

void dequantize_plane_interpolated(std::span<const std::int32_t> symbols, std::span<const std::uint16_t> forecast,
                                   std::size_t width, const PlaneBound& bound, std::span<std::uint16_t> recon) {
  check_sizes(symbols.size(), recon.size(), recon.size());
  check_interpolated(symbols.size(), forecast, width, bound);
  interpolated_closed_loop(forecast, width, symbols.size() / width, bound, recon,
                           [&](std::size_t i, std::int64_t) { return symbols[i]; });
}

namespace {

// A bounded intra plane quantized in scan order, each pixel's forecast `forecast(recon, i, x,
// width)` from the pixels reconstructed before it: in uniform bins, or by the linear quantizer
// (pointwise bounds, with escapes). The portable loops of both intra predictors.
template <class Forecast>
void quantize_intra_bounded(std::span<const std::uint16_t> plane, std::size_t width, const PlaneBound& bound,
                            std::span<std::int32_t> symbols, std::span<std::uint16_t> recon,
                            std::vector<std::uint16_t>& literals, Forecast forecast) {
  if (bound.pointwise_rel <= 0 && UniformBins::exact(bound.tolerance)) {
    const UniformBins bins(bound.tolerance);
    const std::int32_t max_value = std::int32_t(bound.max_value);
    for (std::size_t i = 0, x = 0; i < plane.size(); ++i, x = (x + 1 == width ? 0 : x + 1)) {
      const std::int32_t f = std::int32_t(forecast(recon, i, x, width));
      const std::int32_t q = bins.bin(std::int32_t(plane[i]) - f);
      symbols[i] = q;
      recon[i] = std::uint16_t(std::clamp(f + q * bins.w, 0, max_value));
    }
    return;
  }
  const LinearQuantizer quantizer(bound);
  for (std::size_t i = 0, x = 0; i < plane.size(); ++i, x = (x + 1 == width ? 0 : x + 1))
    symbols[i] = quantizer.quantize(plane[i], forecast(recon, i, x, width), recon[i], literals);
}

// quantize_plane_intra by the mean of four (IntraPredictor::mean): portable loops on every path.
void quantize_intra_mean(std::span<const std::uint16_t> plane, std::size_t width, const PlaneBound& bound,
                         std::span<std::int32_t> symbols, std::span<std::uint16_t> recon, std::vector<std::uint16_t>& literals) {
  const auto mean = [](std::span<const std::uint16_t> r, std::size_t i, std::size_t x, std::size_t w) {
    return mean_forecast(r, i, x, w);
  };
  if (!bound.lossless()) return quantize_intra_bounded(plane, width, bound, symbols, recon, literals, mean);
  // Lossless, the reconstruction is the plane: every forecast known up front.
  std::copy(plane.begin(), plane.end(), recon.begin());
  for (std::size_t i = 0, x = 0; i < plane.size(); ++i, x = (x + 1 == width ? 0 : x + 1))
    symbols[i] = std::int32_t(plane[i]) - std::int32_t(mean(plane, i, x, width));
}

}  // namespace

void quantize_plane_intra(std::span<const std::uint16_t> plane, std::size_t width, const PlaneBound& bound,
                          std::span<std::int32_t> symbols, std::span<std::uint16_t> recon,
                          std::vector<std::uint16_t>& literals, SimdPath path, IntraPredictor predictor) {
  check_sizes(plane.size(), symbols.size(), recon.size());
  if (width == 0 || plane.size() % width != 0) throw CodecError("plane size is not a multiple of its width");
  if (predictor == IntraPredictor::mean) return quantize_intra_mean(plane, width, bound, symbols, recon, literals);
  if (bound.lossless()) {
    // Lossless: the reconstruction is the plane, so every forecast is known up front and the
    // residuals have no chain (a loop the compiler vectorizes); the same values as the loop below.
    std::copy(plane.begin(), plane.end(), recon.begin());
    const std::uint16_t* p = plane.data();
    std::int32_t* q = symbols.data();
    for (std::size_t y = 0; y * width < plane.size(); ++y) {
      const std::uint16_t* row = p + y * width;
      std::int32_t* out = q + y * width;
      if (y == 0) {
        out[0] = row[0];
        for (std::size_t x = 1; x < width; ++x) out[x] = std::int32_t(row[x]) - std::int32_t(row[x - 1]);
        continue;
      }
      const std::uint16_t* up = row - width;
      out[0] = std::int32_t(row[0]) - std::int32_t(up[0]);
      for (std::size_t x = 1; x < width; ++x) {
        const std::int32_t a = row[x - 1], b = up[x], c = up[x - 1];
        const std::int32_t lo = std::min(a, b), hi = std::max(a, b);
        out[x] = std::int32_t(row[x]) - std::clamp(a + b - c, lo, hi);
      }
    }
    return;
  }
#ifdef TEZIP_HAVE_AVX2_WAVEFRONT
  if (bound.pointwise_rel <= 0 && UniformBins::exact(bound.tolerance) && path >= SimdPath::avx2)
    return intra_quantize_avx2(plane.data(), width, plane.size() / width, UniformBins(bound.tolerance),
                               std::int32_t(bound.max_value), symbols.data(), recon.data());
#else
  (void)path;
#endif
  quantize_intra_bounded(plane, width, bound, symbols, recon, literals,
                         [](std::span<const std::uint16_t> r, std::size_t i, std::size_t x, std::size_t w) {
                           return intra_forecast(r, i, x, w);
                         });
}

void dequantize_plane_intra(std::span<const std::int32_t> symbols, std::size_t width, const PlaneBound& bound,
                            std::span<std::uint16_t> recon, LiteralCursor& literals, SimdPath path, IntraPredictor predictor) {
  check_sizes(symbols.size(), recon.size(), recon.size());
  if (width == 0 || symbols.size() % width != 0) throw CodecError("plane size is not a multiple of its width");
  const std::size_t height = symbols.size() / width;
  if (predictor == IntraPredictor::mean) {
    if (bound.lossless()) {
      std::uint32_t out_of_range = 0;
      mean_rows(symbols.data(), width, height, recon.data(), LosslessPixel{bound.max_value, &out_of_range});
      if (out_of_range) throw CodecError("lossless residual leaves the pixel range");
    } else if (bound.pointwise_rel <= 0) {
      mean_rows(symbols.data(), width, height, recon.data(), UniformPixel{2 * std::int64_t(bound.tolerance) + 1, bound.max_value});
    } else {
      const LinearQuantizer quantizer(bound);
      for (std::size_t i = 0, x = 0; i < symbols.size(); ++i, x = (x + 1 == width ? 0 : x + 1))
        if (!quantizer.reconstruct(symbols[i], mean_forecast(recon, i, x, width), recon[i])) recon[i] = literals.next();
    }
    return;
  }
#ifdef TEZIP_HAVE_AVX2_WAVEFRONT
  const bool simd = path >= SimdPath::avx2 && width >= 16;
#else
  const bool simd = false;
  (void)path;
#endif
  const bool lossless = bound.lossless();
  if (lossless) {
    // y = f + q; a value below 0 wraps to a huge unsigned one, so one compare finds both ends.
    const std::uint32_t max_value = bound.max_value;
    std::uint32_t out_of_range = 0;
    const LosslessPixel rec{max_value, &out_of_range};
    if (!simd) {
      intra_rows(symbols.data(), width, height, recon.data(), rec);
    } else {
#ifdef TEZIP_HAVE_AVX2_WAVEFRONT
      const auto intra = path >= SimdPath::avx512 ? intra_lossless_avx512 : intra_lossless_avx2;
      out_of_range |= std::uint32_t(intra(symbols.data(), width, height, recon.data(), max_value));
#endif
    }
    if (out_of_range) throw CodecError("lossless residual leaves the pixel range");
    return;
  }
  if (bound.pointwise_rel <= 0) {  // a uniform tolerance: one bin width, no escapes
    const std::int64_t w = 2 * std::int64_t(bound.tolerance) + 1, max_value = bound.max_value;
    const UniformPixel rec{w, max_value};
    // 32 bits suffice where +-(max + 1) bins of width w stay below 2^30 (dequantize_plane's rule).
    if (!simd || (max_value + 1) * (w + 1) >= (std::int64_t{1} << 30)) {
      intra_rows(symbols.data(), width, height, recon.data(), rec);
    } else {
#ifdef TEZIP_HAVE_AVX2_WAVEFRONT
      const auto intra = path >= SimdPath::avx512 ? intra_uniform_avx512 : intra_uniform_avx2;
      intra(symbols.data(), width, height, recon.data(), std::int32_t(w), std::int32_t(max_value));
#endif
    }
    return;
  }
  const LinearQuantizer quantizer(bound);
  for (std::size_t i = 0, x = 0; i < symbols.size(); ++i, x = (x + 1 == width ? 0 : x + 1)) {
    const std::uint32_t f = intra_forecast(recon, i, x, width);
    if (lossless) {
      const std::int64_t y = std::int64_t(f) + symbols[i];
      if (y < 0 || y > std::int64_t(bound.max_value)) throw CodecError("lossless residual leaves the pixel range");
      recon[i] = std::uint16_t(y);
    } else if (!quantizer.reconstruct(symbols[i], f, recon[i])) {
      recon[i] = literals.next();
    }
  }
}

std::vector<std::int32_t> sample_intra_symbols(std::span<const std::uint16_t> plane, std::size_t width,
                                               const PlaneBound& bound, IntraPredictor predictor) {
  if (width == 0 || plane.size() % width != 0) throw CodecError("plane size is not a multiple of its width");
  const std::size_t height = plane.size() / width;
  const std::size_t step = cost_sample_step(height);
  const LinearQuantizer quantizer(bound);
  std::vector<std::int32_t> out((height + step - 1) / step * width);
  std::int32_t* bin_row = out.data();
  const bool uniform = bound.pointwise_rel <= 0 && UniformBins::exact(bound.tolerance);
  const UniformBins bins(uniform ? bound.tolerance : 0);
  // Each sampled row's forecasts first (intra_forecast's cases hoisted out of the row: a loop
  // without branches), then its bins (a loop per kind of bin).
  std::vector<std::int32_t> forecast(width);
  for (std::size_t y = 0; y < height; y += step, bin_row += width) {
    const std::uint16_t* row = plane.data() + y * width;
    forecast[0] = y == 0 ? 0 : row[-std::ptrdiff_t(width)];
    if (y == 0) {
      for (std::size_t x = 1; x < width; ++x) forecast[x] = row[x - 1];
    } else {
      const std::uint16_t* up = row - width;
      // 32-bit arithmetic (med_pixels: the same value for 16-bit pixels), which vectorizes.
      if (predictor == IntraPredictor::mean) {
        for (std::size_t x = 1; x + 1 < width; ++x) forecast[x] = std::int32_t(mean_of_four(row[x - 1], up[x - 1], up[x], up[x + 1]));
        if (width > 1) forecast[width - 1] = std::int32_t(mean_forecast(plane, y * width + width - 1, width - 1, width));
      } else {
        for (std::size_t x = 1; x < width; ++x) forecast[x] = std::int32_t(med_pixels(row[x - 1], up[x], up[x - 1]));
      }
    }
    if (uniform) {
      for (std::size_t x = 0; x < width; ++x) bin_row[x] = bins.bin(std::int32_t(row[x]) - forecast[x]);
    } else {
      for (std::size_t x = 0; x < width; ++x) {
        const std::int32_t f = forecast[x];
        bin_row[x] = bin_index(std::int32_t(row[x]) - f, std::int32_t(quantizer.half_width(std::uint32_t(f))));
      }
    }
  }
  return out;
}

}  // namespace tezip::codecs
