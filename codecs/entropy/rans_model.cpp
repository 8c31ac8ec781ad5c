#include "codecs/entropy/rans_model.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TEZIP_HAVE_AVX2_TOKENS 1
#endif

#include <algorithm>
#include <stdexcept>
#include <string>

#include "codecs/codec_error.hpp"
#include "codecs/entropy/rank_remap.hpp"

// Layout written by write_model:
//   u8      token scheme: split exponent (low nibble) | mantissa bits kept in the token << 4
//   u8      context count C, 1..kMaxContexts
//   C - 1   varints: the activity thresholds that start contexts 1..C-1, as increasing deltas
//   C times varint n, then n varint frequencies of tokens 0..n-1 (n == 0: context unused), summing
//           to kProbScale, the last one nonzero

namespace tezip::codecs::rans {

std::uint32_t TokenScheme::token_count(std::uint64_t alphabet_size) const {
  const std::uint64_t max_rank = std::min<std::uint64_t>(alphabet_size, std::uint64_t{1} << 32) - 1;
  return token_of(static_cast<std::uint32_t>(max_rank)) + 1;
}

void TokenScheme::describe(std::uint32_t token, std::uint32_t& base, std::uint8_t& extra_bits) const {
  if (token < (std::uint32_t{1} << split_exp)) {
    base = token;
    extra_bits = 0;
    return;
  }
  const std::uint32_t u = token - (std::uint32_t{1} << split_exp);
  const int n = split_exp + static_cast<int>(u >> msb_bits);
  const std::uint32_t msb = u & ((std::uint32_t{1} << msb_bits) - 1);
  extra_bits = static_cast<std::uint8_t>(n - msb_bits);
  base = ((std::uint32_t{1} << msb_bits) | msb) << extra_bits;
}

#ifdef TEZIP_HAVE_AVX2_TOKENS
namespace {

// The default scheme's tokens of ranks[0, n) in steps of 32, into `out`; returns how many were
// written and raises `largest` to the largest rank seen. A rank r >= 16 below 2^24 is exactly a
// float whose bits >> 21 are (127 + e) * 4 + m, e = bit_width(r) - 1 and m its two bits below the
// top one: the token 16 + (e - 4) * 4 + m is those bits less 508. Larger ranks give wrong tokens,
// but only with an alphabet past 2^24, which the caller sends to the portable loop (or with a rank
// outside the alphabet, which it refuses after).
[[gnu::target("avx2")]] std::size_t tokens_avx2(const std::uint32_t* ranks, std::size_t n, std::uint8_t* out,
                                                std::uint32_t& largest) {
  const __m256i sixteen = _mm256_set1_epi32(16), bias = _mm256_set1_epi32(508);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // the packs' dwords back in order
  __m256i most = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i t[4];
    for (int k = 0; k < 4; ++k) {
      const __m256i r = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ranks + i + 8 * k));
      most = _mm256_max_epu32(most, r);
      const __m256i wide = _mm256_sub_epi32(_mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(r)), 21), bias);
      t[k] = _mm256_blendv_epi8(wide, r, _mm256_cmpgt_epi32(sixteen, r));
    }
    const __m256i bytes = _mm256_packus_epi16(_mm256_packus_epi32(t[0], t[1]), _mm256_packus_epi32(t[2], t[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permutevar8x32_epi32(bytes, order));
  }
  alignas(32) std::uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), most);
  for (const std::uint32_t v : lanes) largest = std::max(largest, v);
  return i;
}

}  // namespace
#endif

Tokens tokens_of(std::span<const std::uint32_t> ranks, std::uint64_t alphabet_size, const char* who, SimdPath path) {
  const TokenScheme scheme;
  Tokens tokens(ranks.size());
  std::uint32_t largest = 0;
  std::size_t i = 0;
#ifdef TEZIP_HAVE_AVX2_TOKENS
  if (path >= SimdPath::avx2 && alphabet_size <= (std::uint64_t{1} << 24) && scheme.split_exp == 4 && scheme.msb_bits == 2)
    i = tokens_avx2(ranks.data(), ranks.size(), tokens.data(), largest);
#else
  (void)path;
#endif
  for (; i < ranks.size(); ++i) {
    largest = std::max(largest, ranks[i]);
    tokens[i] = static_cast<std::uint8_t>(scheme.token_of(ranks[i]));
  }
  if (!ranks.empty() && largest >= alphabet_size) throw std::invalid_argument(std::string(who) + ": rank outside the alphabet");
  return tokens;
}

ClassTable class_table(std::span<const std::uint32_t> thresholds) {
  ClassTable table{};
  std::size_t c = 0;
  for (std::uint32_t s = 0; s < kActivityRange; ++s) {
    while (c < thresholds.size() && thresholds[c] <= s) ++c;
    table[s] = static_cast<std::uint8_t>(c);
  }
  return table;
}

// Starts from rounding, then moves single units where they cost least (first-order code length
// change, count / frequency, compared as integer cross products).
void normalize(std::span<const std::uint64_t> counts, std::span<std::uint32_t> freq) {
  std::uint64_t total = 0;
  for (std::uint64_t c : counts) total += c;
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    freq[i] = 0;
    if (counts[i] == 0) continue;
    freq[i] = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, (counts[i] * kProbScale + total / 2) / total));
    sum += freq[i];
  }
  if (total == 0) return;
  while (sum < kProbScale) {
    std::size_t best = counts.size();
    for (std::size_t i = 0; i < counts.size(); ++i) {
      if (counts[i] == 0) continue;
      if (best == counts.size() || counts[i] * (2 * freq[best] + 1) > counts[best] * (2 * freq[i] + 1)) best = i;
    }
    ++freq[best];
    ++sum;
  }
  while (sum > kProbScale) {
    std::size_t best = counts.size();
    for (std::size_t i = 0; i < counts.size(); ++i) {
      if (freq[i] <= 1) continue;
      if (best == counts.size() || counts[i] * (2 * freq[best] - 1) < counts[best] * (2 * freq[i] - 1)) best = i;
    }
    --freq[best];
    --sum;
  }
}

ContextModel build_model(std::span<const std::uint64_t> counts, std::uint32_t token_count,
                         std::span<const std::uint32_t, 15> thresholds) {
  ContextModel m;
  m.token_count = token_count;
  m.contexts = thresholds.size() + 1;
  std::copy(thresholds.begin(), thresholds.end(), m.thresholds.begin());
  m.freq.assign(m.contexts * kMaxTokens, 0);
  m.cumul.assign(m.contexts * kMaxTokens, 0);
  for (std::size_t c = 0; c < m.contexts; ++c) {
    normalize(counts.subspan(c * kMaxTokens, token_count), std::span(m.freq).subspan(c * kMaxTokens, token_count));
    std::uint32_t running = 0;
    for (std::uint32_t k = 0; k < token_count; ++k) {
      m.cumul[c * kMaxTokens + k] = running;
      running += m.freq[c * kMaxTokens + k];
    }
  }
  m.reciprocals.assign(m.freq.size(), 0);
  for (std::size_t k = 0; k < m.freq.size(); ++k)
    if (m.freq[k] > 0) m.reciprocals[k] = reciprocal(m.freq[k]);
  return m;
}

void write_model(const ContextModel& m, std::vector<std::uint8_t>& out) {
  out.push_back(m.scheme.byte());
  out.push_back(static_cast<std::uint8_t>(m.contexts));
  for (std::size_t c = 0; c + 1 < m.contexts; ++c) append_varint(m.thresholds[c] - (c == 0 ? 0 : m.thresholds[c - 1]), out);
  for (std::size_t c = 0; c < m.contexts; ++c) {
    const std::uint32_t* f = m.freq.data() + c * kMaxTokens;
    std::size_t used = m.token_count;
    while (used > 0 && f[used - 1] == 0) --used;
    append_varint(used, out);
    for (std::size_t k = 0; k < used; ++k) append_varint(f[k], out);
  }
}

ContextModel read_model(std::span<const std::uint8_t> bytes, std::size_t& pos, std::uint64_t alphabet_size) {
  if (bytes.size() < pos + 2) throw CodecError("rans coder: truncated header");
  ContextModel m;
  m.scheme = TokenScheme::from_byte(bytes[pos]);
  if (!m.scheme.valid()) throw CodecError("rans coder: bad token scheme");
  m.token_count = m.scheme.token_count(std::max<std::uint64_t>(alphabet_size, 1));
  if (m.token_count > kMaxTokens) throw CodecError("rans coder: token scheme too fine for the alphabet");
  m.contexts = bytes[pos + 1];
  if (m.contexts < 1 || m.contexts > kMaxContexts) throw CodecError("rans coder: bad context count");
  pos += 2;
  std::uint64_t level = 0;
  for (std::size_t c = 0; c + 1 < m.contexts; ++c) {
    const std::uint64_t delta = read_varint(bytes, pos);
    if (delta == 0 || delta >= kActivityRange - level) throw CodecError("rans coder: bad context thresholds");
    level += delta;
    m.thresholds[c] = static_cast<std::uint32_t>(level);
  }
  m.freq.assign(m.contexts * kMaxTokens, 0);
  m.cumul.assign(m.contexts * kMaxTokens, 0);
  for (std::size_t c = 0; c < m.contexts; ++c) {
    const std::uint64_t used = read_varint(bytes, pos);
    if (used > m.token_count) throw CodecError("rans coder: frequency table longer than the token range");
    std::uint32_t running = 0;
    for (std::uint32_t k = 0; k < used; ++k) {
      const std::uint64_t f = read_varint(bytes, pos);
      if (f > kProbScale - running || (k + 1 == used && f == 0)) throw CodecError("rans coder: bad frequency table");
      m.freq[c * kMaxTokens + k] = static_cast<std::uint32_t>(f);
      m.cumul[c * kMaxTokens + k] = running;
      running += static_cast<std::uint32_t>(f);
    }
    if (used > 0 && running != kProbScale) throw CodecError("rans coder: frequencies do not sum to the scale");
  }
  return m;
}

void BitReader::refill() {
  if (end_ - p_ >= 8) {
    std::uint64_t word = 0;
    for (int k = 7; k >= 0; --k) word = (word << 8) | p_[k];
    buf_ |= word << count_;
    p_ += (63 - count_) >> 3;
    count_ |= 56;
    return;
  }
  while (count_ <= 56) {
    std::uint64_t b = 0;
    if (p_ < end_) {
      b = *p_++;
    } else {
      padded_ += 8;
    }
    buf_ |= b << count_;
    count_ += 8;
  }
}

}  // namespace tezip::codecs::rans
