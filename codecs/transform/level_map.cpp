#include "codecs/transform/level_map.hpp"

#include <algorithm>
#include <stdexcept>

#include "codecs/codec_error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TEZIP_HAVE_AVX512_LOOKUP 1
#endif

namespace tezip::codecs {

#ifdef TEZIP_HAVE_AVX512_LOOKUP
namespace {

// out[i] = table[min(in[i], top)] for a table of 256 entries (top <= 255), 32 values a step: the
// table in eight registers, each value's entry picked by four two-register permutes (index bits
// 0-5) and two blends (bits 6 and 7); the tail through masks.
[[gnu::target("avx512f,avx512bw"), gnu::always_inline]] inline __m512i lookup256_step(const __m512i* t, __m512i v,
                                                                                     __m512i limit) {
  const __m512i i = _mm512_min_epu16(v, limit);
  const __m512i a = _mm512_permutex2var_epi16(t[0], i, t[1]), b = _mm512_permutex2var_epi16(t[2], i, t[3]);
  const __m512i c = _mm512_permutex2var_epi16(t[4], i, t[5]), d = _mm512_permutex2var_epi16(t[6], i, t[7]);
  const __mmask32 bit6 = _mm512_test_epi16_mask(i, _mm512_set1_epi16(64));
  return _mm512_mask_blend_epi16(_mm512_test_epi16_mask(i, _mm512_set1_epi16(128)), _mm512_mask_blend_epi16(bit6, a, b),
                                 _mm512_mask_blend_epi16(bit6, c, d));
}

[[gnu::target("avx512f,avx512bw")]] void lookup256_avx512(const std::uint16_t* table, std::uint16_t top,
                                                         const std::uint16_t* in, std::uint16_t* out, std::size_t n) {
  __m512i t[8];
  for (int k = 0; k < 8; ++k) t[k] = _mm512_loadu_si512(table + 32 * k);
  const __m512i limit = _mm512_set1_epi16(short(top));
  std::size_t x = 0;
  for (; x + 32 <= n; x += 32) _mm512_storeu_si512(out + x, lookup256_step(t, _mm512_loadu_si512(in + x), limit));
  if (x < n) {
    const __mmask32 m = _cvtu32_mask32((1u << (n - x)) - 1);
    _mm512_mask_storeu_epi16(out + x, m, lookup256_step(t, _mm512_maskz_loadu_epi16(m, in + x), limit));
  }
}

}  // namespace
#endif

LevelMap::LevelMap(std::vector<std::uint16_t> levels, std::uint32_t max_value) : levels_(std::move(levels)), rank_(max_value + 1) {
  if (max_value <= 255) {
    padded_ = levels_;
    padded_.resize(256, levels_.back());
  }
  std::size_t i = 0;  // levels_[i] <= v < levels_[i + 1] once v reaches the first level
  for (std::uint32_t v = 0; v <= max_value; ++v) {
    while (i + 1 < levels_.size() && levels_[i + 1] <= v) ++i;
    std::size_t r = i;
    if (v > levels_[i] && i + 1 < levels_.size() && levels_[i + 1] - v < v - levels_[i]) r = i + 1;
    rank_[v] = std::uint16_t(r);
  }
}

std::optional<LevelMap> LevelMap::of(std::span<const std::uint16_t> plane, std::uint32_t max_value) {
  if (plane.empty() || max_value > 0xffff) return std::nullopt;
  std::vector<std::uint8_t> used(std::size_t(max_value) + 1, 0);
  for (const std::uint16_t v : plane) {
    if (v > max_value) throw std::invalid_argument("pixel above the plane's maximum");
    used[v] = 1;
  }
  std::vector<std::uint16_t> levels;
  for (std::uint32_t v = 0; v <= max_value; ++v)
    if (used[v]) levels.push_back(std::uint16_t(v));
  if (std::uint32_t(levels.back() - levels.front()) + 1 == levels.size()) return std::nullopt;
  return LevelMap(std::move(levels), max_value);
}

LevelMap LevelMap::read(std::span<const std::uint32_t> symbols, std::size_t& pos, std::uint32_t max_value) {
  if (max_value > 0xffff) throw CodecError("level map of a plane above 16 bits");
  if (pos >= symbols.size()) throw CodecError("level map missing");
  const std::uint64_t runs = symbols[pos++];
  if (runs > symbols.size() - pos || runs > 2 * (std::uint64_t(max_value) + 1)) throw CodecError("level map runs past its stream");
  std::vector<std::uint16_t> levels;
  std::uint64_t v = 0;
  for (std::uint64_t r = 0; r < runs; ++r) {
    const std::uint64_t n = symbols[pos++];
    if (n > std::uint64_t(max_value) + 1 - v) throw CodecError("level map past the pixel range");
    if (r % 2 == 1)
      for (std::uint64_t k = 0; k < n; ++k) levels.push_back(std::uint16_t(v + k));
    v += n;
  }
  if (v != std::uint64_t(max_value) + 1) throw CodecError("level map short of the pixel range");
  if (levels.empty()) throw CodecError("level map without a level");
  return LevelMap(std::move(levels), max_value);
}

void LevelMap::append_symbols(std::vector<std::uint32_t>& out) const {
  const std::size_t at = out.size();
  out.push_back(0);
  std::uint32_t runs = 0, next = 0;  // the first value after the runs so far
  for (std::size_t i = 0; i < levels_.size();) {
    std::size_t j = i + 1;
    while (j < levels_.size() && levels_[j] == levels_[j - 1] + 1) ++j;
    out.push_back(levels_[i] - next);  // unused, then used
    out.push_back(std::uint32_t(j - i));
    runs += 2;
    next = levels_[j - 1] + 1u;
    i = j;
  }
  if (next < rank_.size()) out.push_back(std::uint32_t(rank_.size()) - next), ++runs;
  out[at] = runs;
}

void LevelMap::to_indices(std::span<const std::uint16_t> plane, std::span<std::uint16_t> out) const {
  if (out.size() != plane.size()) throw std::invalid_argument("level map: output of another size");
  for (std::size_t i = 0; i < plane.size(); ++i) out[i] = rank_[plane[i]];
}

void LevelMap::to_ranks(std::span<const std::uint16_t> forecast, std::span<std::uint16_t> out, SimdPath path) const {
  if (out.size() != forecast.size()) throw std::invalid_argument("level map: output of another size");
  const std::size_t top = rank_.size() - 1;
#ifdef TEZIP_HAVE_AVX512_LOOKUP
  if (path == SimdPath::avx512 && rank_.size() == 256)
    return lookup256_avx512(rank_.data(), std::uint16_t(top), forecast.data(), out.data(), out.size());
#else
  (void)path;
#endif
  for (std::size_t i = 0; i < forecast.size(); ++i) out[i] = rank_[std::min<std::size_t>(forecast[i], top)];
}

void LevelMap::to_levels(std::span<std::uint16_t> values, SimdPath path) const {
  const std::uint16_t last = std::uint16_t(levels_.size() - 1);
#ifdef TEZIP_HAVE_AVX512_LOOKUP
  if (path == SimdPath::avx512 && !padded_.empty())
    return lookup256_avx512(padded_.data(), last, values.data(), values.data(), values.size());
#else
  (void)path;
#endif
  for (auto& v : values) v = levels_[std::min(v, last)];
}

}  // namespace tezip::codecs
