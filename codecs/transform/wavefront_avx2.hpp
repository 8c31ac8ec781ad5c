#pragma once
// The wavefront of wavefront.hpp eight rows deep, in one AVX2 vector: lane k reconstructs row
// y + k, one column behind lane k - 1, so at step i lane k computes column i - k. Lane k's upper
// neighbours are lane k - 1's last two outputs (one lane permute), lane 0's the row above. Each
// input row is loaded shifted by its lane number and 8 x 8 blocks are transposed in registers, so
// one vector holds a step's eight inputs; outputs go back the same way. strips8's rows pass through a
// scratch buffer with margins so that the skewed loads and stores stay in bounds (it also widens
// 16-bit planes); strip16 (AVX-512, sixteen rows), from int32 inputs to 16- or 32-bit outputs,
// masks its loads and stores at the edges instead.
//
// Only for x86 translation units that check the CPU (simd.hpp) before calling: the functions carry
// gnu::target("avx2") (the sixteen-row ones AVX-512's). Callers: the median transform's inverse
// (plane_transform.cpp), the intra reconstruction (linear_quantizer.cpp); the striped rANS
// decoder's row scatter takes transpose8.
#if defined(__x86_64__) || defined(__i386__)
// GCC 12's false "uninitialized" warnings inside its AVX-512 intrinsics (bug 105593), silenced for
// the header only, as in striped_rans.cpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <vector>

#include "codecs/transform/wavefront.hpp"

#define TEZIP_HAVE_AVX2_WAVEFRONT 1

namespace tezip::codecs::wavefront_avx2 {

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

// The scratch a strip of `rows` rows and `width` columns needs: rows + 1 rows (the one above
// first) of stride width + 48, a value's column x at 16 + x (zeroed margins on first use).
inline std::int32_t* scratch_for(std::size_t rows, std::size_t width) {
  thread_local std::vector<std::int32_t> scratch;
  if (scratch.size() < (rows + 1) * (width + 48)) scratch.assign((rows + 1) * (width + 48), 0);
  return scratch.data();
}

// n values to int32 (a copy, or 16-bit ones widened 8 at a time).
template <class In>
[[gnu::target("avx2")]] inline void widen(const In* src, std::int32_t* dst, std::size_t n) {
  if constexpr (sizeof(In) == 4) {
    std::memcpy(dst, src, n * sizeof(std::int32_t));
  } else {
    static_assert(sizeof(In) == 2, "16- or 32-bit values");
    std::size_t x = 0;
    for (; x + 8 <= n; x += 8)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + x),
                          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + x))));
    for (; x < n; ++x) dst[x] = std::int32_t(src[x]);
  }
}

// n int32 values back (a copy, or narrowed to 16 bits; they are within 0..65535 there).
template <class Out>
[[gnu::target("avx2")]] inline void narrow(const std::int32_t* src, Out* dst, std::size_t n) {
  if constexpr (sizeof(Out) == 4) {
    std::memcpy(dst, src, n * sizeof(std::int32_t));
  } else {
    static_assert(sizeof(Out) == 2, "16- or 32-bit values");
    std::size_t x = 0;
    for (; x + 8 <= n; x += 8) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + x));
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + x), _mm256_castsi256_si128(packed));
    }
    for (; x < n; ++x) dst[x] = Out(src[x]);
  }
}

// Rows [y, y + 8 S) of a plane (y >= 1, row y - 1 of `out` already reconstructed), S = 1 or 2
// vectors of eight rows: reads `in` (widened to int32), writes `out` (narrowed back: the outputs of
// a 16-bit plane must lie in 0..65535). Each step calls, for each vector v,
//   step(a, b, c, q, i - 8 v) -> the outputs of step i
// with a the lanes' left neighbours (their last outputs), b and c their upper and upper-left ones,
// q the inputs; lane k of vector v computes column i - 8 v - k of row y + 8 v + k (outside 0..width - 1
// the lane is ignored, and i - 8 v may wrap below zero; at column 0 the step must use b, the pixel
// above, as its prediction). Values travel as int32. Vector 1's lane 0 takes its upper neighbours
// from vector 0's lane 7 of the step before, so the two vectors' chains are independent within a
// step and their latencies overlap (AVX2 has no sixteen-lane vector; strip16 is AVX-512's).
template <int S, class In, class Out, class Step>
[[gnu::target("avx2")]] inline void strips8(const In* in, Out* out, std::size_t width, std::size_t y, Step& step) {
  static_assert(S == 1 || S == 2, "one or two vectors of eight rows");
  const std::size_t stride = width + 48;
  std::int32_t* scratch = scratch_for(8 * S, width);
  std::int32_t* up = scratch + 16;
  std::int32_t* row0 = scratch + stride + 16;
  widen(out + (y - 1) * width, up, width);
  for (std::size_t k = 0; k < 8 * S; ++k) widen(in + (y + k) * width, row0 + k * stride, width);
  const __m256i shift = _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6), last = _mm256_set1_epi32(7);
  __m256i a[S], c[S];
  for (int v = 0; v < S; ++v) a[v] = c[v] = _mm256_setzero_si256();
  const std::size_t steps = width + 8 * S - 1;
  for (std::size_t x0 = 0; x0 < steps; x0 += 8) {
    __m256i r[S][8];
    for (int v = 0; v < S; ++v) {
      for (std::size_t k = 0; k < 8; ++k)
        r[v][k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row0 + (8 * v + k) * stride + x0 - 8 * v - k));
      transpose8(r[v]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const std::size_t i = x0 + std::size_t(j);
      __m256i b[S];
      b[0] = _mm256_blend_epi32(_mm256_permutevar8x32_epi32(a[0], shift), _mm256_set1_epi32(up[i]), 0x01);
      if constexpr (S == 2)
        b[1] = _mm256_blend_epi32(_mm256_permutevar8x32_epi32(a[1], shift), _mm256_permutevar8x32_epi32(a[0], last), 0x01);
      for (int v = 0; v < S; ++v) {
        a[v] = step(a[v], b[v], c[v], r[v][j], i - 8 * std::size_t(v));
        r[v][j] = a[v];
        c[v] = b[v];
      }
    }
    for (int v = 0; v < S; ++v) {
      transpose8(r[v]);
      for (std::size_t k = 0; k < 8; ++k)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row0 + (8 * v + k) * stride + x0 - 8 * v - k), r[v][k]);
    }
  }
  for (std::size_t k = 0; k < 8 * S; ++k) narrow(row0 + k * stride, out + (y + k) * width, width);
}

// Whole strips of `rows` rows from row y (>= 1) up to y_end: those whose rows constant_rows fills
// without the chain filled so, the others by strip(y). Returns the first row left over.
template <class In, class Out, class Strip>
inline std::size_t whole_strips(const In* in, Out* out, std::size_t width, std::size_t y, std::size_t y_end,
                                std::size_t rows, Strip strip) {
  for (; y + rows <= y_end; y += rows) {
    const Out* up = out + (y - 1) * width;
    if (constant_rows(in + y * width, rows, up, width)) {
      std::fill(out + y * width, out + (y + rows) * width, up[0]);
      continue;
    }
    strip(y);
  }
  return y;
}

// Rows [y_begin, y_end) of a plane as wavefront.hpp's median_rows computes them (the same `med`
// and `rec`): row 0 and the rows past the last whole strip of 8 the portable way, strips whose
// rows constant_rows fills without the chain filled so, every other strip by strips8 with `step`
// (sixteen rows in two vectors, then eight).
template <class Value, class In, class Out, class Med, class Rec, class Step>
[[gnu::target("avx2")]] inline void median_rows8(const In* in, Out* out, std::size_t width, std::size_t y_begin, std::size_t y_end,
                                                 Med med, Rec rec, Step& step) {
  std::size_t y = y_begin;
  if (y == 0 && y_end > 0) median_rows<Value>(in, out, width, 0, 1, med, rec), y = 1;
  y = whole_strips(in, out, width, y, y_end, 16, [&](std::size_t at) { strips8<2>(in, out, width, at, step); });
  y = whole_strips(in, out, width, y, y_end, 8, [&](std::size_t at) { strips8<1>(in, out, width, at, step); });
  median_rows<Value>(in, out, width, y, y_end, med, rec);
}

// The median predictor of eight values from their left (a), upper (b) and upper-left (c)
// neighbours: a + b - c where c lies between a and b (no wrap possible there), else the smaller or
// the larger (c above the larger gives the smaller and the reverse): med_clamped's value
// (plane_transform.hpp) for every input, damaged streams' symbols included.
[[gnu::target("avx2")]] inline __m256i median8(__m256i a, __m256i b, __m256i c) {
  const __m256i lo = _mm256_min_epi32(a, b), hi = _mm256_max_epi32(a, b);
  __m256i m = _mm256_sub_epi32(_mm256_add_epi32(a, b), c);
  m = _mm256_blendv_epi8(m, lo, _mm256_cmpgt_epi32(c, hi));
  return _mm256_blendv_epi8(m, hi, _mm256_cmpgt_epi32(lo, c));
}

// The lanes whose column i - k is 0 (the column whose prediction is the pixel above).
[[gnu::target("avx2")]] inline __m256i column0(std::size_t i) {
  return _mm256_cmpeq_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(int(i)));
}

// The lanes whose column i - k lies in 0..width - 1.
[[gnu::target("avx2")]] inline __m256i inside(std::size_t i, std::size_t width) {
  const __m256i column = _mm256_sub_epi32(_mm256_set1_epi32(int(i)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), column),
                             _mm256_cmpgt_epi32(_mm256_set1_epi32(int(width)), column));
}

// ---- Sixteen rows a vector (AVX-512) -------------------------------------------------------------

#define TEZIP_WAVEFRONT_AVX512_TARGET "avx2,avx512f,avx512vl,avx512bw,avx512dq"

// 16 x 16 int32 transpose in registers: r[j] lane k <- r[k] lane j (4 x 4 within each 128-bit
// lane, then the 128-bit lanes 4 x 4, as the striped decoder's scatter).
[[gnu::target(TEZIP_WAVEFRONT_AVX512_TARGET)]] inline void transpose16(__m512i r[16]) {
  __m512i d[16];
  for (int j = 0; j < 4; ++j) {
    const __m512i t0 = _mm512_unpacklo_epi32(r[4 * j], r[4 * j + 1]), t1 = _mm512_unpackhi_epi32(r[4 * j], r[4 * j + 1]);
    const __m512i t2 = _mm512_unpacklo_epi32(r[4 * j + 2], r[4 * j + 3]), t3 = _mm512_unpackhi_epi32(r[4 * j + 2], r[4 * j + 3]);
    d[4 * j] = _mm512_unpacklo_epi64(t0, t2);
    d[4 * j + 1] = _mm512_unpackhi_epi64(t0, t2);
    d[4 * j + 2] = _mm512_unpacklo_epi64(t1, t3);
    d[4 * j + 3] = _mm512_unpackhi_epi64(t1, t3);
  }
  for (int m = 0; m < 4; ++m) {
    const __m512i p0 = _mm512_shuffle_i32x4(d[m], d[4 + m], 0x44), p1 = _mm512_shuffle_i32x4(d[m], d[4 + m], 0xEE);
    const __m512i q0 = _mm512_shuffle_i32x4(d[8 + m], d[12 + m], 0x44), q1 = _mm512_shuffle_i32x4(d[8 + m], d[12 + m], 0xEE);
    r[m] = _mm512_shuffle_i32x4(p0, q0, 0x88);
    r[4 + m] = _mm512_shuffle_i32x4(p0, q0, 0xDD);
    r[8 + m] = _mm512_shuffle_i32x4(p1, q1, 0x88);
    r[12 + m] = _mm512_shuffle_i32x4(p1, q1, 0xDD);
  }
}

// strips8<1> sixteen rows deep: rows [y, y + 16) of `out` (y >= 1, row y - 1 already reconstructed)
// from the int32 inputs `in` (`in` may be `out`: an int32 plane in place), lane k one column
// behind lane k - 1, in one 512-bit vector; `step(a, b, c, q, i)` as strips8's, on 16 lanes. No
// scratch: each row's 16 skewed columns are loaded straight from `in` and stored to `out` (16-bit
// outputs keep their low 16 bits, as strips8's narrowing does of values in range), masked where
// they leave 0..width - 1 (lanes there are ignored by the steps, as strips8's margins are), so a
// block's stores never reach columns a later block loads. Needs width >= 16 (the masked-off lanes
// of the first block then stay inside the plane).
template <class Out, class Step>
[[gnu::target(TEZIP_WAVEFRONT_AVX512_TARGET)]] inline void strip16(const std::int32_t* in, Out* out, std::size_t width,
                                                                  std::size_t y, Step& step) {
  static_assert(sizeof(Out) == 4 || sizeof(Out) == 2, "16- or 32-bit outputs");
  const Out* up = out + (y - 1) * width;
  const std::ptrdiff_t w = std::ptrdiff_t(width);
  // The lanes of row k's block at x0: columns x0 - k + i within 0..width - 1.
  const auto lanes = [w](std::ptrdiff_t first) -> __mmask16 {
    const std::ptrdiff_t lo = std::max<std::ptrdiff_t>(0, -first), hi = std::min<std::ptrdiff_t>(16, w - first);
    return hi <= lo ? __mmask16(0) : __mmask16(((1u << hi) - 1) & ~((1u << lo) - 1));
  };
  const __m512i shift = _mm512_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14);
  __m512i a = _mm512_setzero_si512(), c = _mm512_setzero_si512();
  const std::size_t steps = width + 15;
  alignas(64) std::int32_t above[16];
  for (std::size_t x0 = 0; x0 < steps; x0 += 16) {
    // Row k's block starts at k * (width - 1) past the first row's.
    const std::int32_t* src = in + y * width + x0;
    Out* dst = out + y * width + x0;
    const bool inside = x0 >= 15 && x0 + 16 <= width;
    __m512i r[16];
    for (std::size_t k = 0; k < 16; ++k) {
      const std::int32_t* at = src + std::ptrdiff_t(k) * (w - 1);
      r[k] = inside ? _mm512_loadu_si512(at) : _mm512_maskz_loadu_epi32(lanes(std::ptrdiff_t(x0) - std::ptrdiff_t(k)), at);
    }
    transpose16(r);
    // The row above, widened; past its end it reads as 0, as strips8's margin.
    const __mmask16 up_lanes = x0 + 16 <= width ? __mmask16(0xFFFF) : lanes(std::ptrdiff_t(x0));
    if constexpr (sizeof(Out) == 4) {
      _mm512_store_si512(above, _mm512_maskz_loadu_epi32(up_lanes, up + x0));
    } else {
      _mm512_store_si512(above, _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(up_lanes, up + x0)));
    }
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      const __m512i b = _mm512_mask_set1_epi32(_mm512_permutexvar_epi32(shift, a), 1, above[j]);
      a = step(a, b, c, r[j], x0 + std::size_t(j));
      r[j] = a;
      c = b;
    }
    transpose16(r);
    for (std::size_t k = 0; k < 16; ++k) {
      Out* at = dst + std::ptrdiff_t(k) * (w - 1);
      const __mmask16 m = inside ? __mmask16(0xFFFF) : lanes(std::ptrdiff_t(x0) - std::ptrdiff_t(k));
      if constexpr (sizeof(Out) == 4) {
        _mm512_mask_storeu_epi32(at, m, r[k]);
      } else {
        // Narrowed in a register, then stored: vpmovdw to memory is slow on AMD's Zen 4 (the empty
        // asm keeps GCC from folding the two back into it).
        __m256i narrow = _mm512_cvtepi32_epi16(r[k]);
        asm("" : "+v"(narrow));
        _mm256_mask_storeu_epi16(at, m, narrow);
      }
    }
  }
}

// median_rows8 with strips of 16 rows first (strip16 with `step16`; planes at least 16 wide), then
// of 8, then the rest: from int32 inputs (`in` may be `out`, an int32 plane in place).
template <class Value, class Out, class Med, class Rec, class Step8, class Step16>
[[gnu::target(TEZIP_WAVEFRONT_AVX512_TARGET)]] inline void median_rows16(const std::int32_t* in, Out* out, std::size_t width,
                                                                        std::size_t y_begin, std::size_t y_end, Med med,
                                                                        Rec rec, Step8& step8, Step16& step16) {
  std::size_t y = y_begin;
  if (y == 0 && y_end > 0) median_rows<Value>(in, out, width, 0, 1, med, rec), y = 1;
  if (width >= 16)
    y = whole_strips(in, out, width, y, y_end, 16, [&](std::size_t at) { strip16(in, out, width, at, step16); });
  median_rows8<Value>(in, out, width, y, y_end, med, rec, step8);
}

// The lanes of sixteen whose column i - k lies in 0..width - 1.
[[gnu::target(TEZIP_WAVEFRONT_AVX512_TARGET)]] inline __mmask16 inside16(std::size_t i, std::size_t width) {
  const __m512i column =
      _mm512_sub_epi32(_mm512_set1_epi32(int(i)), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  return _mm512_cmplt_epu32_mask(column, _mm512_set1_epi32(int(width)));
}

// median8 on sixteen lanes.
[[gnu::target(TEZIP_WAVEFRONT_AVX512_TARGET)]] inline __m512i median16(__m512i a, __m512i b, __m512i c) {
  const __m512i lo = _mm512_min_epi32(a, b), hi = _mm512_max_epi32(a, b);
  __m512i m = _mm512_sub_epi32(_mm512_add_epi32(a, b), c);
  m = _mm512_mask_mov_epi32(m, _mm512_cmpgt_epi32_mask(c, hi), lo);
  return _mm512_mask_mov_epi32(m, _mm512_cmpgt_epi32_mask(lo, c), hi);
}

}  // namespace tezip::codecs::wavefront_avx2

#endif
