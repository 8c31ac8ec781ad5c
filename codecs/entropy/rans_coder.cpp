#include "codecs/entropy/rans_coder.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <memory>
#include <stdexcept>
#include <utility>

#include "codecs/codec_error.hpp"
#include "codecs/entropy/rank_remap.hpp"
#include "codecs/entropy/rans_model.hpp"

// Layout of an encode_rans output:
//   model   the context model (rans_model.cpp: token scheme, thresholds, frequency tables)
//   varint  size of the rANS stream, then the stream: two 32-bit final states (little-endian), then
//           16-bit words in the order the decoder reads them
//   rest    the extra bits, LSB first, zero padded to a byte, in decoding order
// Words and extra bits follow the decoding order of the two lanes (see Layout below).

namespace tezip::codecs {
namespace {

using namespace rans;

constexpr std::size_t k1DSegment = 4096;

std::uint32_t activity_2d(const std::uint8_t* t, std::size_t i, std::size_t x, std::size_t y, std::size_t width) {
  const std::uint32_t left = x > 0 ? t[i - 1] : 0;
  std::uint32_t above = 0;
  if (y > 0) {
    const std::uint8_t* up = t + i - width;
    above = 2u * up[0] + (x > 0 ? up[-1] : 0) + (x + 1 < width ? up[1] : 0);
  }
  return above + 2 * left;
}

std::uint32_t activity_1d(const std::uint8_t* t, std::size_t i) {
  const std::uint32_t t1 = i > 0 ? t[i - 1] : 0, t2 = i > 1 ? t[i - 2] : 0, t3 = i > 2 ? t[i - 3] : 0;
  return 3 * t1 + 2 * t2 + t3;
}

// Decoding tables: slot -> token per context, and per (context, token) the frequency (high 16 bits)
// and the cumulative frequency (low 16 bits). The slot tables are bytes so that the contexts in use
// stay in the L1 cache: their load is on the critical path from one symbol to the next. Fixed-size
// arrays in one block, so the hot loop reaches all of them from one base register.
struct DecodeTables {
  std::array<std::uint8_t, kMaxContexts * kProbScale> tokens;         // [context][slot]
  std::array<std::uint32_t, kMaxContexts * kMaxTokens> freq_cumul;    // [context][token]
  std::array<std::uint8_t, kActivityRange> context_of;                // activity -> context
  std::array<std::uint32_t, kMaxTokens> base;
  std::array<std::uint8_t, kMaxTokens> extra_bits;
};

struct RansReader {
  std::uint32_t x0 = 0, x1 = 0;
  const std::uint8_t* p = nullptr;
  const std::uint8_t* end = nullptr;
  bool overrun = false;
};

// Decodes one symbol of `context` with state x. Unchecked: the caller made sure two bytes per symbol
// remain, so the (branch-free) word load is always in bounds.
template <bool kChecked>
[[gnu::always_inline]] inline std::uint32_t decode_one(const DecodeTables& t, std::uint32_t context, std::uint32_t& x, RansReader& r) {
  const std::uint32_t slot = x & kSlotMask;
  const std::uint32_t token = t.tokens[(context << kProbBits) + slot];
  const std::uint32_t fc = t.freq_cumul[context * kMaxTokens + token];
  x = (fc >> 16) * (x >> kProbBits) + slot - (fc & 0xFFFF);
  if constexpr (kChecked) {
    if (x < kStateLow) {
      std::uint32_t w = 0;
      if (r.end - r.p >= 2) {
        w = r.p[0] | (std::uint32_t{r.p[1]} << 8);
        r.p += 2;
      } else {
        r.overrun = true;
      }
      x = (x << 16) | w;
    }
  } else {
    const std::uint32_t w = r.p[0] | (std::uint32_t{r.p[1]} << 8);
    const std::uint32_t mask = 0u - static_cast<std::uint32_t>(x < kStateLow);
    x = (x << (16 & mask)) | (w & mask);
    r.p += 2 & mask;
  }
  return token;
}

// Symbols are split into two lanes of whole rows, rows [0, split_row) and [split_row, rows), whose
// first rows have no upper neighbours. Lane 0 uses state 0 and lane 1 state 1, and the decoder
// alternates between them, so the two lanes' dependency chains (token -> context -> table -> token)
// overlap. A 1-D stream is two rows: its two halves.
struct Layout {
  std::size_t n = 0;
  std::size_t width = 1;
  std::size_t rows = 0;
  std::size_t split_row = 0;
  bool one_d = false;

  Layout(std::size_t count, std::size_t row_width) : n(count), one_d(row_width == 0) {
    if (n == 0) return;
    width = one_d ? (n + 1) / 2 : std::min(row_width, n);
    rows = (n + width - 1) / width;
    split_row = one_d ? 1 : (rows + 1) / 2;
  }
  // Row pair r: row r of lane 0 (always full unless it is the only row) and row split_row + r of
  // lane 1, which is never longer.
  std::size_t start0(std::size_t r) const { return r * width; }
  std::size_t len0(std::size_t r) const { return std::min(width, n - r * width); }
  std::size_t start1(std::size_t r) const { return (split_row + r) * width; }
  std::size_t len1(std::size_t r) const {
    return split_row + r < rows ? std::min(width, n - (split_row + r) * width) : 0;
  }
};

// Calls fn(index, lane) in decoding order: within a row pair, both lanes alternate while lane 1
// lasts, then lane 0 alone.
template <class Fn>
void for_each_in_decoding_order(const Layout& layout, Fn&& fn) {
  for (std::size_t r = 0; r < layout.split_row; ++r) {
    const std::size_t a = layout.start0(r), b = layout.start1(r), len0 = layout.len0(r), len1 = layout.len1(r);
    for (std::size_t x = 0; x < len1; ++x) {
      fn(a + x, 0);
      fn(b + x, 1);
    }
    for (std::size_t x = len1; x < len0; ++x) fn(a + x, 0);
  }
}

template <class Fn>
void for_each_in_reverse_decoding_order(const Layout& layout, Fn&& fn) {
  for (std::size_t r = layout.split_row; r-- > 0;) {
    const std::size_t a = layout.start0(r), b = layout.start1(r), len0 = layout.len0(r), len1 = layout.len1(r);
    for (std::size_t x = len0; x-- > len1;) fn(a + x, 0);
    for (std::size_t x = len1; x-- > 0;) {
      fn(b + x, 1);
      fn(a + x, 0);
    }
  }
}

// Per-lane context state of the decoder.
struct Lane2D {
  const std::uint16_t* above;  // per column, up-left + 2 up + up-right tokens of the row above
  std::uint8_t* tokens;        // this row's tokens, from which the next row's `above` is made
  std::uint32_t* out;
  std::uint32_t left = 0;

  Lane2D(const std::uint16_t* above_row, std::uint8_t* token_row, std::uint32_t* out_row)
      : above(above_row), tokens(token_row), out(out_row) {}
};

// The upper-row part of the activity for each column of the next row: computed once per row, in a
// loop the compiler vectorizes, instead of per symbol in the decoding loop.
void above_activity(const std::uint8_t* tokens, std::size_t width, std::uint16_t* above) {
  for (std::size_t x = 0; x < width; ++x)
    above[x] = static_cast<std::uint16_t>(tokens[std::ptrdiff_t(x) - 1] + 2 * tokens[x] + tokens[x + 1]);
}

struct Lane1D {
  std::uint32_t* out;
  std::uint32_t t1 = 0, t2 = 0, t3 = 0;
};

template <bool kChecked>
[[gnu::always_inline]] inline void step(const DecodeTables& t, Lane2D& lane, std::size_t x, std::uint32_t& state, RansReader& r,
                 BitReader& bits) {
  const std::uint32_t activity = lane.above[x] + 2 * lane.left;
  const std::uint32_t token = decode_one<kChecked>(t, t.context_of[activity], state, r);
  lane.out[x] = t.base[token] + bits.read(t.extra_bits[token]);
  lane.tokens[x] = static_cast<std::uint8_t>(token);
  lane.left = token;
}

template <bool kChecked>
[[gnu::always_inline]] inline void step(const DecodeTables& t, Lane1D& lane, std::size_t x, std::uint32_t& state, RansReader& r,
                 BitReader& bits) {
  const std::uint32_t token = decode_one<kChecked>(t, t.context_of[3 * lane.t1 + 2 * lane.t2 + lane.t3], state, r);
  lane.out[x] = t.base[token] + bits.read(t.extra_bits[token]);
  lane.t3 = lane.t2;
  lane.t2 = lane.t1;
  lane.t1 = token;
}

// Positions [begin, end) of a row pair whose lane 1 has `len1` symbols. Works on local copies of all
// state: the token stores are bytes, which may alias anything, and would otherwise force reloads.
template <bool kChecked, class Lane>
void decode_span(const DecodeTables& tables, Lane& lane0_io, Lane& lane1_io, std::size_t begin, std::size_t end,
                 std::size_t len1, RansReader& r_io, BitReader& bits_io) {
  const DecodeTables& t = tables;
  Lane lane0 = lane0_io, lane1 = lane1_io;
  RansReader r = r_io;
  BitReader bits = bits_io;
  std::uint32_t x0 = r.x0, x1 = r.x1;
  const std::size_t both_end = std::clamp(len1, begin, end);
  for (std::size_t x = begin; x < both_end; ++x) {
    step<kChecked>(t, lane0, x, x0, r, bits);
    step<kChecked>(t, lane1, x, x1, r, bits);
  }
  for (std::size_t x = both_end; x < end; ++x) step<kChecked>(t, lane0, x, x0, r, bits);
  r.x0 = x0;
  r.x1 = x1;
  lane0_io = lane0;
  lane1_io = lane1;
  r_io = r;
  bits_io = bits;
}

template <class Lane>
void decode_span_checked_if_needed(const DecodeTables& t, Lane& lane0, Lane& lane1, std::size_t begin,
                                   std::size_t end, std::size_t len1, RansReader& r, BitReader& bits) {
  // Every symbol reads at most one 16-bit word.
  const std::size_t symbols = (end - begin) + (std::clamp(len1, begin, end) - begin);
  if (static_cast<std::size_t>(r.end - r.p) / 2 >= symbols) {
    decode_span<false>(t, lane0, lane1, begin, end, len1, r, bits);
  } else {
    decode_span<true>(t, lane0, lane1, begin, end, len1, r, bits);
  }
}

// Checks freshly decoded ranks (still in L1) against the alphabet and maps them to symbols when a
// table is given. Out-of-range ranks are clamped for the lookup and reported through `bad`.
void finish_ranks(std::uint32_t* p, std::size_t len, std::uint32_t max_rank, const std::uint32_t* symbols,
                  std::uint32_t& bad) {
  std::uint32_t over = 0;
  if (symbols != nullptr) {
    for (std::size_t i = 0; i < len; ++i) {
      const std::uint32_t v = p[i];
      over |= static_cast<std::uint32_t>(v > max_rank);
      p[i] = symbols[std::min(v, max_rank)];
    }
  } else {
    for (std::size_t i = 0; i < len; ++i) over |= static_cast<std::uint32_t>(p[i] > max_rank);
  }
  bad |= over;
}

}  // namespace

std::vector<std::uint8_t> encode_rans(std::span<const std::uint32_t> ranks, std::size_t row_width,
                                      std::uint64_t alphabet_size) {
  const TokenScheme scheme;
  const std::size_t n = ranks.size();
  const Layout layout(n, row_width);
  const std::uint32_t token_count = scheme.token_count(std::max<std::uint64_t>(alphabet_size, 1));

  const Tokens tokens = tokens_of(ranks, alphabet_size, "encode_rans");

  const ClassTable classes = class_table(kDefaultThresholds);
  const std::size_t context_count = kDefaultThresholds.size() + 1;
  std::vector<std::uint8_t> contexts(n);
  const std::uint8_t* t = tokens.data();
  for (std::size_t i = 0, x = 0, y = 0; i < n; ++i) {
    const bool lane1 = y >= layout.split_row;
    if (layout.one_d) {
      const std::size_t start = lane1 ? layout.width : 0;
      contexts[i] = classes[activity_1d(t + start, i - start)];
    } else {
      contexts[i] = classes[activity_2d(t, i, x, lane1 ? y - layout.split_row : y, layout.width)];
    }
    if (++x == layout.width) {
      x = 0;
      ++y;
    }
  }

  std::vector<std::uint64_t> counts(context_count * kMaxTokens, 0);
  for (std::size_t i = 0; i < n; ++i) ++counts[contexts[i] * kMaxTokens + tokens[i]];
  const ContextModel model = build_model(counts, token_count);
  std::vector<std::uint8_t> out;
  write_model(model, out);

  BitWriter extras;
  for_each_in_decoding_order(layout, [&](std::size_t i, int) {
    std::uint32_t base = 0;
    std::uint8_t nbits = 0;
    scheme.describe(tokens[i], base, nbits);
    if (nbits > 0) extras.put(ranks[i] - base, nbits);
  });

  // rANS runs backwards; the words are collected in reverse and flipped at the end.
  std::uint32_t state[2] = {kStateLow, kStateLow};
  std::vector<std::uint16_t> words;
  words.reserve(n / 4 + 16);
  for_each_in_reverse_decoding_order(layout, [&](std::size_t i, int lane) {
    const std::size_t k = contexts[i] * kMaxTokens + tokens[i];
    encode_step(state[lane], model.freq[k], model.reciprocals[k], model.cumul[k], words);
  });
  append_varint(8 + 2 * words.size(), out);
  for (std::uint32_t x : state) append_u32le(x, out);
  for (std::size_t w = words.size(); w-- > 0;) {
    out.push_back(static_cast<std::uint8_t>(words[w]));
    out.push_back(static_cast<std::uint8_t>(words[w] >> 8));
  }
  const std::vector<std::uint8_t> extra_bytes = extras.finish();
  out.insert(out.end(), extra_bytes.begin(), extra_bytes.end());
  return out;
}

void decode_rans(std::span<const std::uint8_t> bytes, std::size_t row_width, std::uint64_t alphabet_size,
                 std::span<std::uint32_t> out, std::span<const std::uint32_t> symbol_of_rank) {
  if (alphabet_size == 0 && !out.empty()) throw CodecError("rans coder: empty alphabet");
  if (!symbol_of_rank.empty() && symbol_of_rank.size() != alphabet_size) {
    throw std::invalid_argument("decode_rans: symbol table size differs from the alphabet size");
  }
  std::size_t pos = 0;
  const ContextModel model = read_model(bytes, pos, alphabet_size);
  const ClassTable classes = class_table(model.threshold_span());

  // Ranks are checked against this after each row rather than in the hot loop.
  const auto max_rank = static_cast<std::uint32_t>(std::min<std::uint64_t>(alphabet_size, std::uint64_t{1} << 32) - 1);
  const auto tables_ptr = std::make_unique<DecodeTables>();
  DecodeTables& tables = *tables_ptr;
  tables.tokens.fill(0);
  tables.freq_cumul.fill(0);
  tables.base.fill(0);
  tables.extra_bits.fill(0);
  std::copy(classes.begin(), classes.end(), tables.context_of.begin());
  for (std::uint32_t k = 0; k < model.token_count; ++k) model.scheme.describe(k, tables.base[k], tables.extra_bits[k]);
  for (std::size_t c = 0; c < model.contexts; ++c) {
    std::uint8_t* slots = tables.tokens.data() + c * kProbScale;
    std::uint32_t* freq_cumul = tables.freq_cumul.data() + c * kMaxTokens;
    const std::uint32_t* f = model.freq.data() + c * kMaxTokens;
    const std::uint32_t* cu = model.cumul.data() + c * kMaxTokens;
    if (std::all_of(f, f + model.token_count, [](std::uint32_t v) { return v == 0; })) {
      // A context the encoder never used: no valid stream reaches it; make it decode safely anyway.
      freq_cumul[0] = kProbScale << 16;
      continue;
    }
    for (std::uint32_t k = 0; k < model.token_count; ++k) {
      std::fill(slots + cu[k], slots + cu[k] + f[k], static_cast<std::uint8_t>(k));
      freq_cumul[k] = (f[k] << 16) | cu[k];
    }
  }

  const std::uint64_t stream_size = read_varint(bytes, pos);
  if (stream_size < 8 || stream_size % 2 != 0 || stream_size > bytes.size() - pos) {
    throw CodecError("rans coder: bad stream size");
  }
  RansReader r;
  r.x0 = read_u32le(bytes.data() + pos);
  r.x1 = read_u32le(bytes.data() + pos + 4);
  r.p = bytes.data() + pos + 8;
  r.end = bytes.data() + pos + stream_size;
  if (r.x0 < kStateLow || r.x1 < kStateLow) throw CodecError("rans coder: bad initial state");
  BitReader bits(bytes.subspan(pos + stream_size));

  const Layout layout(out.size(), row_width);
  std::uint32_t* o = out.data();
  const std::uint32_t* symbols = symbol_of_rank.empty() ? nullptr : symbol_of_rank.data();
  std::uint32_t bad = 0;
  if (layout.one_d) {
    if (layout.rows > 0) {
      Lane1D lane0{o}, lane1{o + layout.start1(0)};
      const std::size_t len0 = layout.len0(0), len1 = layout.len1(0);
      for (std::size_t x = 0; x < len0; x += k1DSegment) {
        const std::size_t end = std::min(len0, x + k1DSegment);
        decode_span_checked_if_needed(tables, lane0, lane1, x, end, len1, r, bits);
        finish_ranks(lane0.out + x, end - x, max_rank, symbols, bad);
        finish_ranks(lane1.out + x, std::clamp(len1, x, end) - x, max_rank, symbols, bad);
      }
    }
  } else {
    const std::size_t w = layout.width;
    // Per lane, the upper and the current row of tokens, padded by one zero on each side. A lane's
    // first row has an all-zero upper row.
    std::vector<std::uint8_t> cur0(w + 2, 0), cur1(w + 2, 0);
    std::vector<std::uint16_t> above0(w, 0), above1(w, 0);
    for (std::size_t row = 0; row < layout.split_row; ++row) {
      Lane2D lane0(above0.data(), cur0.data() + 1, o + layout.start0(row));
      // Lane 1 has no row here once its rows are used up (odd row counts): point it anywhere valid.
      Lane2D lane1(above1.data(), cur1.data() + 1, layout.len1(row) > 0 ? o + layout.start1(row) : o);
      decode_span_checked_if_needed(tables, lane0, lane1, 0, layout.len0(row), layout.len1(row), r, bits);
      finish_ranks(lane0.out, layout.len0(row), max_rank, symbols, bad);
      finish_ranks(lane1.out, layout.len1(row), max_rank, symbols, bad);
      above_activity(cur0.data() + 1, w, above0.data());
      above_activity(cur1.data() + 1, w, above1.data());
    }
  }
  if (r.overrun || r.p != r.end || r.x0 != kStateLow || r.x1 != kStateLow) {
    throw CodecError("rans coder: corrupt, truncated or trailing stream");
  }
  if (!bits.consumed_exactly()) throw CodecError("rans coder: extra bits truncated or trailing");
  if (bad != 0) throw CodecError("rans coder: rank outside the alphabet");
}

}  // namespace tezip::codecs
