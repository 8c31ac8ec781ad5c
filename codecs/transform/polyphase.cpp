#include "codecs/transform/polyphase.hpp"

#include <stdexcept>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TEZIP_HAVE_AVX2_POLYPHASE 1
#endif

namespace tezip::codecs {
namespace {

struct Layout {
  std::size_t height, even_rows, even_cols;
};

Layout layout_of(std::size_t size, std::size_t width, std::size_t out_size, const char* who) {
  if (width == 0 || size % width != 0 || out_size != size) throw std::invalid_argument(std::string(who) + ": not whole rows");
  const std::size_t height = size / width;
  return {height, (height + 1) / 2, (width + 1) / 2};
}

// Row y's place in the polyphase layout.
std::size_t stored_row(const Layout& l, std::size_t y) { return y % 2 ? l.even_rows + y / 2 : y / 2; }

// One row: out[2x] = evens[x], out[2x + 1] = odds[x], from x = `from` on (the odds may be one fewer).
void interleave_from(const std::int32_t* evens, const std::int32_t* odds, std::size_t even_count, std::size_t odd_count,
                     std::int32_t* out, std::size_t from) {
  for (std::size_t x = from; x < odd_count; ++x) out[2 * x] = evens[x], out[2 * x + 1] = odds[x];
  if (even_count > odd_count) out[2 * odd_count] = evens[odd_count];
}

#ifdef TEZIP_HAVE_AVX2_POLYPHASE
[[gnu::target("avx2")]] void interleave_avx2(const std::int32_t* evens, const std::int32_t* odds, std::size_t even_count,
                                             std::size_t odd_count, std::int32_t* out) {
  std::size_t x = 0;
  for (; x + 8 <= odd_count; x += 8) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(evens + x));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(odds + x));
    const __m256i lo = _mm256_unpacklo_epi32(a, b), hi = _mm256_unpackhi_epi32(a, b);  // a0 b0 a1 b1 | a4 b4 a5 b5, ...
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * x), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * x + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
  interleave_from(evens, odds, even_count, odd_count, out, x);
}
#endif

template <class T>
void to_polyphase_of(std::span<const T> in, std::size_t width, std::span<T> out) {
  const Layout l = layout_of(in.size(), width, out.size(), "to_polyphase");
  for (std::size_t y = 0; y < l.height; ++y) {
    const T* row = in.data() + y * width;
    T* to = out.data() + stored_row(l, y) * width;
    for (std::size_t x = 0; x < l.even_cols; ++x) to[x] = row[2 * x];
    for (std::size_t x = 0; x < width / 2; ++x) to[l.even_cols + x] = row[2 * x + 1];
  }
}

}  // namespace

void to_polyphase(std::span<const std::int32_t> in, std::size_t width, std::span<std::int32_t> out) {
  to_polyphase_of(in, width, out);
}

void to_polyphase(std::span<const std::uint8_t> in, std::size_t width, std::span<std::uint8_t> out) {
  to_polyphase_of(in, width, out);
}

void from_polyphase(std::span<const std::int32_t> in, std::size_t width, std::span<std::int32_t> out, SimdPath path) {
  const Layout l = layout_of(in.size(), width, out.size(), "from_polyphase");
  if (!simd_supported(path)) throw std::invalid_argument("from_polyphase: this CPU cannot run the kernel path");
  for (std::size_t y = 0; y < l.height; ++y) {
    const std::int32_t* from = in.data() + stored_row(l, y) * width;
    std::int32_t* row = out.data() + y * width;
#ifdef TEZIP_HAVE_AVX2_POLYPHASE
    if (path >= SimdPath::avx2) {
      interleave_avx2(from, from + l.even_cols, l.even_cols, width / 2, row);
      continue;
    }
#endif
    interleave_from(from, from + l.even_cols, l.even_cols, width / 2, row, 0);
  }
}

}  // namespace tezip::codecs
