#include "codecs/transform/colour_transform.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tezip::codecs {

namespace {

void check(std::size_t in, std::size_t out, std::size_t plane_size) {
  if (in != 3 * plane_size || out != in) throw std::invalid_argument("colour transform: frame sizes differ");
}

#if defined(__x86_64__) || defined(__i386__)
// inverse_rct's loop on 16 pixels a vector, in 16-bit lanes: with the decoded planes within
// [0, 2M] (the inner chunk's range; Clamp: Y first clamped to [0, M]) and M <= 8191, U - M and
// V - M lie in [-M, M], their sum in [-2M, 2M], G in [-M/2, 5M/2], B and R in [-3M/2, 7M/2]: all
// within int16. A value outside [0, M], compared unsigned (negatives wrap above M), marks the frame
// damaged, or (Clamp) is clamped to it. Green: the first plane is G itself (subtract green,
// always clamped). Returns where the vectors stopped.
template <bool Clamp, bool Green>
[[gnu::target("avx2")]] std::size_t inverse_rct_avx2(const std::uint16_t* y, const std::uint16_t* u, const std::uint16_t* v,
                                                    std::uint16_t* b, std::uint16_t* g, std::uint16_t* r, std::size_t i,
                                                    std::size_t end, std::uint32_t max_value, std::uint32_t& outside) {
  const __m256i m = _mm256_set1_epi16(short(max_value)), zero = _mm256_setzero_si256();
  __m256i bad = _mm256_setzero_si256();
  for (; i + 16 <= end; i += 16) {
    const __m256i ui = _mm256_sub_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u + i)), m);
    const __m256i vi = _mm256_sub_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i)), m);
    __m256i yi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + i));
    if constexpr (Clamp) yi = _mm256_min_epu16(yi, m);
    __m256i gi = Green ? yi : _mm256_sub_epi16(yi, _mm256_srai_epi16(_mm256_add_epi16(ui, vi), 2));
    __m256i bi = _mm256_add_epi16(ui, gi), ri = _mm256_add_epi16(vi, gi);
    if constexpr (Clamp) {
      if constexpr (!Green) gi = _mm256_min_epi16(_mm256_max_epi16(gi, zero), m);
      bi = _mm256_min_epi16(_mm256_max_epi16(bi, zero), m);
      ri = _mm256_min_epi16(_mm256_max_epi16(ri, zero), m);
    } else {
      const __m256i top = _mm256_max_epu16(_mm256_max_epu16(gi, bi), _mm256_max_epu16(ri, m));
      bad = _mm256_or_si256(bad, _mm256_xor_si256(top, m));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b + i), bi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(g + i), gi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(r + i), ri);
  }
  outside |= std::uint32_t(!_mm256_testz_si256(bad, bad));
  return i;
}
#endif

// The three planes of a planar frame.
template <class T>
std::array<T*, 3> planes_of(T* frame, std::size_t plane_size) {
  return {frame, frame + plane_size, frame + 2 * plane_size};
}

// forward_rct's work; Green: forward_subtract_green's (G in Y's place).
template <bool Green>
void forward(std::span<const std::uint16_t> bgr, std::size_t plane_size, std::uint32_t max_value, std::span<std::uint16_t> out) {
  check(bgr.size(), out.size(), plane_size);
  if (!rct_fits(max_value)) throw std::invalid_argument("colour transform: pixels too wide");
  const auto [b, g, r] = planes_of(bgr.data(), plane_size);
  const auto [y, u, v] = planes_of(out.data(), plane_size);
  const std::int32_t m = std::int32_t(max_value);
  for (std::size_t i = 0; i < plane_size; ++i) {
    const std::int32_t bi = b[i], gi = g[i], ri = r[i];
    y[i] = std::uint16_t(Green ? gi : (ri + 2 * gi + bi) >> 2);
    u[i] = std::uint16_t(bi - gi + m);
    v[i] = std::uint16_t(ri - gi + m);
  }
}

}  // namespace

void forward_rct(std::span<const std::uint16_t> bgr, std::size_t plane_size, std::uint32_t max_value,
                 std::span<std::uint16_t> out) {
  forward<false>(bgr, plane_size, max_value, out);
}

void forward_subtract_green(std::span<const std::uint16_t> bgr, std::size_t plane_size, std::uint32_t max_value,
                            std::span<std::uint16_t> out) {
  forward<true>(bgr, plane_size, max_value, out);
}

namespace {

// inverse_rct's work, returning whether every pixel lay in [0, M]; Clamp: inverse_rct_clamped's
// (each pixel clamped, the result true); Green (with Clamp): inverse_subtract_green_clamped's.
template <bool Clamp, bool Green = false>
bool inverse_rct_band(std::span<const std::uint16_t> yuv, std::size_t plane_size, std::uint32_t max_value,
                      std::span<std::uint16_t> out, std::size_t first, std::size_t count, SimdPath path) {
  check(yuv.size(), out.size(), plane_size);
  if (first > plane_size) throw std::invalid_argument("colour transform: rows past the plane");
  const std::size_t end = first + std::min(count, plane_size - first);
  const auto [y, u, v] = planes_of(yuv.data(), plane_size);
  const auto [b, g, r] = planes_of(out.data(), plane_size);
  const std::int32_t m = std::int32_t(max_value);
  std::uint32_t outside = 0;  // any pixel past the range, compared unsigned (below 0 wraps above)
  if (!simd_supported(path)) throw std::invalid_argument("colour transform: this CPU cannot run the kernel path");
  std::size_t i = first;
#if defined(__x86_64__) || defined(__i386__)
  if (path >= SimdPath::avx2 && max_value <= 8191) i = inverse_rct_avx2<Clamp, Green>(y, u, v, b, g, r, i, end, max_value, outside);
#endif
  const auto clamp = [m](std::int32_t x) { return std::clamp(x, 0, m); };
  for (; i < end; ++i) {
    const std::int32_t ui = std::int32_t(u[i]) - m, vi = std::int32_t(v[i]) - m;
    const std::int32_t yi = Clamp ? std::min(std::int32_t(y[i]), m) : std::int32_t(y[i]);
    std::int32_t gi = Green ? yi : yi - ((ui + vi) >> 2);  // arithmetic shift: floor
    std::int32_t bi = ui + gi, ri = vi + gi;
    if constexpr (Clamp) {
      gi = clamp(gi), bi = clamp(bi), ri = clamp(ri);
    } else {
      outside |= std::uint32_t(std::uint32_t(gi) > std::uint32_t(m)) | std::uint32_t(std::uint32_t(bi) > std::uint32_t(m)) |
                 std::uint32_t(std::uint32_t(ri) > std::uint32_t(m));
    }
    b[i] = std::uint16_t(bi);
    g[i] = std::uint16_t(gi);
    r[i] = std::uint16_t(ri);
  }
  return outside == 0;
}

}  // namespace

bool inverse_rct(std::span<const std::uint16_t> yuv, std::size_t plane_size, std::uint32_t max_value,
                 std::span<std::uint16_t> out, std::size_t first, std::size_t count, SimdPath path) {
  return inverse_rct_band<false>(yuv, plane_size, max_value, out, first, count, path);
}

void inverse_rct_clamped(std::span<const std::uint16_t> yuv, std::size_t plane_size, std::uint32_t max_value,
                         std::span<std::uint16_t> out, std::size_t first, std::size_t count, SimdPath path) {
  inverse_rct_band<true>(yuv, plane_size, max_value, out, first, count, path);
}

void inverse_subtract_green_clamped(std::span<const std::uint16_t> guv, std::size_t plane_size, std::uint32_t max_value,
                                    std::span<std::uint16_t> out, std::size_t first, std::size_t count, SimdPath path) {
  inverse_rct_band<true, true>(guv, plane_size, max_value, out, first, count, path);
}

}  // namespace tezip::codecs
