#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "codecs/simd.hpp"

namespace tezip::codecs {

// The static context rANS coder of rans_coder.hpp (same tokens, contexts and tables), with the rows
// cut into up to 32 horizontal stripes, one rANS state each. All stripes advance together, one
// column at a time, so one SIMD instruction steps 8 of them: their contexts come from their own
// left and upper neighbours, their table lookups are gathers, their 16-bit words come from one word
// stream per group of 8 stripes. The portable decoder gives the same ranks on any CPU.
// The rows go in segments of `segment_rows` (a plane; 0: one segment), each cut into the same
// number of stripes, so that a decoder delivers a whole segment at a time, in order, while the
// rANS states and the word streams run on across segments.
// The neighbours whose tokens sum to a symbol's activity (its context): `six` (2 left + 2 up +
// up-left + up-right, all that streams before chunk version 5 use) or `eight` (six, plus the token
// two to the left and the one two rows up). `measured`: the encoder estimates the stream's size
// under both and takes the smaller.
enum class StripedContext { six, eight, measured };

// `ranks.size()` must be a multiple of row_width (> 0). All ranks must be < alphabet_size.
// `segment_period`: segments come in cycles of this many (a frame's channels, when segments are
// planes); the encoder then also estimates a table set per channel, and the key frame's apart, and
// stores them where they make the stream smaller (colour planes; a gray stream has one set).
// `allow_left_classes`: the encoder may also split each context by the class of the left token
// (zero, odd, even), where its estimate, the three times larger tables counted, is smaller.
// `path`: the activity classes' AVX2 kernel or the portable loop; the same stream either way.
// `side`: empty, or one class 0..kSideClasses - 1 per rank, known to the decoder before it decodes
// the rank (the forecast's detail at that pixel: side_classes below). The encoder may add
// max(0, class - s), at most kMaxSideActivity, to each activity, for the s whose estimate is
// smallest, where that saves at least 1% (a dimension of the context that costs no tables: on the
// bounded residuals of camera and film, where edges of the forecast are where it misses).
inline constexpr std::uint32_t kSideClasses = 16;
std::vector<std::uint8_t> encode_striped_rans(std::span<const std::uint32_t> ranks, std::size_t row_width,
                                              std::size_t segment_rows, std::uint64_t alphabet_size,
                                              StripedContext context = StripedContext::measured,
                                              std::size_t segment_period = 1, bool allow_left_classes = true,
                                              SimdPath path = simd_path(), std::span<const std::uint8_t> side = {});

// The coder's estimate, in bits, of `values` (rows of `row_width`, each below alphabet_size > 0)
// coded as the ranks rank_of[v] (empty: the values themselves): the tokens' entropy in the
// eight-neighbour contexts split by the left class, plus the extra bits, over about an eighth of
// the rows (a quarter of a short stream's, all of a very short one's). For comparing rank orders:
// the bits of the rows it counts, not the stream's size.
double estimate_striped_bits(std::span<const std::uint32_t> values, std::size_t row_width, std::uint32_t alphabet_size,
                             std::span<const std::uint32_t> rank_of = {}, std::size_t segment_rows = 0,
                             std::size_t segment_period = 1);

// The side class of each pixel of a forecast plane (rows of `width`): the bit width of its central
// gradient |f(x+1) - f(x-1)| + |f(y+1) - f(y-1)| (edges repeated) over 2^(bits - 8) (bits: of
// max_value; 8-bit data as it is), at most kSideClasses - 1. `path`: AVX2 or the portable loop,
// the same classes.
void side_classes(std::span<const std::uint16_t> forecast, std::size_t width, std::uint32_t max_value,
                  std::span<std::uint8_t> out, SimdPath path = simd_path());

// Decodes a stream of `count` ranks (or, with `symbol_of_rank`, their symbols) segment by segment,
// through the kernels of `path` (simd_supported(path) must hold). Throws CodecError on anything the
// encoder cannot have written: in the constructor for the header, in decode() for ranks outside the
// alphabet, in finish() for a stream that was not consumed exactly (a corrupt stream may decode to
// garbage until then; callers check finish() before they trust the symbols).
class StripedRansDecoder {
 public:
  StripedRansDecoder(std::span<const std::uint8_t> bytes, std::size_t row_width, std::size_t count,
                     std::uint64_t alphabet_size, std::span<const std::uint32_t> symbol_of_rank = {},
                     SimdPath path = simd_path());
  ~StripedRansDecoder();
  StripedRansDecoder(const StripedRansDecoder&) = delete;
  StripedRansDecoder& operator=(const StripedRansDecoder&) = delete;

  // The next out.size() symbols: whole segments, or up to the end of the stream. `side`: their
  // side classes, as the encoder was given them (a stream coded with them needs them).
  void decode(std::span<std::uint32_t> out, std::span<const std::uint8_t> side = {});
  bool uses_side() const;  // whether decode() needs them
  void finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// All of a stream at once.
void decode_striped_rans(std::span<const std::uint8_t> bytes, std::size_t row_width, std::uint64_t alphabet_size,
                         std::span<std::uint32_t> out, std::span<const std::uint32_t> symbol_of_rank = {},
                         SimdPath path = simd_path());

// The column parts P of a stream encode_striped_rans wrote (1: none): from 2 on, a reader of
// chunk version 19 (the cuts' neighbours, sixteenths). Throws CodecError on a truncated header.
std::size_t striped_rans_column_parts(std::span<const std::uint8_t> bytes, std::uint64_t alphabet_size);

// The most stripes the encoder uses for segments of `rows` rows of `row_width` (it takes fewer, down
// to one, or fewer in column parts, when their first rows and their own bytes would cost more than
// 1% of the estimated size).
std::size_t striped_rans_lanes(std::size_t rows, std::size_t row_width);

}  // namespace tezip::codecs
