#pragma once
// Rank -> symbol maps whose first 16 entries sit in two AVX2 registers. Ranks are numbered by
// frequency, so most are small, and two permutations and a blend cost far less than a gather (on
// AMD Zen the gathers dominate the kernels that use them); callers gather only the lanes whose rank
// is 16 or more. Used by the striped rANS decoder's AVX2 kernel and the zstd rank parser
// (symbol_coder.cpp). Only for x86 translation units that check the CPU (simd.hpp) first.
#if defined(__x86_64__) || defined(__i386__)
#pragma GCC diagnostic push  // GCC bug 105593, as in striped_rans.cpp
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cstdint>

namespace tezip::codecs {

struct RankMap16 {
  __m256i low, high;  // entries 0..7 and 8..15; zeros past the table
};

// The first min(16, size) entries of `table`.
[[gnu::target("avx2")]] inline RankMap16 load_rank_map16(const int* table, std::uint32_t size) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int low = int(std::min<std::uint32_t>(8, size)), high = int(std::min<std::uint32_t>(16, size)) - low;
  return {_mm256_maskload_epi32(table, _mm256_cmpgt_epi32(_mm256_set1_epi32(low), lane)),
          _mm256_maskload_epi32(table + 8, _mm256_cmpgt_epi32(_mm256_set1_epi32(high), lane))};
}

// Entry v & 15 of each lane (the caller replaces the lanes whose rank is 16 or more).
[[gnu::target("avx2")]] inline __m256i look_up16(const RankMap16& map, __m256i v) {
  const __m256 low = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(map.low, v));
  const __m256 high = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(map.high, v));
  return _mm256_castps_si256(_mm256_blendv_ps(low, high, _mm256_castsi256_ps(_mm256_slli_epi32(v, 28))));  // bit 3
}

}  // namespace tezip::codecs
#endif
