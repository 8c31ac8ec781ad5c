#include "codecs/entropy/striped_rans.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
// GCC 12 warns of an uninitialized value inside its own AVX-512 intrinsics, the
// _mm512_undefined_* source operands of the 512-bit ones (GCC bug 105593), wherever they are
// inlined; the warning's location is the header, so it is silenced there and only there.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#define TEZIP_HAVE_AVX2_KERNEL 1
#endif

#include "codecs/buffer_pool.hpp"
#include "codecs/codec_error.hpp"
#include "codecs/entropy/rank_map_avx2.hpp"
#include "codecs/entropy/rank_remap.hpp"
#include "codecs/entropy/row_sample.hpp"
#include "codecs/entropy/rans_model.hpp"
#include "codecs/transform/plane_transform.hpp"  // unzigzag
#include "codecs/transform/wavefront_avx2.hpp"

// Layout of an encode_striped_rans output:
//   model   the context model (rans_model.cpp)
//   varint  rows per segment S (the last segment may be shorter)
//   u8      stripe count L, 1..kMaxLanes, in bits 0-6; the rows of each segment are cut into
//           stripes, stripe l holding its rows [floor(l S / L), floor((l + 1) S / L)); bit 7: the
//           eight-neighbour context (chunk version 5), else the six-neighbour one; bit 6: an
//           options byte follows (chunk version 5):
//             u8 O      bit 0: table sets; bit 1: left classes (C = 3, else C = 1); bits 2-4 and
//                       6 (at most one): column parts P = 2 (bit 2, chunk version 8), 4 (bit 3),
//                       8 (bit 4; chunk version 9) or 16 (bit 6; chunk version 19): the symbols
//                       are coded as if each segment of S' rows of W columns were S = P S' rows
//                       of W / P, the rows' first parts first, then their second parts, and so
//                       on (W, L and S multiples of P), so that stripes l, l + L / P, ... hold
//                       the same rows' P parts: P times the stripes of a plane at the cost of
//                       the contexts beside the P - 1 cuts; bit 7 (chunk version 19, parts
//                       only): those contexts see the neighbouring parts' upper rows
//                       (cut_activity)
//             u8 K      table sets, 2..kMaxTableSets (bit 0 only; else K = 1)
//             K C - 1   models 1..K C - 1 (the model above is model 0) with model 0's scheme,
//                       context count and thresholds; model s C + c serves set s, left class c
//             N x u8    the set of each of the N segments, < K (bit 0 only)
//   L x u32 the final rANS state of each stripe (little-endian)
//   G       varints (G = ceil(L / 8)): the byte size of each group's word stream
//   L       varints: the byte size of each stripe's extra-bit stream
//   G       word streams: 16-bit little-endian words in the order group g's stripes read them
//   L       extra-bit streams, LSB first, zero padded to a byte
// Decoding order, segment by segment: for each row r of a stripe, for each column x, for each
// stripe l that has a row r (in increasing l): the symbol at row (start of l) + r, column x. The
// stripes of group g = l / 8 take their renormalization words from word stream g in that order;
// each stripe reads its own extra bits.
// Contexts: as in rans_coder.cpp, the activity 2 left + 2 up + up-left + up-right tokens (zeros
// outside the row); the eight-neighbour shape adds the token two to the left and the one two rows
// up. The upper row of a stripe's first row is the first row of the same stripe in the previous
// segment (when segments are planes: the same rows one frame earlier), or zeros in the first
// segment; the row two up of a stripe's first row is zeros, of its second row that same upper row.

namespace tezip::codecs {
namespace {

using namespace rans;

constexpr std::size_t kMaxLanes = 32;
constexpr std::size_t kGroup = 8;  // stripes per word stream: one 256-bit vector of 32-bit states
constexpr std::size_t kMaxGroups = kMaxLanes / kGroup;
constexpr std::size_t kExtraPadding = 8;  // zero bytes after each stripe's extra bits in the decoder's copy
constexpr TokenScheme kScheme{};         // the scheme the encoder writes and the SIMD kernel knows
// The SIMD kernel reads a token's extra bits with one 32-bit load at a byte offset: up to 24 bits.
constexpr std::uint32_t kSimdMaxExtraBits = 24;
// The estimated size a GOP may grow by for striped decoding (16 or 8 stripes instead of one).
// Measured: mire2 planes (288 rows) lose 0.1% at 16 stripes, castle (480 rows) 0.3%, vtest (576
// rows) 0.7% with the eight-neighbour context and 0.2% at 8 stripes, the sample's 120-row depth
// maps 1.3% at 8 stripes and 0.2% at 2. 16 stripes decode vtest 1.15x faster than 8 (SIMD decoding
// is 2-3x the portable one's speed): up to 1% of size for that (docs/performance.md).
constexpr double kMaxStripeCost = 0.01;
// What each stripe adds to a stream beside its symbols: its final state (4 bytes), the varint of
// its extra bits' size (mostly 1) and their padding to a byte (half a byte on average). Counted
// with the estimates, so that a small stream does not pay more than kMaxStripeCost for its lanes.
constexpr double kStripeBits = 8 * (4 + 1 + 0.5);
// The stripe-count byte's flags: the eight-neighbour context, an options byte.
constexpr std::uint8_t kEightNeighbours = 0x80;
constexpr std::uint8_t kOptions = 0x40;
// The options byte's flags: several table sets, the left token's class in the context.
constexpr std::uint8_t kOptionTableSets = 0x01;
constexpr std::uint8_t kOptionLeftClasses = 0x02;
constexpr std::uint8_t kOptionColumnHalves = 0x04;
constexpr std::uint8_t kOptionColumnQuarters = 0x08;
constexpr std::uint8_t kOptionColumnEighths = 0x10;
constexpr std::uint8_t kOptionColumnSixteenths = 0x40;  // chunk version 19
// Column parts whose cuts see the neighbouring parts' row above (chunk version 19): cut_activity.
constexpr std::uint8_t kOptionCutNeighbours = 0x80;
constexpr std::uint8_t kOptionColumnParts =
    kOptionColumnHalves | kOptionColumnQuarters | kOptionColumnEighths | kOptionColumnSixteenths;
// Side classes in the activities (chunk version 11): a byte s follows the table set count.
constexpr std::uint8_t kOptionSide = 0x20;
// The options byte's flag for P column parts (2, 4, 8 or 16), and back (0: none, 1 part).
constexpr std::uint8_t column_parts_option(std::size_t parts) {
  return parts == 2 ? kOptionColumnHalves : parts == 4 ? kOptionColumnQuarters : parts == 8 ? kOptionColumnEighths
       : parts == 16 ? kOptionColumnSixteenths : 0;
}
constexpr std::size_t column_parts_of(std::uint8_t options) {
  const std::uint8_t bits = options & kOptionColumnParts;
  return bits == kOptionColumnHalves ? 2 : bits == kOptionColumnQuarters ? 4 : bits == kOptionColumnEighths ? 8
       : bits == kOptionColumnSixteenths ? 16 : bits == 0 ? 1 : 0;
}
constexpr std::size_t kMaxTableSets = 8;
constexpr std::size_t kLeftClasses = 3;
// The least estimated saving for which the encoder splits contexts by left classes (mire2: 2.0%
// lossless, 2.9% at abs 2; decoding 0.93-0.98x as fast; docs/defaults.md).
constexpr double kMinLeftClassGain = 0.01;
constexpr std::size_t kTableSize = kMaxContexts * kMaxTokens;  // counts and frequencies of one model
// The least estimated saving for which the encoder adds side classes to the activities (their
// decoding adds a pass over each row step's context sums).
constexpr double kMinSideGain = 0.01;
// The shifts s the encoder tries.
constexpr std::uint32_t kSideShifts = 3;

// What a side class c adds to an activity under shift s: max(0, c - s), at most kMaxSideActivity.
using SideTerms = std::array<std::uint8_t, kSideClasses>;
SideTerms side_terms(std::uint32_t shift) {
  SideTerms out{};
  for (std::uint32_t c = 0; c < kSideClasses; ++c) out[c] = std::uint8_t(std::min(kMaxSideActivity, c > shift ? c - shift : 0));
  return out;
}

// The left token's class: 0 for zero, 1 odd, 2 even.
constexpr std::uint32_t left_class(std::uint32_t token) { return token == 0 ? 0 : 2 - (token & 1); }

// The stripes of a segment's rows and their lengths, which differ by at most one.
struct Stripes {
  std::size_t lanes = 1, rows = 0;
  std::array<std::size_t, kMaxLanes + 1> start{};
  std::size_t shortest = 0, longest = 0;

  Stripes(std::size_t lane_count, std::size_t row_count) : lanes(lane_count), rows(row_count) {
    for (std::size_t l = 0; l <= lanes; ++l) start[l] = l * rows / lanes;
    shortest = rows / lanes;
    longest = shortest + (rows % lanes != 0 ? 1 : 0);
  }
  std::size_t length(std::size_t l) const { return start[l + 1] - start[l]; }
};

std::size_t group_count(std::size_t lanes) { return (lanes + kGroup - 1) / kGroup; }

constexpr std::size_t kSampledRows = 1024;  // the least rows whose estimates encode_striped_rans samples

// Decoding tables. One 32-bit entry per (context, slot): the token (bits 0-6), slot minus the
// token's cumulative frequency (bits 7-17), with left classes the token's left_class (bits 18-19)
// and the token's frequency (bits 20-31), so that a symbol costs one table load after the
// context's, and the next symbol's context offset for its left class is (entry >> 3) & kClassBits.
struct Tables {
  std::vector<std::uint32_t, BufferAllocator<std::uint32_t>> entries;  // kMaxContexts * kProbScale per model, all written
  const std::uint32_t* current = nullptr;  // the set of the segment being decoded
  std::array<std::uint32_t, kActivityRange> context_base;  // activity -> context << kProbBits
  std::array<std::uint32_t, kMaxTokens> base;
  std::array<std::uint32_t, kMaxTokens> extra_bits;
};

constexpr std::uint32_t entry(std::uint32_t token, std::uint32_t offset, std::uint32_t freq, std::uint32_t left_class = 0) {
  return token | (offset << 7) | (left_class << 18) | (freq << 20);
}
// An entry's left class, shifted to where it offsets a context's table (16 contexts a class).
constexpr std::uint32_t kClassBits = 3u << (4 + kProbBits);
static_assert(18 - 3 == 4 + kProbBits);

// What a row step reads and writes besides the tables.
struct LaneStates {
  std::array<std::uint32_t, kMaxLanes> x{};
  std::array<const std::uint8_t*, kMaxGroups> p{};
  std::array<const std::uint8_t*, kMaxGroups> end{};
  bool overrun = false;
  // Extra bits: all stripes' streams in one buffer, each followed by kExtraPadding zero bytes.
  const std::uint8_t* extra = nullptr;
  std::array<std::uint64_t, kMaxLanes> bit_pos{};      // absolute bit position in `extra`
  std::array<std::uint64_t, kMaxLanes> extra_limit{};  // byte offset of the stripe's padding
  std::uint32_t over = 0;                              // a rank beyond the alphabet was seen
  // The AVX-512 kernel's last row step: its group steps (width x groups) that still gathered a
  // symbol (a rank past 31). Where most do, the AVX2 kernel is faster (its one gather a step).
  std::uint32_t far_steps = 0;
};

// `n` bits of stripe l's extra bits (n <= 32). Past its end the stripe reads its zero padding, and
// the final position tells (the SIMD kernel reads the same bits the same way).
inline std::uint32_t read_extra(LaneStates& s, std::size_t l, std::uint32_t n) {
  const std::uint64_t at = std::min<std::uint64_t>(s.bit_pos[l] >> 3, s.extra_limit[l]);
  std::uint64_t word;
  std::memcpy(&word, s.extra + at, 8);
  const auto v = static_cast<std::uint32_t>((word >> (s.bit_pos[l] & 7)) & ((std::uint64_t{1} << n) - 1));
  s.bit_pos[l] += n;
  return v;
}

// Tokens of one row step, interleaved [column + 1][lane] with a zero column on each side; the
// upper-row part of each next activity, [column][lane]; the decoded symbols, [column][lane].
// `previous`: the tokens of the row step before (eight-neighbour context), the same layout.
struct RowBuffers {
  std::vector<std::uint16_t> tokens, previous, above;
  std::vector<std::uint32_t> values;
  RowBuffers(std::size_t width, std::size_t lanes)
      : tokens((width + 2) * lanes, 0), previous((width + 2) * lanes, 0), above(width * lanes, 0), values(width * lanes, 0) {}
};

// The upper-row part of the next row step's activities from its row above (`tokens`) and, for the
// eight-neighbour context, the row two up (`two_up`, the same layout; nullptr: zeros).
inline void next_above_loop(const std::uint16_t* t, const std::uint16_t* u, std::size_t lanes, std::uint16_t* above,
                            std::size_t n) {
  if (u == nullptr) {
    for (std::size_t j = 0; j < n; ++j) above[j] = static_cast<std::uint16_t>(t[j] + 2 * t[j + lanes] + t[j + 2 * lanes]);
    return;
  }
  for (std::size_t j = 0; j < n; ++j)
    above[j] = static_cast<std::uint16_t>(t[j] + 2 * t[j + lanes] + t[j + 2 * lanes] + u[j]);
}

#if defined(__x86_64__) || defined(__i386__)
// The same loop compiled for AVX2 (16 sums an instruction instead of SSE2's 8; integer adds, so
// the same values): 3.7% of gray vtest's decoding with SSE2.
[[gnu::target("avx2")]] void next_above_avx2(const std::uint16_t* t, const std::uint16_t* u, std::size_t lanes,
                                             std::uint16_t* above, std::size_t n) {
  next_above_loop(t, u, lanes, above, n);
}
#endif

// Each active stripe's side terms of a row step, columns [x0, width), into `above` ([column][lane]):
// `side_rows`, the stripes' side classes at the step's row (nullptr: inactive), the portable way.
void add_side_portable(std::uint16_t* above, const std::uint8_t* const* side_rows, std::size_t lanes, std::size_t x0,
                       std::size_t width, const SideTerms& terms) {
  for (std::size_t l = 0; l < lanes; ++l) {
    const std::uint8_t* sr = side_rows[l];
    if (sr == nullptr) continue;
    std::uint16_t* a = above + l;
    for (std::size_t x = x0; x < width; ++x) a[x * lanes] = static_cast<std::uint16_t>(a[x * lanes] + terms[sr[x] & 15]);
  }
}

#if defined(__x86_64__) || defined(__i386__)
// The same for 16 or 32 stripes, all active, in 16 x 16 tiles of bytes transposed in registers (16
// stripes' rows of 16 columns in, 16 columns of the stripes out; the scalar loop's strided stores
// were 15% of decoding): columns [0, x), x returned.
[[gnu::target("avx2")]] std::size_t add_side_avx2(std::uint16_t* above, const std::uint8_t* const* side_rows, std::size_t lanes,
                                                  std::size_t width, const SideTerms& terms) {
  const __m128i lut = _mm_loadu_si128(reinterpret_cast<const __m128i*>(terms.data())), nibble = _mm_set1_epi8(15);
  std::size_t x = 0;
  for (; x + 16 <= width; x += 16)
    for (std::size_t l0 = 0; l0 < lanes; l0 += 16) {
      __m128i a[16], b[16];
      for (int i = 0; i < 16; ++i)
        a[i] = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(side_rows[l0 + i] + x)), nibble));
      for (int i = 0; i < 16; i += 2) {  // b[i], b[i + 1]: rows i and i + 1, columns 0-7 and 8-15
        b[i] = _mm_unpacklo_epi8(a[i], a[i + 1]);
        b[i + 1] = _mm_unpackhi_epi8(a[i], a[i + 1]);
      }
      for (int q = 0; q < 4; ++q) {  // a[4 q + m]: rows 4 q .. 4 q + 3, columns 4 m .. 4 m + 3
        a[4 * q] = _mm_unpacklo_epi16(b[4 * q], b[4 * q + 2]);
        a[4 * q + 1] = _mm_unpackhi_epi16(b[4 * q], b[4 * q + 2]);
        a[4 * q + 2] = _mm_unpacklo_epi16(b[4 * q + 1], b[4 * q + 3]);
        a[4 * q + 3] = _mm_unpackhi_epi16(b[4 * q + 1], b[4 * q + 3]);
      }
      for (int h = 0; h < 2; ++h)  // b[8 h + p]: rows 8 h .. 8 h + 7, columns 2 p and 2 p + 1
        for (int m = 0; m < 4; ++m) {
          b[8 * h + 2 * m] = _mm_unpacklo_epi32(a[8 * h + m], a[8 * h + 4 + m]);
          b[8 * h + 2 * m + 1] = _mm_unpackhi_epi32(a[8 * h + m], a[8 * h + 4 + m]);
        }
      for (int j = 0; j < 16; ++j) {  // column j of the 16 rows
        const __m128i column = (j & 1) ? _mm_unpackhi_epi64(b[j / 2], b[8 + j / 2]) : _mm_unpacklo_epi64(b[j / 2], b[8 + j / 2]);
        auto* at = reinterpret_cast<__m256i*>(above + (x + std::size_t(j)) * lanes + l0);
        _mm256_storeu_si256(at, _mm256_add_epi16(_mm256_loadu_si256(at), _mm256_cvtepu8_epi16(column)));
      }
    }
  return x;
}
#endif

// `u`: the row two up from its column 0 (past its padding column), or nullptr.
void next_above(const std::vector<std::uint16_t>& tokens, const std::uint16_t* u, std::size_t lanes,
                std::vector<std::uint16_t>& above, bool avx2) {
  // Column x of `above` from token columns x - 1, x, x + 1, which sit at x, x + 1, x + 2 (padding).
#if defined(__x86_64__) || defined(__i386__)
  if (avx2) return next_above_avx2(tokens.data(), u, lanes, above.data(), above.size());
#else
  (void)avx2;
#endif
  next_above_loop(tokens.data(), u, lanes, above.data(), above.size());
}

// Column parts with cut neighbours (kOptionCutNeighbours): what cut_activity adds to the context
// sums `above` of a row step at each part's cuts, from its neighbouring parts' tokens of the row
// step before, `t` (next_above's layout): the upper left and, as the missing left tokens, the
// tokens above them in the first two columns; the upper right in the last. Parts of a row are
// lanes l, l + L / P, ... (L / P stripes of rows).
void add_cut_neighbours(const std::uint16_t* t, std::uint16_t* above, std::size_t width, std::size_t lanes,
                        std::size_t parts, bool wide) {
  const std::size_t stripes = lanes / parts;
  for (std::size_t l = stripes; l < lanes; ++l) {  // a left neighbour: its last two columns
    const std::uint32_t last = t[width * lanes + l - stripes], before = t[(width - 1) * lanes + l - stripes];
    above[l] = static_cast<std::uint16_t>(above[l] + 3 * last + (wide ? before : 0));
    if (wide) above[lanes + l] = static_cast<std::uint16_t>(above[lanes + l] + last);
  }
  for (std::size_t l = 0; l + stripes < lanes; ++l)  // a right neighbour: its first column
    above[(width - 1) * lanes + l] = static_cast<std::uint16_t>(above[(width - 1) * lanes + l] + t[lanes + l + stripes]);
}

// One row step of the stripes that are active, the portable way: tokens, then extra bits and the
// rank -> symbol map (`symbols` may be null: ranks out, or with `unzig` zigzag's inverse of them).
// Checked: a word past the end of a stream reads as zero and sets `overrun`.
void decode_row_portable(const Tables& t, const std::uint16_t* above, std::uint16_t* tokens, std::uint32_t* values,
                         std::size_t width, std::size_t lanes, const std::uint32_t* active, const std::uint32_t* symbols,
                         bool unzig, std::uint32_t max_rank, bool wide, LaneStates& s) {
  std::array<std::uint32_t, kMaxLanes> left{}, left2{};
  const std::uint32_t wide_mask = wide ? ~0u : 0u;
  std::array<std::uint32_t, kMaxLanes> class_base{};  // the left token's class offset (0 without left classes)
  for (std::size_t i = 0; i < width; ++i) {
    const std::uint16_t* ab = above + i * lanes;
    std::uint16_t* tk = tokens + (i + 1) * lanes;
    std::uint32_t* val = values + i * lanes;
    for (std::size_t l = 0; l < lanes; ++l) {
      if (!active[l]) {
        tk[l] = 0;
        continue;
      }
      std::uint32_t& x = s.x[l];
      const std::uint32_t context = t.context_base[ab[l] + 2 * left[l] + (left2[l] & wide_mask)] + class_base[l];
      const std::uint32_t e = t.current[context + (x & kSlotMask)];
      class_base[l] = (e >> 3) & kClassBits;
      const std::uint32_t token = e & 0x7F;
      x = (e >> 20) * (x >> kProbBits) + ((e >> 7) & kSlotMask);
      if (x < kStateLow) {
        const std::size_t g = l / kGroup;
        std::uint32_t w = 0;
        if (s.end[g] - s.p[g] >= 2) {
          w = s.p[g][0] | (std::uint32_t{s.p[g][1]} << 8);
          s.p[g] += 2;
        } else {
          s.overrun = true;
        }
        x = (x << 16) | w;
      }
      left2[l] = left[l];
      left[l] = token;
      tk[l] = static_cast<std::uint16_t>(token);
      const std::uint32_t v = t.base[token] + read_extra(s, l, t.extra_bits[token]);
      s.over |= static_cast<std::uint32_t>(v > max_rank);
      val[l] = symbols != nullptr ? symbols[std::min(v, max_rank)] : unzig ? std::uint32_t(unzigzag(v)) : v;
    }
  }
}

#ifdef TEZIP_HAVE_AVX2_KERNEL
// What the kernels' masked loads of the rank -> symbol map read where there is no map (the ranks
// are the symbols); the masks then load nothing.
alignas(64) constexpr std::array<std::uint32_t, 32> kNoSymbols{};

// For each mask of the lanes that renormalize, which of the 8 loaded words each lane takes: lane j
// takes the word after those of the set lanes below it.
struct WordPermutations {
  alignas(32) std::array<std::array<std::int32_t, 8>, 256> index{};
  constexpr WordPermutations() {
    for (int m = 0; m < 256; ++m) {
      int k = 0;
      for (int j = 0; j < 8; ++j)
        if (m & (1 << j)) index[m][j] = k++;
    }
  }
};
constexpr WordPermutations kWordPermutations;

// The encoder's counterparts: for each mask of lanes, those lanes packed to the front, from the
// highest down (the lanes that emit a word, in the order encode_step pushes them) or from the
// lowest up (the symbols with extra bits, in column order).
struct PackPermutations {
  alignas(32) std::array<std::array<std::int32_t, 8>, 256> lane{};
  constexpr explicit PackPermutations(bool highest_first) {
    for (int m = 0; m < 256; ++m) {
      int k = 0;
      for (int i = 0; i < 8; ++i) {
        const int j = highest_first ? 7 - i : i;
        if (m & (1 << j)) lane[m][k++] = j;
      }
    }
  }
};
constexpr PackPermutations kEmitPermutations(true), kExtraPermutations(false);

// Columns [x0, x1) of a row step of `lanes` stripes, all active, from `values` ([column][lane]) to
// the stripes' rows, one value at a time: the SIMD kernels' columns past their last whole tile.
inline void store_columns(const std::uint32_t* values, std::size_t lanes, std::uint32_t* const* rows, std::size_t x0,
                          std::size_t x1) {
  for (std::size_t x = x0; x < x1; ++x)
    for (std::size_t l = 0; l < lanes; ++l) rows[l][x] = values[x * lanes + l];
}

// 8 columns of a row step of 8 G stripes, all active, from `values` ([column][lane], column x
// first) to the stripes' rows at column x: 8 x 8 tiles transposed in registers (8 columns of 8
// lanes in, 8 lanes' rows of 8 columns out).
template <int G>
[[gnu::target("avx2")]] inline void transpose_tile_avx2(const std::uint32_t* values, std::uint32_t* const* row,
                                                        std::size_t x) {
  constexpr std::size_t L = kGroup * G;
  for (int g = 0; g < G; ++g) {
    // c[k]: column x + k of the group's 8 lanes; transposed, c[l]: lane l's 8 columns.
    __m256i c[8];
    for (int k = 0; k < 8; ++k) c[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + k * L + kGroup * g));
    wavefront_avx2::transpose8(c);
    for (int l = 0; l < 8; ++l) _mm256_storeu_si256(reinterpret_cast<__m256i*>(row[kGroup * g + l] + x), c[l]);
  }
}

#define TEZIP_STRIPED_KERNEL decode_row_avx2
#define TEZIP_STRIPED_TARGET "avx2,popcnt"
#define TEZIP_STRIPED_AVX512 0
#include "codecs/entropy/striped_rans_kernel.inc"
#undef TEZIP_STRIPED_KERNEL
#undef TEZIP_STRIPED_TARGET
#undef TEZIP_STRIPED_AVX512
#define TEZIP_STRIPED_KERNEL decode_row_avx512
#define TEZIP_STRIPED_TARGET "avx2,popcnt,avx512f,avx512vl,avx512bw,avx512dq"
#define TEZIP_STRIPED_AVX512 1
#include "codecs/entropy/striped_rans_kernel.inc"
#undef TEZIP_STRIPED_KERNEL
#undef TEZIP_STRIPED_TARGET
#undef TEZIP_STRIPED_AVX512
// 16 columns of a row step of 16 V stripes, all active, from `values` ([column][lane], column x
// first) to the stripes' rows at column x, with AVX-512: 16 x 16 tiles transposed in registers,
// 4 x 4 within each 128-bit lane, then the lanes 4 x 4 (64 shuffles a tile against the 96 of four
// 8 x 8 ones). With V = 2 (32 stripes) each half of the lanes is its own tile.
template <int V>
[[gnu::target("avx2,avx512f,avx512vl,avx512bw,avx512dq")]] inline void transpose_tile_zmm(const std::uint32_t* values,
                                                                                          std::uint32_t* const* lane_rows,
                                                                                          std::size_t x) {
  constexpr std::size_t T = 16, L = T * V;
  for (int v = 0; v < V; ++v) {
    std::uint32_t* const* row = lane_rows + T * v;
    // d[4j + m], 128-bit lane q: stripe 4q + m, columns x + 4j .. x + 4j + 3.
    __m512i d[T];
    for (std::size_t j = 0; j < 4; ++j) {
      const std::uint32_t* in = values + 4 * j * L + T * v;
      const __m512i a = _mm512_loadu_si512(in), b = _mm512_loadu_si512(in + L);
      const __m512i c = _mm512_loadu_si512(in + 2 * L), e = _mm512_loadu_si512(in + 3 * L);
      const __m512i t0 = _mm512_unpacklo_epi32(a, b), t1 = _mm512_unpackhi_epi32(a, b);
      const __m512i t2 = _mm512_unpacklo_epi32(c, e), t3 = _mm512_unpackhi_epi32(c, e);
      d[4 * j] = _mm512_unpacklo_epi64(t0, t2);
      d[4 * j + 1] = _mm512_unpackhi_epi64(t0, t2);
      d[4 * j + 2] = _mm512_unpacklo_epi64(t1, t3);
      d[4 * j + 3] = _mm512_unpackhi_epi64(t1, t3);
    }
    for (std::size_t m = 0; m < 4; ++m) {
      const __m512i p0 = _mm512_shuffle_i32x4(d[m], d[4 + m], 0x44), p1 = _mm512_shuffle_i32x4(d[m], d[4 + m], 0xEE);
      const __m512i q0 = _mm512_shuffle_i32x4(d[8 + m], d[12 + m], 0x44), q1 = _mm512_shuffle_i32x4(d[8 + m], d[12 + m], 0xEE);
      _mm512_storeu_si512(row[m] + x, _mm512_shuffle_i32x4(p0, q0, 0x88));
      _mm512_storeu_si512(row[4 + m] + x, _mm512_shuffle_i32x4(p0, q0, 0xDD));
      _mm512_storeu_si512(row[8 + m] + x, _mm512_shuffle_i32x4(p1, q1, 0x88));
      _mm512_storeu_si512(row[12 + m] + x, _mm512_shuffle_i32x4(p1, q1, 0xDD));
    }
  }
}

#include "codecs/entropy/striped_rans_kernel_zmm.inc"

#endif

// A row step's symbols, [column][lane], to the stripes' rows. In tiles of kScatterTile columns:
// a lane's pass over the whole row step would read one value per cache line of a buffer larger
// than L1 on wide planes (768 columns x 16 lanes: 48 KB), a tile stays in L1.
constexpr std::size_t kScatterTile = 32;

void scatter_rows(const std::uint32_t* values, std::size_t width, std::size_t lanes, const std::uint32_t* active,
                  std::uint32_t* const* row) {
  for (std::size_t x0 = 0; x0 < width; x0 += kScatterTile) {
    const std::size_t x1 = std::min(width, x0 + kScatterTile);
    for (std::size_t l = 0; l < lanes; ++l) {
      if (!active[l]) continue;
      std::uint32_t* o = row[l];
      const std::uint32_t* v = values + l;
      for (std::size_t x = x0; x < x1; ++x) o[x] = v[x * lanes];
    }
  }
}

}  // namespace

std::size_t striped_rans_lanes(std::size_t rows, std::size_t row_width) {
  // The most stripes a segment's rows allow: 32 or 16 (vectors whose gathers overlap) once each has
  // 6 rows, 8 from 8 rows, else one. The encoder takes fewer where their cost estimate says so.
  // (96-row planes: 16 stripes of 6 rows decoded the loader benchmark's 96x96 frames 1.07-1.12x
  // faster on one thread than 8 of 12, for 0.19% of size. 32 stripes: two chains of 16 lanes in the
  // AVX-512 kernel, mire2 decoded 1.2x faster for 0.07% of size; vtest's planes keep 16, where 32
  // would cost 1.7% by the estimate: docs/performance.md.)
  (void)row_width;
  if (rows >= 32 * 6) return 32;
  if (rows >= 16 * 6) return 16;
  if (rows >= 8 * 8) return 8;
  return 1;
}

#ifdef TEZIP_HAVE_AVX2_KERNEL
namespace {

// Sixteen tokens from p, widened to 16 bits.
[[gnu::target("avx2")]] inline __m256i bytes(const std::uint8_t* p) {
  return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The encoder's activity classes of columns [2, x) of a row, sixteen a vector, x the value
// returned (the rest, and the row's edges, the portable way): the sums of the six neighbours'
// tokens (eight with `up2`), as row_contexts adds them, in 16-bit lanes, and the class as the
// number of thresholds at or below the sum, which is what class_table stores.
// The extra bits of a row's symbols that have any, each as its bits | their count << 24, in
// column order, into `out` (room for width + 8); returns how many, and in `done` the first column
// not reached. The default token scheme's extra bits are the rank's low (token - 16) / 4 + 2 bits
// (TokenScheme::describe); ranks below 2^24 (their counts below 22).
[[gnu::target("avx2,popcnt")]] std::size_t packed_extras_avx2(const std::uint8_t* t, const std::uint32_t* ranks,
                                                             std::size_t width, std::uint32_t* out, std::size_t& done) {
  const __m256i one = _mm256_set1_epi32(1), two = _mm256_set1_epi32(2), fifteen = _mm256_set1_epi32(15);
  std::size_t n = 0, x = 0;
  for (; x + 8 <= width; x += 8) {
    const __m256i token = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(t + x)));
    const __m256i has = _mm256_cmpgt_epi32(token, fifteen);
    const __m256i above = _mm256_srli_epi32(_mm256_sub_epi32(token, _mm256_set1_epi32(16)), 2);
    const __m256i count = _mm256_and_si256(has, _mm256_add_epi32(above, two));
    const __m256i low = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ranks + x)),
                                         _mm256_sub_epi32(_mm256_sllv_epi32(one, count), one));
    const unsigned mask = unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(has)));
    const __m256i order = _mm256_load_si256(reinterpret_cast<const __m256i*>(kExtraPermutations.lane[mask].data()));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + n),
                        _mm256_permutevar8x32_epi32(_mm256_or_si256(low, _mm256_slli_epi32(count, 24)), order));
    n += std::size_t(_mm_popcnt_u32(mask));
  }
  done = x;
  return n;
}

// Each symbol's table key, (left class of the token before it * kMaxContexts + context) *
// kMaxTokens + token, over its context in `k`, for columns [1, width) of a row, 16 a step; returns
// the first column it did not reach. The left class (left_class): 0 for token 0, 1 odd, 2 even.
[[gnu::target("avx2")]] std::size_t table_keys_avx2(const std::uint8_t* t, std::uint16_t* k, std::size_t width) {
  static_assert(kMaxContexts == 1 << 4 && kMaxTokens == 1 << 7, "a key's fields: 2 bits, 4 and 7");
  const __m256i one = _mm256_set1_epi16(1), two = _mm256_set1_epi16(2), zero = _mm256_setzero_si256();
  std::size_t x = 1;
  for (; x + 16 <= width; x += 16) {
    const __m256i left = bytes(t + x - 1);
    const __m256i cls = _mm256_andnot_si256(_mm256_cmpeq_epi16(left, zero), _mm256_sub_epi16(two, _mm256_and_si256(left, one)));
    const __m256i ctx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + x));
    const __m256i key = _mm256_add_epi16(
        _mm256_add_epi16(_mm256_slli_epi16(cls, 11), _mm256_slli_epi16(ctx, 7)), bytes(t + x));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(k + x), key);
  }
  return x;
}

[[gnu::target("avx2")]] std::size_t interior_classes_avx2(const std::uint8_t* t, const std::uint8_t* up, const std::uint8_t* up2,
                                                         const std::uint8_t* side, const SideTerms& terms, std::uint16_t* k,
                                                         std::size_t width) {
  static_assert(kActivityRange < 32768, "activity sums fit signed 16-bit lanes");
  const __m128i lut = _mm_loadu_si128(reinterpret_cast<const __m128i*>(terms.data()));
  std::size_t x = 2;
  for (; x + 16 + 1 <= width; x += 16) {  // up[x + 16] is the last byte read
    __m256i a = _mm256_add_epi16(bytes(t + x - 1), bytes(up + x));
    a = _mm256_add_epi16(a, a);
    a = _mm256_add_epi16(a, _mm256_add_epi16(bytes(up + x - 1), bytes(up + x + 1)));
    if (up2 != nullptr) a = _mm256_add_epi16(a, _mm256_add_epi16(bytes(t + x - 2), bytes(up2 + x)));
    if (side != nullptr)
      a = _mm256_add_epi16(a, _mm256_cvtepu8_epi16(
                                  _mm_shuffle_epi8(lut, _mm_loadu_si128(reinterpret_cast<const __m128i*>(side + x)))));
    __m256i c = _mm256_setzero_si256();
    for (const std::uint32_t threshold : kHalfOctaveThresholds)
      c = _mm256_sub_epi16(c, _mm256_cmpgt_epi16(a, _mm256_set1_epi16(static_cast<std::int16_t>(threshold - 1))));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(k + x), c);
  }
  return x;
}

}  // namespace
#endif

namespace {

// A buffer the encoder appends to through a pointer, grown before each row step to hold the most
// that step can add plus kSlack (the overrun of the SIMD encoder's eight-word stores); it starts at
// the expected size, not the worst case.
template <class T>
struct GrowingBuffer {
  explicit GrowingBuffer(std::size_t expected) : capacity(expected + kSlack), data(new T[capacity]), end(data.get()) {}
  void push_back(T v) { *end++ = v; }
  std::size_t size() const { return std::size_t(end - data.get()); }
  // Room for `count` more and the slack.
  void make_room(std::size_t count) {
    if (size() + count + kSlack <= capacity) return;
    const std::size_t used = size();
    capacity = std::max(2 * capacity, used + count + kSlack);
    std::unique_ptr<T[]> grown(new T[capacity]);
    std::copy(data.get(), end, grown.get());
    data = std::move(grown);
    end = data.get() + used;
  }
  static constexpr std::size_t kSlack = 8;
  std::size_t capacity;
  std::unique_ptr<T[]> data;
  T* end;
};

// A word group's renormalization words as the encoder emits them (the reverse of the decoder's
// order): at most a word a symbol.
using WordSink = GrowingBuffer<std::uint16_t>;

// The encoder's table entry: a symbol's reciprocal, frequency and cumulative frequency in one
// entry (one cache line a step, not three).
struct EncodeEntry {
  std::uint64_t reciprocal;
  std::uint32_t freq, cumul;
};
static_assert(sizeof(EncodeEntry) == 16 && offsetof(EncodeEntry, freq) == 8);

// A row step of `lanes` stripes, the portable way: for each column from the right, the stripes
// from the highest (so that the decoder, running forwards, reads each step's words from the lowest
// stripe up). row[l]: stripe l's contexts for this row, nullptr where the stripe has no such row.
void encode_row_portable(const EncodeEntry* table, const std::uint16_t* const* row, std::size_t lanes, std::size_t width,
                         std::uint32_t* state, WordSink* words) {
  for (std::size_t x = width; x-- > 0;)
    for (std::size_t l = lanes; l-- > 0;) {
      if (row[l] == nullptr) continue;
      const EncodeEntry& e = table[row[l][x]];
      encode_step(state[l], e.freq, e.reciprocal, e.cumul, words[l / kGroup]);
    }
}

#ifdef TEZIP_HAVE_AVX2_KERNEL
// A symbol's frequency (bits 0-11) and cumulative frequency (bits 12-22): what the AVX2 encoder
// gathers, one 32-bit load a lane.
std::uint32_t packed_entry(std::uint32_t freq, std::uint32_t cumul) { return freq | cumul << 12; }
static_assert(kProbBits == 11, "packed_entry's fields");

// The contexts of a row step of 8 G stripes, [column][stripe] (8 x 8 tiles of 16-bit values transposed
// in registers): the encoder then loads a group's eight with one load, where gathering them from
// eight rows far apart was two thirds of its time.
template <std::size_t G>
[[gnu::target("avx2")]] void interleave_contexts(const std::uint16_t* const* row, std::size_t width, std::uint16_t* out) {
  constexpr std::size_t L = kGroup * G;
  std::size_t col = 0;
  for (; col + 8 <= width; col += 8)
    for (std::size_t g = 0; g < G; ++g) {
      __m128i r[8];
      for (int j = 0; j < 8; ++j) r[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[8 * g + j] + col));
      const __m128i a0 = _mm_unpacklo_epi16(r[0], r[1]), a1 = _mm_unpackhi_epi16(r[0], r[1]);
      const __m128i a2 = _mm_unpacklo_epi16(r[2], r[3]), a3 = _mm_unpackhi_epi16(r[2], r[3]);
      const __m128i a4 = _mm_unpacklo_epi16(r[4], r[5]), a5 = _mm_unpackhi_epi16(r[4], r[5]);
      const __m128i a6 = _mm_unpacklo_epi16(r[6], r[7]), a7 = _mm_unpackhi_epi16(r[6], r[7]);
      const __m128i b0 = _mm_unpacklo_epi32(a0, a2), b1 = _mm_unpackhi_epi32(a0, a2);
      const __m128i b2 = _mm_unpacklo_epi32(a1, a3), b3 = _mm_unpackhi_epi32(a1, a3);
      const __m128i b4 = _mm_unpacklo_epi32(a4, a6), b5 = _mm_unpackhi_epi32(a4, a6);
      const __m128i b6 = _mm_unpacklo_epi32(a5, a7), b7 = _mm_unpackhi_epi32(a5, a7);
      const __m128i c[8] = {_mm_unpacklo_epi64(b0, b4), _mm_unpackhi_epi64(b0, b4), _mm_unpacklo_epi64(b1, b5),
                            _mm_unpackhi_epi64(b1, b5), _mm_unpacklo_epi64(b2, b6), _mm_unpackhi_epi64(b2, b6),
                            _mm_unpacklo_epi64(b3, b7), _mm_unpackhi_epi64(b3, b7)};
      for (int j = 0; j < 8; ++j) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (col + j) * L + 8 * g), c[j]);
    }
  for (; col < width; ++col)
    for (std::size_t l = 0; l < L; ++l) out[col * L + l] = row[l][col];
}

// encode_row_portable for G groups of 8 stripes, every stripe active, in AVX2: a group's states
// in one vector, a whole row at a time (a stripe's states depend only on its own symbols, and a
// group's words only on its stripes), so the G chains of one column step overlap. The arithmetic
// is encode_step's: renormalize where x >> 21 >= f (x >= f << 21 without a 33rd bit); then q = x / f,
// first from a float division (x with its low bit dropped and both rounded to 24 bits: within 1 of
// x / f, as q < 2^21), then corrected by one step either way on the remainder r = x - q f, which is
// exact; x = (q << 11) + r + c. One gather a vector, the packed entry (the reciprocal's 64-bit
// products took four, and the kernel was bound by them); the contexts come in a row step's
// [column][stripe] order (interleave_contexts). The words a step emits go to their group's stream
// from the highest stripe down, as encode_step pushes them.
template <std::size_t G>
[[gnu::target("avx2,popcnt")]] void encode_row_avx2(const std::uint32_t* packed, const std::uint16_t* contexts,
                                                    std::size_t width, std::uint32_t* state, WordSink* words) {
  static_assert(kStateLow == (1u << 16), "the kernel's shifts");
  constexpr std::size_t L = kGroup * G;
  __m256i x[G];
  for (std::size_t g = 0; g < G; ++g) x[g] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(state + 8 * g));
  const __m256i low16 = _mm256_set1_epi32(0xFFFF), low12 = _mm256_set1_epi32(0xFFF), one = _mm256_set1_epi32(1);
  const __m256 two = _mm256_set1_ps(2.0f);
  std::uint16_t* out[G];
  for (std::size_t g = 0; g < G; ++g) out[g] = words[g].end;
  for (std::size_t col = width; col-- > 0;) {
    for (std::size_t g = 0; g < G; ++g) {
      const __m256i k =
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(contexts + col * L + 8 * g)));
      const __m256i e = _mm256_i32gather_epi32(reinterpret_cast<const int*>(packed), k, 4);
      const __m256i f = _mm256_and_si256(e, low12), c = _mm256_srli_epi32(e, 12);
      __m256i v = x[g];
      const __m256i renorm = _mm256_cmpgt_epi32(_mm256_srli_epi32(v, 32 - kProbBits), _mm256_sub_epi32(f, one));
      // The words: the renormalizing lanes' low halves, highest lane first, eight stored, as many kept.
      const unsigned mask = unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(renorm)));
      const __m256i moved = _mm256_and_si256(
          _mm256_permutevar8x32_epi32(
              v, _mm256_load_si256(reinterpret_cast<const __m256i*>(kEmitPermutations.lane[mask].data()))),
          low16);
      const __m256i narrow = _mm256_permute4x64_epi64(_mm256_packus_epi32(moved, moved), 0b1000);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out[g]), _mm256_castsi256_si128(narrow));
      out[g] += _mm_popcnt_u32(mask);
      v = _mm256_blendv_epi8(v, _mm256_srli_epi32(v, 16), renorm);
      const __m256 xf = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v, 1)), two);
      __m256i q = _mm256_cvttps_epi32(_mm256_div_ps(xf, _mm256_cvtepi32_ps(f)));
      __m256i r = _mm256_sub_epi32(v, _mm256_mullo_epi32(q, f));
      const __m256i under = _mm256_cmpgt_epi32(_mm256_setzero_si256(), r);  // q one too large
      q = _mm256_add_epi32(q, under);
      r = _mm256_add_epi32(r, _mm256_and_si256(under, f));
      const __m256i over = _mm256_cmpgt_epi32(r, _mm256_sub_epi32(f, one));  // q one too small
      q = _mm256_sub_epi32(q, over);
      r = _mm256_sub_epi32(r, _mm256_and_si256(over, f));
      x[g] = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(q, kProbBits), r), c);
    }
  }
  for (std::size_t g = 0; g < G; ++g) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(state + 8 * g), x[g]);
    words[g].end = out[g];
  }
}
#endif

// The segments' counts as split_sets reads them: each segment's nonzero entries (a few hundred of
// its thousands), and the entries any segment has.
struct SegmentCounts {
  std::size_t part = 0;
  std::vector<std::vector<std::pair<std::uint32_t, std::uint64_t>>> nonzero;
  std::vector<std::uint32_t> entries;   // the entries some segment has, in order
  std::vector<std::uint32_t> contexts;  // where each context's entries start in `entries`, and the end
  SegmentCounts(std::span<const std::uint64_t> counts, std::size_t part_size, std::size_t segments)
      : part(part_size), nonzero(segments) {
    std::vector<std::uint8_t> present(part, 0);
    for (std::size_t k = 0; k < segments; ++k)
      for (std::size_t j = 0; j < part; ++j)
        if (const std::uint64_t c = counts[k * part + j]; c != 0) nonzero[k].emplace_back(std::uint32_t(j), c), present[j] = 1;
    // A context's start where it has entries (a context without any is left out).
    const auto start_context = [&] {
      if (contexts.empty() || contexts.back() != entries.size()) contexts.push_back(std::uint32_t(entries.size()));
    };
    for (std::size_t j = 0; j < part; ++j) {
      if (j % kMaxTokens == 0) start_context();
      if (present[j]) entries.push_back(std::uint32_t(j));
    }
    start_context();  // the end
  }
};

// Segments grouped into table sets by their own statistics: each set of `sets` (a set per
// segment) split in two by k-means on code length, a segment's distance to a group the bits of its
// tokens under the group's counts (every context of `counts`: kMaxTokens entries each). A segment
// that codes best with other segments' tables joins them, wherever it lies in the stream: a GOP's
// planes coded spatially beside those of motion-compensated residuals (a hand-held camera's clip:
// two thirds of them), frames after a cut or an exposure step. The encoder's estimate, tables
// counted, then decides whether a grouping is taken (docs/defaults.md, "Table sets found from the
// segments' statistics").
std::vector<std::uint8_t> split_sets(const SegmentCounts& counts, std::vector<std::uint8_t> sets) {
  const std::size_t segments = sets.size(), part = counts.part;
  if (segments < 2) return sets;
  // A group's counts are smoothed by half a count on the entries some segment has (on all 128
  // tokens of a context, a small group's tables would be mostly smoothing).
  const auto& nonzero = counts.nonzero;
  const auto& entries = counts.entries;
  std::vector<double> sum(part);
  const auto lengths_of = [&](std::span<const std::size_t> members) {
    for (const std::uint32_t j : entries) sum[j] = 0.5;
    for (const std::size_t k : members)
      for (const auto& [j, c] : nonzero[k]) sum[j] += double(c);
    std::vector<double> length(part, 0.0);
    for (std::size_t i = 0; i + 1 < counts.contexts.size(); ++i) {
      const std::uint32_t first = counts.contexts[i], end = counts.contexts[i + 1];
      double total = 0;
      for (std::uint32_t e = first; e < end; ++e) total += sum[entries[e]];
      const double log_total = std::log2(total);
      for (std::uint32_t e = first; e < end; ++e) length[entries[e]] = log_total - std::log2(sum[entries[e]]);
    }
    return length;
  };
  const auto bits = [&](std::size_t k, const std::vector<double>& length) {
    double b = 0;
    for (const auto& [j, c] : nonzero[k]) b += double(c) * length[j];
    return b;
  };
  const std::size_t existing = std::size_t{*std::max_element(sets.begin(), sets.end())} + 1;
  std::size_t next = existing;
  for (std::size_t set = 0; set < existing && next < kMaxTableSets; ++set) {
    std::vector<std::size_t> members;
    for (std::size_t k = 0; k < segments; ++k)
      if (sets[k] == set) members.push_back(k);
    if (members.size() < 2) continue;
    // The new group starts from the segment whose symbols cost most under its set's tables.
    const std::vector<double> whole = lengths_of(members);
    std::size_t seed = members[0];
    double worst = -1;
    for (const std::size_t k : members) {
      std::uint64_t n = 0;
      for (const auto& entry : nonzero[k]) n += entry.second;
      if (n == 0) continue;
      if (const double cost = bits(k, whole) / double(n); cost > worst) worst = cost, seed = k;
    }
    std::vector<std::uint8_t> in_new(segments, 0);
    in_new[seed] = 1;
    for (int round = 0; round < 4; ++round) {
      std::vector<std::size_t> a, b;
      for (const std::size_t k : members) (in_new[k] ? b : a).push_back(k);
      if (a.empty() || b.empty()) break;
      const std::vector<double> la = lengths_of(a), lb = lengths_of(b);
      bool moved = false;
      for (const std::size_t k : members) {
        const std::uint8_t to = bits(k, lb) < bits(k, la) ? 1 : 0;
        moved |= to != in_new[k];
        in_new[k] = to;
      }
      if (!moved) break;
    }
    std::size_t in_b = 0;
    for (const std::size_t k : members) in_b += in_new[k];
    if (in_b == 0 || in_b == members.size()) continue;
    for (const std::size_t k : members)
      if (in_new[k]) sets[k] = static_cast<std::uint8_t>(next);
    ++next;
  }
  return sets;
}

}  // namespace

namespace {

// A symbol's activity from the tokens of its row `t`, of the row above (`up`) and of the one above
// that (`up2`), nullptr where there is none (zeros), at column x of a row of w: 2 left + 2 up +
// up-left + up-right, and with `wide` (the eight-neighbour shape) the token two to the left and the
// one two rows up. The decoder's sums, term for term.
std::uint32_t neighbour_activity(const std::uint8_t* t, const std::uint8_t* up, const std::uint8_t* up2, std::size_t x,
                                 std::size_t w, bool wide) {
  std::uint32_t a = x > 0 ? 2u * t[x - 1] : 0u;
  if (up != nullptr) a += 2u * up[x] + (x > 0 ? up[x - 1] : 0u) + (x + 1 < w ? up[x + 1] : 0u);
  if (wide) a += (x > 1 ? t[x - 2] : 0u) + (up2 != nullptr ? up2[x] : 0u);
  return a;
}

// The activity of column x of a column part of w columns (kOptionCutNeighbours), `t`, `up` and
// `up2` pointing at the part's first column within whole rows, where the part has a neighbouring
// part on its left (`left_part`) or right (`right_part`). When the lanes of a row's parts decode
// together, each has its neighbours' row above (decoded a row step earlier) but not their tokens
// of this row: so the upper-left and upper-right terms at the cuts come from the neighbours, and
// the part's first two columns take each missing left token from the row above (the token above
// it). Without neighbours, neighbour_activity's sum.
std::uint32_t cut_activity(const std::uint8_t* t, const std::uint8_t* up, const std::uint8_t* up2, std::size_t x,
                           std::size_t w, bool wide, bool left_part, bool right_part) {
  const auto above = [&](std::ptrdiff_t i) -> std::uint32_t {
    const bool inside = i >= 0 && i < std::ptrdiff_t(w);
    return up != nullptr && (inside || (i < 0 ? left_part : right_part)) ? up[i] : 0u;
  };
  const auto left = [&](std::ptrdiff_t i) -> std::uint32_t { return i >= 0 ? t[i] : above(i); };
  const std::ptrdiff_t c = std::ptrdiff_t(x);
  std::uint32_t a = 2u * left(c - 1);
  if (up != nullptr) a += 2u * up[x] + above(c - 1) + above(c + 1);
  if (wide) a += left(c - 2) + (up2 != nullptr ? up2[x] : 0u);
  return a;
}

// The tokens' order-0 entropy in each context of `counts` ([context][token], any number of
// contexts), plus their extra bits (`token_bits`): the encoder's estimates.
double context_entropy_bits(std::span<const std::uint64_t> counts, const std::array<std::uint8_t, kMaxTokens>& token_bits) {
  double bits = 0;
  for (std::size_t ctx = 0; ctx < counts.size() / kMaxTokens; ++ctx) {
    const std::uint64_t* c = counts.data() + ctx * kMaxTokens;
    std::uint64_t total = 0;
    for (int k = 0; k < kMaxTokens; ++k) total += c[k];
    for (int k = 0; k < kMaxTokens; ++k)
      if (c[k] > 0) bits += double(c[k]) * (std::log2(double(total) / double(c[k])) + token_bits[k]);
  }
  return bits;
}

}  // namespace

double estimate_striped_bits(std::span<const std::uint32_t> values, std::size_t row_width, std::uint32_t alphabet_size,
                             std::span<const std::uint32_t> rank_of, std::size_t segment_rows, std::size_t segment_period) {
  if (row_width == 0 || values.size() % row_width != 0)
    throw std::invalid_argument("estimate_striped_bits: the symbols are not whole rows");
  if (!rank_of.empty() && rank_of.size() < alphabet_size)
    throw std::invalid_argument("estimate_striped_bits: ranks for fewer values than the alphabet");
  const TokenScheme scheme;
  const std::size_t width = row_width, rows = values.size() / width;
  const ClassTable classes = class_table(kHalfOctaveThresholds);
  std::array<std::uint8_t, kMaxTokens> token_bits{};
  std::array<std::uint32_t, kMaxTokens> token_base{};
  for (std::uint32_t k = 0; k < kMaxTokens; ++k) scheme.describe(k, token_base[k], token_bits[k]);
  // Each value's token, then rows two up, one up and the row itself as tokens (none above the
  // first row).
  std::vector<std::uint8_t> token(alphabet_size);
  for (std::uint32_t v = 0; v < alphabet_size; ++v)
    token[v] = static_cast<std::uint8_t>(scheme.token_of(rank_of.empty() ? v : rank_of[v]));
  // Three rows of tokens, each computed once while consecutive rows are counted.
  std::vector<std::uint8_t> t(3 * width);
  std::array<std::size_t, 3> held{SIZE_MAX, SIZE_MAX, SIZE_MAX};  // the row each third of `t` holds
  auto tokens_at = [&](std::size_t row) -> const std::uint8_t* {
    if (row == SIZE_MAX) return nullptr;
    std::uint8_t* out = t.data() + (row % 3) * width;
    if (held[row % 3] != row) {
      const std::uint32_t* v = values.data() + row * width;
      for (std::size_t x = 0; x < width; ++x) out[x] = token[std::min(v[x], alphabet_size - 1)];
      held[row % 3] = row;
    }
    return out;
  };
  // A model per channel where segments cycle through channels (the coder may give each its tables).
  if (segment_rows == 0 || segment_rows > rows) segment_rows = std::max<std::size_t>(rows, 1);
  const std::size_t channels = std::clamp<std::size_t>(segment_period, 1, kMaxTableSets);
  std::vector<std::uint64_t> h(channels * kLeftClasses * kTableSize, 0);
  // About a quarter of a short stream's rows and an eighth of a long one's; all of a very short one.
  const unsigned k = rows < kSampledRows / 4 ? 0 : rows < kSampledRows ? 2 : 3;
  for (std::size_t row = 0; row < rows; ++row) {
    if (!row_in_sample(row, k)) continue;
    const std::uint8_t* up2 = tokens_at(row >= 2 ? row - 2 : SIZE_MAX);
    const std::uint8_t* up = tokens_at(row >= 1 ? row - 1 : SIZE_MAX);
    const std::uint8_t* cur = tokens_at(row);
    std::uint64_t* hc = h.data() + (row / segment_rows) % channels * kLeftClasses * kTableSize;
    for (std::size_t x = 0; x < width; ++x) {
      const std::uint32_t left = x > 0 ? left_class(cur[x - 1]) : 0;
      ++hc[(left * kMaxContexts + classes[neighbour_activity(cur, up, up2, x, width, true)]) * kMaxTokens + cur[x]];
    }
  }
  return context_entropy_bits(h, token_bits);
}

std::vector<std::uint8_t> encode_striped_rans(std::span<const std::uint32_t> ranks, std::size_t row_width,
                                              std::size_t segment_rows, std::uint64_t alphabet_size,
                                              StripedContext context, std::size_t segment_period,
                                              bool allow_left_classes, [[maybe_unused]] SimdPath path,
                                              std::span<const std::uint8_t> side) {
  if (row_width == 0 || ranks.size() % row_width != 0) {
    throw std::invalid_argument("encode_striped_rans: the symbols are not whole rows");
  }
  const auto out_of_range = [](std::uint8_t c) { return c >= kSideClasses; };
  if (!side.empty() && (side.size() != ranks.size() || std::any_of(side.begin(), side.end(), out_of_range)))
    throw std::invalid_argument("encode_striped_rans: side classes not one per symbol, or out of range");
  const TokenScheme scheme;
  // width, rows, segment_rows: of the rows as coded (with column parts, set below, parts of rows).
  const std::size_t n = ranks.size();
  std::size_t width = row_width, rows = n / width;
  if (segment_rows == 0 || segment_rows > rows) segment_rows = std::max<std::size_t>(rows, 1);
  const std::uint32_t token_count = scheme.token_count(std::max<std::uint64_t>(alphabet_size, 1));

  const Tokens tokens = tokens_of(ranks, alphabet_size, "encode_striped_rans");
  const ClassTable classes = class_table(kHalfOctaveThresholds);
  bool wide = context != StripedContext::six;
  SideTerms terms{};  // what each side class adds to an activity (all zero: no side classes)
  // The class of column x of a row of w columns from its tokens `t`, the row above (`up`), the
  // one above that (`up2`, eight-neighbour shape only) and its side classes `sd`; nullptr: zeros.
  // The decoder's sums, term for term.
  // With `left_part` or `right_part`: of a column part beside others (cut_activity).
  auto class_at = [&](const std::uint8_t* t, const std::uint8_t* up, const std::uint8_t* up2, const std::uint8_t* sd,
                      std::size_t x, std::size_t w, bool left_part = false, bool right_part = false) {
    std::uint32_t a = cut_activity(t, up, up2, x, w, wide, left_part, right_part);
    if (sd != nullptr) a += terms[sd[x] & 15];
    return classes[a];
  };
  // One row's contexts.
  auto row_contexts = [&](const std::uint8_t* t, const std::uint8_t* up, const std::uint8_t* up2, const std::uint8_t* sd,
                          std::uint16_t* k) {
    auto at = [&](std::size_t x) { return class_at(t, up, up2, sd, x, width); };
    const std::size_t edge = std::min<std::size_t>(width, 2);
    for (std::size_t x = 0; x < edge; ++x) k[x] = at(x);
    if (width < 4 || up == nullptr || (wide && up2 == nullptr)) {
      for (std::size_t x = edge; x < width; ++x) k[x] = at(x);
      return;
    }
    std::size_t x = 2;
#ifdef TEZIP_HAVE_AVX2_KERNEL
    if (path >= SimdPath::avx2) x = interior_classes_avx2(t, up, wide ? up2 : nullptr, sd, terms, k, width);
#endif
    const auto side_at = [&](std::size_t i) -> std::uint32_t { return sd != nullptr ? terms[sd[i] & 15] : 0u; };
    if (wide) {
      for (; x + 1 < width; ++x)
        k[x] = classes[2u * t[x - 1] + 2u * up[x] + up[x - 1] + up[x + 1] + t[x - 2] + up2[x] + side_at(x)];
    } else {
      for (; x + 1 < width; ++x) k[x] = classes[2u * t[x - 1] + 2u * up[x] + up[x - 1] + up[x + 1] + side_at(x)];
    }
    k[width - 1] = at(width - 1);
  };
  // Where row `row` (as coded) starts in `tokens` and `ranks`: with P column parts (set below) a
  // segment's rows are its plane rows' first parts, then their second parts, and so on.
  std::size_t column_parts = 1;
  auto row_offset = [&](std::size_t row) {
    if (column_parts == 1) return row * width;
    const std::size_t first = row / segment_rows * segment_rows, plane_rows = std::min(segment_rows, rows - first) / column_parts;
    const std::size_t r = row - first, part = r / plane_rows;
    return (first / column_parts + r - part * plane_rows) * column_parts * width + part * width;
  };
  auto token_row = [&](std::size_t row) { return tokens.data() + row_offset(row); };
  auto row_tokens = [&](std::size_t row) { return row == SIZE_MAX ? nullptr : token_row(row); };
  bool use_side = false;
  auto side_row = [&](std::size_t row) { return use_side ? side.data() + row_offset(row) : nullptr; };
  // With one stripe a row's upper rows are the ones above it; a segment's first row has the
  // previous segment's first row above it (the same place one frame earlier, when segments are
  // planes) and nothing two up. fn(row, upper, two up).
  auto for_each_row = [&](auto&& fn) {
    for (std::size_t row = 0; row < rows; ++row) {
      const std::size_t r = row % segment_rows;
      const std::size_t proxy = row >= segment_rows + r ? row - r - segment_rows : SIZE_MAX;
      fn(row, r > 0 ? row - 1 : proxy, r > 1 ? row - 2 : r == 1 ? proxy : SIZE_MAX);
    }
  };
  // The rows whose neighbours above differ with `stripe_count` stripes: the first row of each
  // stripe, whose upper row is the first row of the same stripe in the previous segment, or none,
  // and (eight neighbours) its second row, whose row two up is that same row.
  // fn(row, upper, two up with the stripes, upper, two up with one stripe).
  auto for_each_first_row = [&](std::size_t stripe_count, auto&& fn) {
    std::array<std::size_t, kMaxLanes> previous_first;
    previous_first.fill(SIZE_MAX);
    std::size_t previous_segment = SIZE_MAX;
    for (std::size_t first = 0; first < rows; first += segment_rows) {
      const Stripes stripes(stripe_count, std::min(segment_rows, rows - first));
      for (std::size_t l = 0; l < stripes.lanes; ++l) {
        const std::size_t row = first + stripes.start[l];
        if (stripes.length(l) > 0) {
          fn(row, previous_first[l], SIZE_MAX, row > first ? row - 1 : previous_segment,
             row > first + 1 ? row - 2 : row > first ? previous_segment : SIZE_MAX);
        }
        if (stripes.length(l) > 1 && wide) fn(row + 1, row, previous_first[l], row, row > first ? row - 1 : previous_segment);
      }
      for (std::size_t l = 0; l < stripes.lanes; ++l)
        previous_first[l] = stripes.length(l) > 0 ? first + stripes.start[l] : SIZE_MAX;
      previous_segment = first;
    }
  };
  std::array<std::uint8_t, kMaxTokens> token_bits{};
  std::array<std::uint32_t, kMaxTokens> token_base{};
  for (std::uint32_t k = 0; k < token_count; ++k) scheme.describe(k, token_base[k], token_bits[k]);
  // The tokens' order-0 entropy per context, plus the extra bits.
  auto estimated_bits = [&](std::span<const std::uint64_t> c) { return context_entropy_bits(c, token_bits); };
  // What the counts cost under a model built from them: each token's code length with the model's
  // quantized frequency (a rare token's probability rounded up to 1 / kProbScale, which the
  // entropy of the counts does not see and more tables of fewer symbols each pay), plus the extra
  // bits. (The entropy instead: cup's abs-2 archive 0.66% larger, Megamind's 0.21%.)
  auto model_bits = [&](std::span<const std::uint64_t> c, const ContextModel& m) {
    double bits = 0;
    for (std::size_t j = 0; j < kTableSize; ++j)
      if (c[j] > 0) bits += double(c[j]) * (double(kProbBits) - std::log2(double(m.freq[j])) + token_bits[j % kMaxTokens]);
    return bits;
  };
  // The estimate of each context shape (where not given) and stripe count: the histogram of one
  // stripe, then the counts of the stripes' first rows moved to their contexts with several
  // (only those rows change, so no symbol is counted again).
  std::vector<std::uint16_t> row_index(width), single_index(width);
  std::vector<std::uint64_t> single(kMaxContexts * kMaxTokens);
  std::vector<std::uint32_t> part(4 * single.size());
  const std::size_t most = striped_rans_lanes(segment_rows, width);
  struct Candidate {
    bool wide;
    std::size_t lanes;
    double bits;
    std::size_t parts = 1;
  };
  std::vector<Candidate> candidates;
  // Side classes: the shift whose activities give the smallest estimate (one stripe, an eighth of
  // the rows, the eight-neighbour shape unless only six may be, and the left classes where they
  // may be taken: without them the estimate also credited side classes with what the left
  // classes find, and chose worse), kept where it saves kMinSideGain.
  std::uint32_t side_shift = 0;
  if (!side.empty()) {
    auto estimate = [&](bool with) {
      use_side = with;
      std::vector<std::uint64_t> h(kLeftClasses * kTableSize, 0);
      for_each_row([&](std::size_t row, std::size_t upper, std::size_t upper2) {
        if (!row_in_sample(row, 3)) return;
        const std::uint8_t* t = token_row(row);
        row_contexts(t, row_tokens(upper), row_tokens(upper2), side_row(row), row_index.data());
        for (std::size_t x = 0; x < width; ++x) {
          const std::uint32_t left = allow_left_classes && x > 0 ? left_class(t[x - 1]) : 0;
          ++h[(left * kMaxContexts + row_index[x]) * kMaxTokens + t[x]];
        }
      });
      double bits = 0;
      for (std::size_t c = 0; c < kLeftClasses; ++c) bits += estimated_bits(std::span(h).subspan(c * kTableSize, kTableSize));
      return bits;
    };
    const double without = estimate(false);
    double best = without;
    for (std::uint32_t shift = 0; shift < kSideShifts; ++shift) {
      terms = side_terms(shift);
      if (const double bits = estimate(true); bits < best) best = bits, side_shift = shift;
    }
    use_side = best < without * (1 - kMinSideGain);
    terms = use_side ? side_terms(side_shift) : SideTerms{};
  }
  // Column parts (kOptionColumnParts) make 16 or 32 lanes (the kernels' vectors) of 16, 8, 4, 2
  // stripes of rows or one: only the contexts of the first two columns after each cut change (their
  // left tokens come from the row above: cut_activity), so a candidate's estimate is its stripes'
  // with those columns' symbols moved. 4 and 2 stripes are not candidates of their own (the
  // portable decoder would run them); 32 stripes need no parts.
  // These estimates count half the rows (row_in_sample) twice and the others not at all, and the
  // candidates move the counts of sampled rows only, by the same weight (the two shapes' passes
  // over every row were a third of this coder's encoding). On cup they came within 0.01% of every
  // row's (docs/performance.md). Streams of fewer than kSampledRows rows count every row once:
  // there a half's estimate strays further, and costs little. Every row is counted below for the
  // tables themselves.
  std::vector<std::uint8_t> weight(rows);
  for (std::size_t row = 0; row < rows; ++row) weight[row] = rows < kSampledRows ? 1 : row_in_sample(row, 1) ? 2 : 0;
  for (const bool shape : {false, true}) {
    if ((context == StripedContext::six && shape) || (context == StripedContext::eight && !shape)) continue;
    wide = shape;
    // Four histograms of every fourth symbol, summed: increments of one count no longer wait on
    // each other (the single histogram was a quarter of this coder's encoding).
    std::fill(part.begin(), part.end(), 0);
    std::fill(single.begin(), single.end(), 0);
    auto flush = [&] {
      for (std::size_t j = 0; j < part.size(); ++j) single[j % single.size()] += std::exchange(part[j], 0);
    };
    std::size_t pending = 0;  // counts added to `part` (a sampled row's twice), kept below 2^32
    for_each_row([&](std::size_t row, std::size_t upper, std::size_t upper2) {
      const std::uint32_t w = weight[row];
      if (w == 0) return;
      const std::uint8_t* t = token_row(row);
      row_contexts(t, row_tokens(upper), row_tokens(upper2), side_row(row), row_index.data());
      std::size_t x = 0;
      for (; x + 4 <= width; x += 4)
        for (std::size_t k = 0; k < 4; ++k) part[k * single.size() + row_index[x + k] * kMaxTokens + t[x + k]] += w;
      for (; x < width; ++x) single[row_index[x] * kMaxTokens + t[x]] += w;
      if ((pending += 2 * width) >= (std::size_t{1} << 31)) {
        flush();
        pending = 0;
      }
    });
    flush();
    candidates.push_back({shape, 1, estimated_bits(single)});
    for (std::size_t stripes = most; stripes >= 1; stripes /= 2) {
      std::vector<std::uint64_t> striped = single;
      // (One stripe's first rows keep their contexts: nothing moves.)
      for_each_first_row(stripes, [&](std::size_t row, std::size_t upper, std::size_t upper2, std::size_t single_upper,
                                      std::size_t single_upper2) {
        const std::uint32_t w = weight[row];
        if (w == 0) return;
        const std::uint8_t* t = token_row(row);
        row_contexts(t, row_tokens(single_upper), row_tokens(single_upper2), side_row(row), single_index.data());
        row_contexts(t, row_tokens(upper), row_tokens(upper2), side_row(row), row_index.data());
        for (std::size_t x = 0; x < width; ++x) {
          striped[single_index[x] * kMaxTokens + t[x]] -= w;
          striped[row_index[x] * kMaxTokens + t[x]] += w;
        }
      });
      if (stripes >= kGroup) candidates.push_back({shape, stripes, estimated_bits(striped)});
      std::vector<std::array<std::size_t, 2>> uppers;  // each row's upper rows with these stripes
      for (const std::size_t p : {2, 4, 8, 16}) {
        const std::size_t w = width / p;
        if ((stripes * p != 16 && stripes * p != 32) || width % p != 0 || w < 8) continue;
        if (uppers.empty()) {
          uppers.resize(rows);
          for_each_row([&](std::size_t row, std::size_t upper, std::size_t upper2) { uppers[row] = {upper, upper2}; });
          for_each_first_row(stripes, [&](std::size_t row, std::size_t upper, std::size_t upper2, std::size_t, std::size_t) {
            uppers[row] = {upper, upper2};
          });
        }
        std::vector<std::uint64_t> cut = striped;
        for (std::size_t row = 0; row < rows; ++row) {
          const std::uint32_t row_weight = weight[row];
          if (row_weight == 0) continue;
          const std::uint8_t* t = token_row(row);
          const std::uint8_t* up = row_tokens(uppers[row][0]);
          const std::uint8_t* up2 = row_tokens(uppers[row][1]);
          const std::uint8_t* sd = side_row(row);
          for (std::size_t k = 1; k < p; ++k)
            for (std::size_t x = k * w; x <= k * w + 1; ++x) {
              const std::size_t q = k * w;  // the part's first column
              const std::size_t whole = class_at(t, up, up2, sd, x, width);
              const std::size_t in_part = class_at(t + q, up ? up + q : up, up2 ? up2 + q : up2, sd ? sd + q : sd, x - q, w,
                                                   true, k + 1 < p);
              cut[whole * kMaxTokens + t[x]] -= row_weight;
              cut[in_part * kMaxTokens + t[x]] += row_weight;
            }
        }
        candidates.push_back({shape, stripes * p, estimated_bits(cut), p});
      }
    }
  }
  // Stripes cost ratio where their first rows lose the rows above (smooth data, few rows a
  // stripe), and their own bytes (kStripeBits) in a small stream: the most lanes whose estimate,
  // those bytes counted, is within kMaxStripeCost of the best with one stripe (sixteenths of one
  // stripe cost the decoded MPEG video's colour planes 0.19% by the estimate where 4 stripes in
  // quarters cost 1.1%, and decode it 2.2x as fast as its one stripe: docs/defaults.md); of
  // those, stripes of whole rows or halves before quarters, quarters before eighths (eighths of 4
  // stripes were 0.4% smaller than halves of 16 on video, but decoded up to 1.1x slower:
  // docs/performance.md, "Column parts"), and then the smaller estimate (of the context shapes
  // too: eight neighbours 7.6% smaller on vtest's lossless GOPs, 0.6% on mire2's; six 1.4% on
  // castle's depth maps).
  for (Candidate& c : candidates) c.bits += double(c.lanes) * kStripeBits;
  double best_single = HUGE_VAL;
  for (const Candidate& c : candidates)
    if (c.lanes == 1) best_single = std::min(best_single, c.bits);
  auto better = [](const Candidate& c, const Candidate& than) {
    if (c.lanes != than.lanes) return c.lanes > than.lanes;
    const std::size_t narrow = c.parts > 2 ? c.parts : 0, than_narrow = than.parts > 2 ? than.parts : 0;
    return narrow != than_narrow ? narrow < than_narrow : c.bits < than.bits;
  };
  const Candidate* chosen = nullptr;
  for (const Candidate& c : candidates) {
    const bool allowed = c.lanes == 1 || c.bits <= best_single * (1 + kMaxStripeCost);
    if (allowed && (chosen == nullptr || better(c, *chosen))) chosen = &c;
  }
  // Column parts: from here on the rows are parts of rows, in their coded order (row_offset).
  if (chosen->parts > 1) {
    column_parts = chosen->parts;
    width /= column_parts;
    rows *= column_parts;
    segment_rows *= column_parts;
  }
  const std::size_t lanes = chosen->lanes;
  wide = chosen->wide;
  // The contexts of the choice: one stripe's, the stripes' first rows patched.
  // With column parts a row's part sees its neighbours at the cuts (cut_activity): its first two
  // columns and its last again.
  std::vector<std::uint16_t, BufferAllocator<std::uint16_t>> index(n);  // every row written below
  auto contexts = [&](std::size_t row, std::size_t upper, std::size_t upper2) {
    const std::uint8_t *t = token_row(row), *up = row_tokens(upper), *up2 = row_tokens(upper2), *sd = side_row(row);
    std::uint16_t* k = index.data() + row * width;
    row_contexts(t, up, up2, sd, k);
    if (column_parts == 1) return;
    const std::size_t first = row / segment_rows * segment_rows;
    const std::size_t part = (row - first) / (std::min(segment_rows, rows - first) / column_parts);
    for (const std::size_t x : {std::size_t{0}, std::size_t{1}, width - 1})
      k[x] = class_at(t, up, up2, sd, x, width, part > 0, part + 1 < column_parts);
  };
  for_each_row(contexts);
  if (lanes > 1) {
    for_each_first_row(lanes, [&](std::size_t row, std::size_t upper, std::size_t upper2, std::size_t, std::size_t) {
      contexts(row, upper, upper2);
    });
  }
  auto for_each_segment = [&](auto&& fn) {
    for (std::size_t first = 0; first < rows; first += segment_rows) {
      const std::size_t count = std::min(segment_rows, rows - first);
      fn(first, Stripes(lanes, count));
    }
  };
  // Each symbol's table: its activity class and, with left classes, the class of its left token
  // (zero, odd or even: after the rank remap, mostly the sign of the residual to the left, which
  // the activity does not see; neighbouring residuals of noise through a spatial transform have
  // opposite signs). Counted per segment, for each left class apart.
  const std::size_t segments = (rows + segment_rows - 1) / segment_rows;
  // Four histograms, one for each column mod 4, summed per segment: consecutive increments of one
  // count (a residual stream is mostly one value) no longer wait on each other (two histograms
  // left this loop a third of the encoder's time). Their 32-bit counts are added to the segment's
  // before 2^31 symbols have gone into them.
  constexpr std::size_t kParts = 4, kPartSize = kLeftClasses * kTableSize;
  std::vector<std::uint64_t> segment_counts(segments * kPartSize, 0);
  std::vector<std::uint32_t> parts(kParts * kPartSize, 0);
  for (std::size_t segment = 0; segment < segments; ++segment) {
    std::uint64_t* c = segment_counts.data() + segment * kPartSize;
    std::uint32_t* h[kParts];
    for (std::size_t p = 0; p < kParts; ++p) h[p] = parts.data() + p * kPartSize;
    auto add_parts = [&] {
      for (std::size_t j = 0; j < kPartSize; ++j) c[j] += std::uint64_t{h[0][j]} + h[1][j] + h[2][j] + h[3][j];
      std::fill(parts.begin(), parts.end(), 0);
    };
    std::size_t pending = 0;  // symbols in the parts
    for (std::size_t row = segment * segment_rows; row < std::min(rows, (segment + 1) * segment_rows); ++row) {
      if ((pending += width) >= (std::size_t{1} << 31)) add_parts(), pending = width;
      std::uint16_t* k = index.data() + row * width;
      const std::uint8_t* t = token_row(row);
      std::size_t x = 1;
#ifdef TEZIP_HAVE_AVX2_KERNEL
      if (path >= SimdPath::avx2) x = table_keys_avx2(t, k, width);
#endif
      for (; x < width; ++x) k[x] = static_cast<std::uint16_t>((left_class(t[x - 1]) * kMaxContexts + k[x]) * kMaxTokens + t[x]);
      k[0] = static_cast<std::uint16_t>(k[0] * kMaxTokens + t[0]);  // nothing to the left: class 0
      for (x = 0; x + kParts <= width; x += kParts)
        for (std::size_t p = 0; p < kParts; ++p) ++h[p][k[x + p]];
      for (; x < width; ++x) ++h[0][k[x]];
    }
    add_parts();
  }
  // Table sets: one, or one per class of segment where the segments' statistics differ more than
  // the extra tables cost. The candidates follow the planes' structure (segment_period channels):
  // one set; a set per channel; and the key frame's channels apart; then each of these split by
  // the segments' own statistics (split_sets), again and again up to kMaxTableSets, every level a
  // candidate. Each with and without left classes; chosen by the code lengths of the models the
  // stream would store (their frequencies as quantized), every stored model counted.
  std::vector<std::vector<std::uint8_t>> groupings{std::vector<std::uint8_t>(segments, 0)};
  if (segment_period > 1 && segment_period <= kMaxTableSets && segments > segment_period) {
    std::vector<std::uint8_t> by_channel(segments), key_apart(segments);
    for (std::size_t k = 0; k < segments; ++k) {
      by_channel[k] = static_cast<std::uint8_t>(k % segment_period);
      key_apart[k] = static_cast<std::uint8_t>(k < segment_period ? segment_period + k : k % segment_period);
    }
    groupings.push_back(std::move(by_channel));
    if (2 * segment_period <= kMaxTableSets && segments > 2 * segment_period) groupings.push_back(std::move(key_apart));
  }
  const SegmentCounts statistics(segment_counts, kPartSize, segments);
  for (std::size_t g = 0, given = groupings.size(); g < given; ++g)
    for (std::vector<std::uint8_t> level = groupings[g];;) {
      std::vector<std::uint8_t> split = split_sets(statistics, level);
      if (split == level) break;
      groupings.push_back(split);
      level = std::move(split);
    }
  std::vector<ContextModel> models;  // [set * classes + left class]
  std::vector<std::uint8_t> set_of;
  bool left_classes = false;
  double best_cost = HUGE_VAL;
  for (const bool split : {false, true}) {
    if (split && !allow_left_classes) continue;
    const std::size_t classes = split ? kLeftClasses : 1;
    for (const auto& grouping : groupings) {
      const std::size_t sets = grouping.empty() ? 1 : std::size_t{*std::max_element(grouping.begin(), grouping.end())} + 1;
      std::vector<std::vector<std::uint64_t>> counts(sets * classes, std::vector<std::uint64_t>(kTableSize, 0));
      for (std::size_t k = 0; k < segments; ++k)
        for (std::size_t c = 0; c < kLeftClasses; ++c) {
          auto& to = counts[grouping[k] * classes + (split ? c : 0)];
          const std::uint64_t* from = segment_counts.data() + (k * kLeftClasses + c) * kTableSize;
          for (std::size_t j = 0; j < kTableSize; ++j) to[j] += from[j];
        }
      std::vector<ContextModel> candidate;
      double cost = sets > 1 ? 8.0 * double(2 + segments) : split ? 8.0 : 0.0;
      std::vector<std::uint8_t> stored;
      for (const auto& c : counts) {
        candidate.push_back(build_model(c, token_count, kHalfOctaveThresholds));
        stored.clear();
        write_model(candidate.back(), stored);
        cost += model_bits(c, candidate.back()) + 8.0 * double(stored.size());
      }
      // Left classes make decoding about 5% slower (three times the tables in cache): taken
      // where they save at least kMinLeftClassGain of the stream.
      if (split ? cost < best_cost * (1 - kMinLeftClassGain) : cost < best_cost) {
        best_cost = cost;
        models = std::move(candidate);
        set_of = grouping;
        left_classes = split;
      }
    }
  }
  const std::size_t models_per_set = left_classes ? kLeftClasses : 1;
  if (!left_classes)
    for (auto& k : index) k = static_cast<std::uint16_t>(k % kTableSize);
  // Per set, its classes' tables one after the other, as `index` counts them: each symbol's
  // frequency, cumulative frequency and reciprocal in one entry (one cache line a step, not three).
  std::vector<std::vector<EncodeEntry>> set_tables(models.size() / models_per_set);
  for (std::size_t k = 0; k < models.size(); ++k) {
    std::vector<EncodeEntry>& t = set_tables[k / models_per_set];
    for (std::size_t j = 0; j < models[k].freq.size(); ++j)
      t.push_back({models[k].reciprocals[j], models[k].freq[j], models[k].cumul[j]});
  }

#ifdef TEZIP_HAVE_AVX2_KERNEL
  std::vector<std::vector<std::uint32_t>> packed_tables(set_tables.size());
  for (std::size_t k = 0; k < set_tables.size(); ++k)
    for (const EncodeEntry& e : set_tables[k]) packed_tables[k].push_back(packed_entry(e.freq, e.cumul));
#endif

  std::vector<BitWriter> extras(lanes);
#ifdef TEZIP_HAVE_AVX2_KERNEL
  // Most symbols of a residual stream have none (ranks below 16): only those that have go
  // through the writer's chain.
  const bool packed_extras = path >= SimdPath::avx2 && alphabet_size <= (std::uint64_t{1} << 24);
  std::vector<std::uint32_t> packed(packed_extras ? width + 8 : 0);
#endif
  for_each_segment([&](std::size_t first, const Stripes& stripes) {
    for (std::size_t l = 0; l < stripes.lanes; ++l)
      for (std::size_t r = 0; r < stripes.length(l); ++r) {
        const std::size_t at = row_offset(first + stripes.start[l] + r);
        const std::uint8_t* row_tokens = tokens.data() + at;
        const std::uint32_t* row_ranks = ranks.data() + at;
        std::size_t x = 0;
#ifdef TEZIP_HAVE_AVX2_KERNEL
        if (packed_extras) {
          const std::size_t n = packed_extras_avx2(row_tokens, row_ranks, width, packed.data(), x);
          extras[l].put_n(n, [&](std::size_t i) { return std::pair<std::uint32_t, unsigned>(packed[i] & 0xFFFFFF, packed[i] >> 24); });
        }
#endif
        extras[l].put_n(width - x, [&](std::size_t i) {
          const std::uint8_t t = row_tokens[x + i];
          return std::pair<std::uint32_t, unsigned>(row_ranks[x + i] - token_base[t], token_bits[t]);
        });
      }
  });

  // rANS runs backwards, last segment first; each group's words are collected in reverse and
  // flipped at the end.
  std::array<std::uint32_t, kMaxLanes> state;
  state.fill(kStateLow);
  // Each group's words: a start at a quarter of its symbols (four bits a symbol), grown as needed.
  std::array<std::size_t, kMaxGroups> group_symbols{};
  for_each_segment([&](std::size_t, const Stripes& stripes) {
    for (std::size_t l = 0; l < stripes.lanes; ++l) group_symbols[l / kGroup] += stripes.length(l) * width;
  });
  std::vector<WordSink> words;
#ifdef TEZIP_HAVE_AVX2_KERNEL
  std::vector<std::uint16_t> interleaved(lanes * width);  // a row step's contexts, [column][stripe]
#endif
  for (std::size_t g = 0; g < group_count(lanes); ++g) words.emplace_back(group_symbols[g] / 4);
  for (std::size_t segment = segments; segment-- > 0;) {
    const EncodeEntry* table = set_tables[set_of[segment]].data();
#ifdef TEZIP_HAVE_AVX2_KERNEL
    const std::uint32_t* packed = packed_tables[set_of[segment]].data();
#endif
    const std::size_t first = segment * segment_rows;
    const Stripes stripes(lanes, std::min(segment_rows, rows - first));
    for (std::size_t r = stripes.longest; r-- > 0;) {
      std::array<const std::uint16_t*, kMaxLanes> row{};
      for (std::size_t g = 0; g < group_count(stripes.lanes); ++g) words[g].make_room(kGroup * width);
      bool all = true;
      for (std::size_t l = 0; l < stripes.lanes; ++l) {
        row[l] = r < stripes.length(l) ? index.data() + (first + stripes.start[l] + r) * width : nullptr;
        all = all && row[l] != nullptr;
      }
#ifdef TEZIP_HAVE_AVX2_KERNEL
      if (all && path >= SimdPath::avx2) {
        if (stripes.lanes == 32) {
          interleave_contexts<4>(row.data(), width, interleaved.data());
          encode_row_avx2<4>(packed, interleaved.data(), width, state.data(), words.data());
          continue;
        }
        if (stripes.lanes == 16) {
          interleave_contexts<2>(row.data(), width, interleaved.data());
          encode_row_avx2<2>(packed, interleaved.data(), width, state.data(), words.data());
          continue;
        }
        if (stripes.lanes == 8) {
          interleave_contexts<1>(row.data(), width, interleaved.data());
          encode_row_avx2<1>(packed, interleaved.data(), width, state.data(), words.data());
          continue;
        }
      }
#endif
      encode_row_portable(table, row.data(), stripes.lanes, width, state.data(), words.data());
    }
  }

  std::vector<std::uint8_t> out;
  write_model(models[0], out);
  append_varint(segment_rows, out);
  const std::size_t sets = models.size() / models_per_set;
  const std::uint8_t options = (sets > 1 ? kOptionTableSets : 0) | (left_classes ? kOptionLeftClasses : 0) |
                              column_parts_option(chosen->parts) | (use_side ? kOptionSide : 0) |
                              (chosen->parts > 1 ? kOptionCutNeighbours : 0);
  out.push_back(static_cast<std::uint8_t>(lanes | (wide ? kEightNeighbours : 0) | (options != 0 ? kOptions : 0)));
  if (options != 0) {
    out.push_back(options);
    if (sets > 1) out.push_back(static_cast<std::uint8_t>(sets));
    if (use_side) out.push_back(static_cast<std::uint8_t>(side_shift));
    for (std::size_t k = 1; k < models.size(); ++k) write_model(models[k], out);
    if (sets > 1) out.insert(out.end(), set_of.begin(), set_of.end());
  }
  for (std::size_t l = 0; l < lanes; ++l) append_u32le(state[l], out);
  std::vector<std::vector<std::uint8_t>> extra_bytes;
  for (auto& e : extras) extra_bytes.push_back(e.finish());
  const std::size_t groups = group_count(lanes);
  for (std::size_t g = 0; g < groups; ++g) append_varint(2 * words[g].size(), out);
  for (const auto& e : extra_bytes) append_varint(e.size(), out);
  // Each group's words, last written first, little-endian, into room made once (a push of a byte
  // at a time was 1% of encoding).
  std::size_t at = out.size();
  for (std::size_t g = 0; g < groups; ++g) at += 2 * words[g].size();
  out.resize(at);
  std::uint8_t* o = out.data() + at;
  for (std::size_t g = groups; g-- > 0;)
    for (std::size_t w = 0; w < words[g].size(); ++w) {
      *--o = static_cast<std::uint8_t>(words[g].data[w] >> 8);
      *--o = static_cast<std::uint8_t>(words[g].data[w]);
    }
  for (const auto& e : extra_bytes) out.insert(out.end(), e.begin(), e.end());
  return out;
}

struct StripedRansDecoder::State {
  Tables tables;
  LaneStates lanes_state;
  std::vector<std::uint8_t, BufferAllocator<std::uint8_t>> extra;  // the stripes' extra bits, each padded
  std::vector<std::uint8_t, BufferAllocator<std::uint8_t>> words;  // the groups' word streams, each padded
  std::array<std::uint64_t, kMaxLanes> extra_size{};    // bytes of each stripe's extra bits
  // width, rows, segment_rows: a stripe's rows as the coder sees them (with P column parts, a
  // P-th of a plane's row each, P times as many); parts: P, else 1.
  std::size_t width = 0, lanes = 0, segment_rows = 0, rows = 0, rows_done = 0, parts = 1;
  std::uint32_t max_rank = 0;
  std::vector<std::uint32_t> symbols;  // empty: ranks out, or with `unzig` zigzag's inverse of them
  bool unzig = false;
  SimdPath path = SimdPath::portable;
  bool simd = false;  // the SIMD kernels can run this stream (lanes, scheme, alphabet, offsets)
  bool wide = false;  // the eight-neighbour context
  bool cut_neighbours = false;  // column parts see their neighbours at the cuts (cut_activity)
  bool left_classes = false;  // each activity class split by the left token's class
  std::size_t classes = 1;    // models per table set: kLeftClasses with left classes
  std::vector<std::uint8_t> set_of;  // the table set of each segment
  bool side = false;   // side classes in the activities
  SideTerms terms{};   // what each adds
  RowBuffers row_buffers{0, 0}, first_row_tokens{0, 0};

  void decode_segment(std::size_t count, std::uint32_t* out, const std::uint8_t* side_classes,
                      const std::uint32_t* next_table);
};

std::size_t striped_rans_column_parts(std::span<const std::uint8_t> bytes, std::uint64_t alphabet_size) {
  std::size_t pos = 0;
  (void)read_model(bytes, pos, alphabet_size);
  (void)read_varint(bytes, pos);
  if (pos >= bytes.size()) throw CodecError("striped rans coder: truncated header");
  if ((bytes[pos] & kOptions) == 0) return 1;
  if (pos + 1 >= bytes.size()) throw CodecError("striped rans coder: truncated header");
  return column_parts_of(bytes[pos + 1]);
}

StripedRansDecoder::StripedRansDecoder(std::span<const std::uint8_t> bytes, std::size_t row_width, std::size_t count,
                                       std::uint64_t alphabet_size, std::span<const std::uint32_t> symbol_of_rank,
                                       SimdPath path)
    : s_(std::make_unique<State>()) {
  if (row_width == 0 || count % row_width != 0) throw CodecError("striped rans coder: the symbols are not whole rows");
  if (alphabet_size == 0 && count > 0) throw CodecError("striped rans coder: empty alphabet");
  if (!symbol_of_rank.empty() && symbol_of_rank.size() != alphabet_size) {
    throw std::invalid_argument("striped rans decoder: symbol table size differs from the alphabet size");
  }
  if (!simd_supported(path)) throw std::invalid_argument("striped rans decoder: this CPU cannot run the kernel path");
  State& st = *s_;
  st.path = path;
  st.width = row_width;
  st.rows = count / row_width;
  std::size_t pos = 0;
  ContextModel first_model = read_model(bytes, pos, alphabet_size);
  const std::uint64_t segment_rows = read_varint(bytes, pos);
  if (pos >= bytes.size()) throw CodecError("striped rans coder: truncated header");
  st.wide = (bytes[pos] & kEightNeighbours) != 0;
  const bool has_options = (bytes[pos] & kOptions) != 0;
  st.lanes = bytes[pos++] & ~(kEightNeighbours | kOptions);
  if (st.lanes < 1 || st.lanes > kMaxLanes) throw CodecError("striped rans coder: bad stripe count");
  std::uint8_t options = 0;
  if (has_options) {
    if (pos >= bytes.size()) throw CodecError("striped rans coder: truncated header");
    options = bytes[pos++];
    constexpr std::uint8_t known = kOptionTableSets | kOptionLeftClasses | kOptionColumnParts | kOptionSide | kOptionCutNeighbours;
    if (options == 0 || (options & ~known) != 0 || column_parts_of(options) == 0 ||
        ((options & kOptionCutNeighbours) != 0 && column_parts_of(options) == 1))
      throw CodecError("striped rans coder: bad options");
  }
  if (const std::size_t parts = column_parts_of(options); parts > 1) {
    if (row_width % parts != 0 || st.lanes % parts != 0 || segment_rows % parts != 0)
      throw CodecError("striped rans coder: column parts that do not divide the width, stripe count or segment");
    st.parts = parts;
    st.cut_neighbours = (options & kOptionCutNeighbours) != 0;
    st.width = row_width / parts;
    st.rows = parts * st.rows;
  }
  if (segment_rows == 0 || segment_rows > std::max<std::size_t>(st.rows, 1)) {
    throw CodecError("striped rans coder: bad segment size");
  }
  st.segment_rows = segment_rows;
  st.left_classes = (options & kOptionLeftClasses) != 0;
  std::size_t sets = 1;
  if (options & kOptionTableSets) {
    if (pos >= bytes.size()) throw CodecError("striped rans coder: truncated header");
    sets = bytes[pos++];
    if (sets < 2 || sets > kMaxTableSets) throw CodecError("striped rans coder: bad table set count");
  }
  if (options & kOptionSide) {
    if (pos >= bytes.size()) throw CodecError("striped rans coder: truncated header");
    const std::uint8_t shift = bytes[pos++];
    if (shift >= kSideClasses) throw CodecError("striped rans coder: bad side class shift");
    st.side = true;
    st.terms = side_terms(shift);
  }
  st.classes = st.left_classes ? kLeftClasses : 1;
  std::vector<ContextModel> models;
  models.push_back(std::move(first_model));
  const std::size_t segments = (st.rows + st.segment_rows - 1) / st.segment_rows;
  st.set_of.assign(segments, 0);
  {
    for (std::size_t k = 1; k < sets * st.classes; ++k) {
      models.push_back(read_model(bytes, pos, alphabet_size));
      if (models[k].contexts != models[0].contexts || models[k].thresholds != models[0].thresholds ||
          models[k].scheme.byte() != models[0].scheme.byte()) {
        throw CodecError("striped rans coder: table sets with different contexts");
      }
    }
    if (sets > 1) {
      if (bytes.size() - pos < segments) throw CodecError("striped rans coder: truncated table set map");
      for (std::size_t k = 0; k < segments; ++k) {
        st.set_of[k] = bytes[pos++];
        if (st.set_of[k] >= sets) throw CodecError("striped rans coder: bad table set");
      }
    }
  }
  const ContextModel& model = models[0];

  Tables& t = st.tables;
  const ClassTable classes = class_table(model.threshold_span());
  for (std::uint32_t a = 0; a < kActivityRange; ++a) t.context_base[a] = std::uint32_t{classes[a]} << kProbBits;
  t.base.fill(0);
  t.extra_bits.fill(0);
  for (std::uint32_t k = 0; k < model.token_count; ++k) {
    std::uint8_t n = 0;
    model.scheme.describe(k, t.base[k], n);
    t.extra_bits[k] = n;
  }
  t.entries.resize(models.size() * kMaxContexts * kProbScale);
  for (std::size_t set = 0; set < models.size(); ++set)
    for (std::size_t c = 0; c < kMaxContexts; ++c) {
      const ContextModel& m = models[set];
      std::uint32_t* e = t.entries.data() + (set * kMaxContexts + c) * kProbScale;
      const std::uint32_t* f = m.freq.data() + std::min(c, m.contexts - 1) * kMaxTokens;
      const std::uint32_t* cu = m.cumul.data() + std::min(c, m.contexts - 1) * kMaxTokens;
      if (c >= m.contexts || std::all_of(f, f + m.token_count, [](std::uint32_t v) { return v == 0; })) {
        // A context no valid stream reaches: decode safely anyway (the state stays the same).
        for (std::uint32_t slot = 0; slot < kProbScale; ++slot) e[slot] = entry(0, slot, kProbScale);
        continue;
      }
      for (std::uint32_t k = 0; k < m.token_count; ++k) {
        // Loaded once: stores to `e` could otherwise alias the frequencies, which the compiler
        // then reloads every slot (the table build was 3% of the C++ Stream on 96x96 GOPs).
        const std::uint32_t first = cu[k], freq = f[k];
        const std::uint32_t base = entry(k, 0, freq, st.left_classes ? left_class(k) : 0);
        std::uint32_t* slots = e + first;
        for (std::uint32_t j = 0; j < freq; ++j) slots[j] = base | (j << 7);
      }
    }
  t.current = t.entries.data();

  LaneStates& s = st.lanes_state;
  if (bytes.size() - pos < 4 * st.lanes) throw CodecError("striped rans coder: truncated states");
  for (std::size_t l = 0; l < st.lanes; ++l) {
    s.x[l] = read_u32le(bytes.data() + pos + 4 * l);
    if (s.x[l] < kStateLow) throw CodecError("striped rans coder: bad initial state");
  }
  pos += 4 * st.lanes;
  const std::size_t groups = group_count(st.lanes);
  std::array<std::uint64_t, kMaxGroups> sizes{};
  for (std::size_t g = 0; g < groups; ++g) {
    sizes[g] = read_varint(bytes, pos);
    if (sizes[g] % 2 != 0) throw CodecError("striped rans coder: bad word stream size");
  }
  std::uint64_t extra_total = 0;
  for (std::size_t l = 0; l < st.lanes; ++l) {
    st.extra_size[l] = read_varint(bytes, pos);
    if (st.extra_size[l] > bytes.size()) throw CodecError("striped rans coder: bad extra-bit stream size");
    extra_total += st.extra_size[l];
  }
  // The word streams are copied, each followed by a row step's worth of zero bytes: the SIMD
  // kernel's unchecked 16-byte loads stay in the buffer for a whole row step from anywhere up to
  // a stream's end, so only a stream read past its end (a damaged one) leaves the kernel; words
  // read there are zeros, as the portable decoder reads them.
  const std::size_t padding = 16 * st.width + 16;
  std::uint64_t word_total = 0;
  for (std::size_t g = 0; g < groups; ++g) {
    if (sizes[g] > bytes.size() - pos - word_total) throw CodecError("striped rans coder: truncated word stream");
    word_total += sizes[g];
  }
  st.words.resize(word_total + groups * padding);
  for (std::size_t g = 0, at = 0; g < groups; ++g) {
    std::copy(bytes.data() + pos, bytes.data() + pos + sizes[g], st.words.data() + at);
    std::fill(st.words.data() + at + sizes[g], st.words.data() + at + sizes[g] + padding, 0);
    s.p[g] = st.words.data() + at;
    s.end[g] = s.p[g] + sizes[g];
    pos += sizes[g];
    at += sizes[g] + padding;
  }
  if (extra_total != bytes.size() - pos) throw CodecError("striped rans coder: extra bits truncated or trailing");
  st.extra.reserve(extra_total + kExtraPadding * st.lanes);
  for (std::size_t l = 0; l < st.lanes; ++l) {
    s.bit_pos[l] = 8 * std::uint64_t{st.extra.size()};
    st.extra.insert(st.extra.end(), bytes.data() + pos, bytes.data() + pos + st.extra_size[l]);
    pos += st.extra_size[l];
    s.extra_limit[l] = st.extra.size();
    st.extra.insert(st.extra.end(), kExtraPadding, 0);
  }
  s.extra = st.extra.data();
  st.max_rank = static_cast<std::uint32_t>(std::min<std::uint64_t>(alphabet_size, std::uint64_t{1} << 32) - 1);
  st.symbols.assign(symbol_of_rank.begin(), symbol_of_rank.end());
  // A map that is the identity, or zigzag's inverse (a stream coded without frequency ranks, its
  // symbols read signed), is computed by the kernels instead of looked up.
  std::uint32_t r = 0;
  if (std::all_of(st.symbols.begin(), st.symbols.end(), [&r](std::uint32_t v) { return v == r++; })) {
    st.symbols.clear();
  } else if (r = 0; std::all_of(st.symbols.begin(), st.symbols.end(),
                                [&r](std::uint32_t v) { return v == std::uint32_t(unzigzag(r++)); })) {
    st.symbols.clear();
    st.unzig = true;
  }
  st.row_buffers = RowBuffers(st.width, st.lanes);
  st.first_row_tokens = RowBuffers(st.width, st.lanes);
  // Offsets grow by at most 4 bytes per symbol; the kernel keeps them in 31 bits.
  const std::uint64_t reach = st.extra.size() + 4 * std::uint64_t{count};
  std::uint32_t max_extra = 0;
  for (std::uint32_t k = 0; k < model.token_count; ++k) max_extra = std::max(max_extra, t.extra_bits[k]);
  st.simd = path >= SimdPath::avx2 && (st.lanes == 8 || st.lanes == 16 || st.lanes == 32) &&
            model.scheme.split_exp == kScheme.split_exp && model.scheme.msb_bits == kScheme.msb_bits &&
            max_extra <= kSimdMaxExtraBits && reach < (std::uint64_t{1} << 31) && model.contexts == kMaxContexts &&
            std::equal(kHalfOctaveThresholds.begin(), kHalfOctaveThresholds.end(), model.thresholds.begin());
}

StripedRansDecoder::~StripedRansDecoder() = default;

void StripedRansDecoder::decode(std::span<std::uint32_t> out, std::span<const std::uint8_t> side) {
  State& st = *s_;
  if (out.size() % st.width != 0 || out.size() / st.width > st.rows - st.rows_done) {
    throw std::invalid_argument("striped rans decoder: not whole rows, or more than the stream holds");
  }
  if (!side.empty() && side.size() != out.size()) throw std::invalid_argument("striped rans decoder: side classes not one a symbol");
  // A stream coded with side classes read without them: not one this caller's encoder wrote.
  if (st.side && side.empty()) throw CodecError("striped rans coder: side classes where none are known");
  const std::uint8_t* sd = st.side ? side.data() : nullptr;
  std::size_t rows = out.size() / st.width;
  std::uint32_t* o = out.data();
  while (rows > 0) {
    // Segments are decoded whole: a request must end on a segment boundary or at the stream's end.
    const std::size_t count = std::min(st.segment_rows, st.rows - st.rows_done);
    const std::size_t segment = st.rows_done / st.segment_rows;
    auto table = [&](std::size_t k) { return st.tables.entries.data() + st.set_of[k] * st.classes * kMaxContexts * kProbScale; };
    st.tables.current = table(segment);
    const std::uint32_t* next = segment + 1 < st.set_of.size() && st.set_of[segment + 1] != st.set_of[segment] ? table(segment + 1) : nullptr;
    // The segment height comes from the stream: a stream whose segments do not fit the caller's
    // requests (a plane at a time) is damaged, not misused (found by tests/fuzz, target chunk).
    if (count > rows) throw CodecError("striped rans: a segment runs past the plane requested");
    st.decode_segment(count, o, sd, next);
    o += count * st.width;
    if (sd != nullptr) sd += count * st.width;
    rows -= count;
    st.rows_done += count;
    if (st.lanes_state.over != 0) throw CodecError("striped rans coder: rank outside the alphabet");
  }
}

bool StripedRansDecoder::uses_side() const { return s_->side; }

void StripedRansDecoder::finish() {
  State& st = *s_;
  if (st.rows_done != st.rows) throw std::logic_error("striped rans decoder: finished before the last symbol");
  const LaneStates& s = st.lanes_state;
  bool clean = !s.overrun;
  for (std::size_t l = 0; l < st.lanes; ++l) clean = clean && s.x[l] == kStateLow;
  for (std::size_t g = 0; g < group_count(st.lanes); ++g) clean = clean && s.p[g] == s.end[g];
  if (!clean) throw CodecError("striped rans coder: corrupt, truncated or trailing stream");
  for (std::size_t l = 0; l < st.lanes; ++l) {
    // Every bit read, the rest of the last byte zero.
    const std::uint64_t begin = 8 * (std::uint64_t{s.extra_limit[l]} - st.extra_size[l]);
    const std::uint64_t used = s.bit_pos[l] - begin, total = 8 * st.extra_size[l];
    const bool exact = used <= total && total - used < 8 &&
                       (used % 8 == 0 || (st.extra[s.bit_pos[l] >> 3] >> (s.bit_pos[l] & 7)) == 0);
    if (!exact) throw CodecError("striped rans coder: extra bits truncated or trailing");
  }
  if (s.over != 0) throw CodecError("striped rans coder: rank outside the alphabet");
}

void StripedRansDecoder::State::decode_segment(std::size_t count, std::uint32_t* out, const std::uint8_t* side_classes,
                                               const std::uint32_t* next_table) {
  const Stripes stripes(lanes, count);
  // The next segment's table set, when it is another, is brought into cache a slice per row step
  // (a set left for a plane or two has been evicted by the planes' symbols in between).
  constexpr std::size_t kLine = 64 / sizeof(std::uint32_t);
  const std::size_t kLines = classes * kMaxContexts * kProbScale / kLine;
  const std::size_t lines_per_step = (kLines + stripes.longest - 1) / std::max<std::size_t>(stripes.longest, 1);
  std::size_t prefetched = 0;
  const Tables& t = tables;
  LaneStates& s = lanes_state;
  const std::uint32_t* map = symbols.empty() ? nullptr : symbols.data();
  RowBuffers& b = row_buffers;
  // The first row's upper row: the previous segment's first row (zeros before the first segment);
  // its row two up: zeros.
  next_above(first_row_tokens.tokens, nullptr, lanes, b.above, simd);
  if (cut_neighbours) add_cut_neighbours(first_row_tokens.tokens.data(), b.above.data(), width, lanes, parts, wide);
  std::array<std::uint32_t, kMaxLanes> active{};
  // Where each stripe's rows go: rows of `stride` values; with P column parts, stripes l < L / P
  // hold the first parts of the segment's rows, stripes l + L / P their second parts, and so on.
  const std::size_t stride = parts * width, plane_rows = count / parts;
  std::array<std::uint32_t*, kMaxLanes> lane_row{}, row{};
  // The next row step's row two up (eight-neighbour context; else none), in next_above's layout:
  // this segment's upper row for the second row step, then the row step before.
  const auto two_up = [&](std::size_t r) -> const std::uint16_t* {
    return !wide ? nullptr : (r == 0 ? first_row_tokens.tokens.data() : b.previous.data()) + lanes;
  };
  for (std::size_t l = 0; l < lanes; ++l) {
    const std::size_t part = std::min(parts - 1, stripes.start[l] / std::max<std::size_t>(plane_rows, 1));
    lane_row[l] = out + (stripes.start[l] - part * plane_rows) * stride + part * width;
  }
  // The SIMD kernel runs whole row steps of 8 or 16 stripes while no word stream has been read
  // past its end (the padding holds a row step's unchecked loads); the rest (a tail row of some
  // stripes, a damaged stream) is decoded the portable way, which reads the same words and bits.
  for (std::size_t r = 0; r < stripes.longest; ++r) {
    bool all = true;
    for (std::size_t l = 0; l < lanes; ++l) {
      active[l] = r < stripes.length(l);
      all = all && active[l];
    }
    for (std::size_t l = 0; l < lanes; ++l) row[l] = lane_row[l] + r * stride;
    if (side_classes != nullptr) {
      // Each stripe's side terms into its activities' upper-row parts (the sums of `above`).
      std::array<const std::uint8_t*, kMaxLanes> side_rows{};
      for (std::size_t l = 0; l < lanes; ++l) side_rows[l] = active[l] ? side_classes + (row[l] - out) : nullptr;
      std::size_t x = 0;
#if defined(__x86_64__) || defined(__i386__)
      if (simd && all && lanes % 16 == 0) x = add_side_avx2(b.above.data(), side_rows.data(), lanes, width, terms);
#endif
      add_side_portable(b.above.data(), side_rows.data(), lanes, x, width, terms);
    }
    bool done = false, sums_done = false;  // sums_done: the kernel left the next row step's `above`
#ifdef TEZIP_HAVE_AVX2_KERNEL
    if (simd && all) {
      bool room = true;
      for (std::size_t g = 0; g < group_count(lanes); ++g) room = room && s.p[g] <= s.end[g];
      if (room) {
        // The AVX-512 kernel while its last measured row step gathered in at most a quarter of
        // its group steps, measured again every 16th row step (the same values either way): for
        // 16 stripes the one whose vectors hold all 16 (1.22x the two-vector kernel's speed on
        // vtest's colour planes, an Intel Xeon: docs/performance.md).
        const bool registers = path == SimdPath::avx512 && (r % 16 == 0 || 4 * s.far_steps <= width * group_count(lanes));
        // The kernels store the symbols to the stripes' rows themselves.
        if (registers && lanes >= 16) {
          const auto kernel = lanes == 32 ? decode_row_zmm<2> : decode_row_zmm<1>;
          kernel(t, b.above.data(), b.tokens.data(), b.values.data(), width, map, unzig, max_rank, wide, s, row.data(),
                 two_up(r));
          sums_done = true;
        } else {
          const auto kernel = registers ? decode_row_avx512<1>
                                        : (lanes == 32 ? decode_row_avx2<4> : lanes == 16 ? decode_row_avx2<2> : decode_row_avx2<1>);
          kernel(t, b.above.data(), b.tokens.data(), b.values.data(), width, map, unzig, max_rank, wide, s, row.data());
        }
        done = true;
      }
    }
#endif
    if (!done) {
      decode_row_portable(t, b.above.data(), b.tokens.data(), b.values.data(), width, lanes, active.data(), map, unzig,
                          max_rank, wide, s);
      scatter_rows(b.values.data(), width, lanes, active.data(), row.data());
    }
    if (!sums_done) next_above(b.tokens, two_up(r), lanes, b.above, simd);
    if (cut_neighbours) add_cut_neighbours(b.tokens.data(), b.above.data(), width, lanes, parts, wide);
    if (r == 0) first_row_tokens.tokens = b.tokens;
    if (wide) std::swap(b.tokens, b.previous);
    if (next_table != nullptr)
      for (std::size_t end = std::min(kLines, prefetched + lines_per_step); prefetched < end; ++prefetched)
        __builtin_prefetch(next_table + prefetched * kLine, 0, 2);
  }
}

namespace {

// side_classes' class of a gradient sum, shifted: the bit width of at most 255 (0..8).
constexpr std::uint8_t side_class(std::uint32_t g) {
  return static_cast<std::uint8_t>(std::bit_width(std::min<std::uint32_t>(255, g)));
}

// One row of side_classes from rows `up`, `f`, `down` of the forecast: columns [x0, x1).
void side_row_portable(const std::uint16_t* up, const std::uint16_t* f, const std::uint16_t* down, std::size_t width,
                       unsigned shift, std::size_t x0, std::size_t x1, std::uint8_t* out) {
  auto diff = [](std::uint32_t a, std::uint32_t b) { return a > b ? a - b : b - a; };
  for (std::size_t x = x0; x < x1; ++x) {
    const std::uint32_t dx = diff(f[x + 1 < width ? x + 1 : x], f[x > 0 ? x - 1 : x]);
    const std::uint32_t g = std::min<std::uint32_t>(0xFFFF, dx + diff(down[x], up[x]));  // saturated, as AVX2's adds
    out[x] = side_class(g >> shift);
  }
}

#ifdef TEZIP_HAVE_AVX2_KERNEL
[[gnu::target("avx2")]] inline __m256i load16(const std::uint16_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
[[gnu::target("avx2")]] inline __m256i abs_diff16(__m256i a, __m256i b) {
  return _mm256_sub_epi16(_mm256_max_epu16(a, b), _mm256_min_epu16(a, b));
}

// Sixteen gradient sums from column `at`, saturated and shifted, at most 32767 (packus reads
// signed lanes).
[[gnu::target("avx2")]] inline __m256i side_gradient(const std::uint16_t* up, const std::uint16_t* f, const std::uint16_t* down,
                                                     std::size_t at, __m128i count, __m256i cap) {
  const __m256i across = abs_diff16(load16(f + at + 1), load16(f + at - 1)), down_up = abs_diff16(load16(down + at), load16(up + at));
  const __m256i g = _mm256_adds_epu16(across, down_up);
  return _mm256_min_epu16(_mm256_srl_epi16(g, count), cap);
}

// Columns [1, x) of a row, thirty-two a step, x returned (the rest the portable way): all but the
// last where the row has 34 columns or more.
[[gnu::target("avx2")]] std::size_t side_row_avx2(const std::uint16_t* up, const std::uint16_t* f, const std::uint16_t* down,
                                                  std::size_t width, unsigned shift, std::uint8_t* out) {
  const __m128i count = _mm_cvtsi32_si128(int(shift));
  // The bit width of a byte from its nibbles: 4 + that of the high one, or that of the low one.
  const __m256i high_widths = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 5, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8));
  const __m256i low_widths = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4));
  const __m256i nibble = _mm256_set1_epi8(0x0F), cap = _mm256_set1_epi16(0x7FFF);
  if (width < 34) return 1;
  for (std::size_t x = 1;; x += 32) {
    if (x + 33 > width) x = width - 33;  // the last columns but one, some of them again
    // Columns x .. x + 31; f[x + 32] is the last value read.
    const __m256i g0 = side_gradient(up, f, down, x, count, cap), g1 = side_gradient(up, f, down, x + 16, count, cap);
    const __m256i g = _mm256_permute4x64_epi64(_mm256_packus_epi16(g0, g1), 0xD8);  // min(255, g), in column order
    const __m256i high = _mm256_shuffle_epi8(high_widths, _mm256_and_si256(_mm256_srli_epi16(g, 4), nibble));
    const __m256i low = _mm256_shuffle_epi8(low_widths, _mm256_and_si256(g, nibble));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x), _mm256_max_epu8(high, low));
    if (x + 33 >= width) break;
  }
  return width - 1;
}
#endif

}  // namespace

void side_classes(std::span<const std::uint16_t> forecast, std::size_t width, std::uint32_t max_value,
                  std::span<std::uint8_t> out, SimdPath path) {
  if (width == 0 || forecast.size() % width != 0 || out.size() != forecast.size())
    throw std::invalid_argument("side_classes: not whole rows, or an output of another size");
  const unsigned bits = static_cast<unsigned>(std::bit_width(std::max<std::uint32_t>(max_value, 1)));
  const unsigned shift = bits > 8 ? bits - 8 : 0;  // so that the sums shifted stay below 2^15
  const std::size_t height = forecast.size() / width;
  for (std::size_t y = 0; y < height; ++y) {
    const std::uint16_t* f = forecast.data() + y * width;
    const std::uint16_t* up = y > 0 ? f - width : f;
    const std::uint16_t* down = y + 1 < height ? f + width : f;
    std::uint8_t* o = out.data() + y * width;
    std::size_t x = 1;
#ifdef TEZIP_HAVE_AVX2_KERNEL
    if (path >= SimdPath::avx2 && width >= 18) x = side_row_avx2(up, f, down, width, shift, o);
#else
    (void)path;
#endif
    side_row_portable(up, f, down, width, shift, 0, 1, o);
    side_row_portable(up, f, down, width, shift, std::min(x, width), width, o);
  }
}

void decode_striped_rans(std::span<const std::uint8_t> bytes, std::size_t row_width, std::uint64_t alphabet_size,
                         std::span<std::uint32_t> out, std::span<const std::uint32_t> symbol_of_rank, SimdPath path) {
  StripedRansDecoder decoder(bytes, row_width, out.size(), alphabet_size, symbol_of_rank, path);
  decoder.decode(out);
  decoder.finish();
}

}  // namespace tezip::codecs
