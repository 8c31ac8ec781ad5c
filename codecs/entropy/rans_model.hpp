#pragma once
// The context model that both static rANS coders share (rans_coder.cpp, striped_rans.cpp): ranks
// become tokens and raw extra bits, tokens are coded with one frequency table per context, the
// context is a class of an "activity" summed from already decoded neighbour tokens. Internal to
// codecs/: not an entropy coder of its own.
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "codecs/buffer_pool.hpp"
#include "codecs/simd.hpp"

namespace tezip::codecs::rans {

inline constexpr int kProbBits = 11;
inline constexpr std::uint32_t kProbScale = std::uint32_t{1} << kProbBits;
inline constexpr std::uint32_t kSlotMask = kProbScale - 1;
inline constexpr std::uint32_t kStateLow = std::uint32_t{1} << 16;  // states live in [kStateLow, 2^32)
inline constexpr int kMaxTokens = 128;                               // a token fits in 7 bits of a table entry
inline constexpr int kMaxContexts = 16;
// Activity is 2 left + 2 up + up-left + up-right tokens (or 3 + 2 + 1 of the last three in 1-D);
// the striped coder's eight-neighbour shape adds the tokens two to the left and two rows up, and
// its side classes (codecs/entropy/striped_rans.hpp) up to kMaxSideActivity.
inline constexpr std::uint32_t kMaxSideActivity = 7;
inline constexpr std::uint32_t kActivityRange = 8 * (kMaxTokens - 1) + 1 + kMaxSideActivity;

// Ranks below 2^split are tokens of their own; above, the token is the exponent and the top `msb`
// mantissa bits, the lower mantissa bits go raw (JPEG XL's hybrid integers). Measured on Laplacian
// residuals (bits/symbol at scales 0.3, 1, 30): split 4 / msb 2 gives 1.736, 3.305, 8.218; msb 1
// costs 0.4% at scale 30, split 3 or 5 no better. 4 / 2 is also the finest whose tokens fit in 7 bits.
struct TokenScheme {
  int split_exp = 4;
  int msb_bits = 2;

  bool valid() const { return split_exp >= 0 && split_exp <= 8 && msb_bits >= 0 && msb_bits <= split_exp; }
  std::uint8_t byte() const { return static_cast<std::uint8_t>(split_exp | (msb_bits << 4)); }
  static TokenScheme from_byte(std::uint8_t b) { return {b & 0x0F, b >> 4}; }

  std::uint32_t token_of(std::uint32_t rank) const {
    if (rank < (std::uint32_t{1} << split_exp)) return rank;
    const int n = std::bit_width(rank) - 1;
    const std::uint32_t msb = (rank >> (n - msb_bits)) & ((std::uint32_t{1} << msb_bits) - 1);
    return (std::uint32_t{1} << split_exp) + (static_cast<std::uint32_t>(n - split_exp) << msb_bits) + msb;
  }

  // Tokens an alphabet of this size can produce (ranks are 32-bit, so the alphabet is capped there).
  std::uint32_t token_count(std::uint64_t alphabet_size) const;
  // The smallest rank of `token` and the number of raw bits that follow it.
  void describe(std::uint32_t token, std::uint32_t& base, std::uint8_t& extra_bits) const;
};

// The token of every rank under the default scheme; throws std::invalid_argument("<who>: rank
// outside the alphabet") for a rank >= alphabet_size. AVX2 computes the same tokens from each
// rank's float (its exponent and top mantissa bits) where the alphabet is below 2^24. The buffer
// comes from the pool, unzeroed (a stream's tokens are as many as its symbols).
using Tokens = std::vector<std::uint8_t, BufferAllocator<std::uint8_t>>;
Tokens tokens_of(std::span<const std::uint32_t> ranks, std::uint64_t alphabet_size, const char* who,
                 SimdPath path = simd_path());

// Where each context starts on the activity scale: about half-octave steps of the neighbours' mean
// token, fine at the low end where most residuals are.
inline constexpr std::array<std::uint32_t, 15> kDefaultThresholds = {1, 2, 3, 5, 7, 10, 14, 20, 28, 40, 56, 80, 112, 160, 224};
// The striped coder's: exact half octaves above 4, so that the context of an activity a >= 4 is
// 2 floor(log2 a) + the bit below the top one, min 15 (the exponent and first mantissa bit of
// float(a)) and a SIMD decoder computes it instead of looking it up.
inline constexpr std::array<std::uint32_t, 15> kHalfOctaveThresholds = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192};

using ClassTable = std::array<std::uint8_t, kActivityRange>;  // activity -> context
ClassTable class_table(std::span<const std::uint32_t> thresholds);

// The frequency tables of a stream: what the header stores.
struct ContextModel {
  TokenScheme scheme;
  std::uint32_t token_count = 0;
  std::size_t contexts = 0;
  std::array<std::uint32_t, kMaxContexts - 1> thresholds{};  // contexts - 1 of them, increasing
  std::vector<std::uint32_t> freq;                            // [context * kMaxTokens + token], each context sums to kProbScale or is all 0
  std::vector<std::uint32_t> cumul;                           // the same layout, running sums
  std::vector<std::uint64_t> reciprocals;                     // the same layout, reciprocal(freq) (encoder only)

  std::span<const std::uint32_t> threshold_span() const { return {thresholds.data(), contexts - 1}; }
};

// The model of the default scheme and `thresholds` for `counts` ([context * kMaxTokens + token]).
ContextModel build_model(std::span<const std::uint64_t> counts, std::uint32_t token_count,
                         std::span<const std::uint32_t, 15> thresholds = kDefaultThresholds);
// Appends scheme byte, context count, thresholds and frequency tables.
void write_model(const ContextModel& model, std::vector<std::uint8_t>& out);
// Reads what write_model wrote at `pos` and advances it; throws CodecError on anything it cannot
// have written, or on a scheme too fine for an alphabet of `alphabet_size`.
ContextModel read_model(std::span<const std::uint8_t> bytes, std::size_t& pos, std::uint64_t alphabet_size);

// Scales counts to frequencies summing to kProbScale, every present token at least 1.
void normalize(std::span<const std::uint64_t> counts, std::span<std::uint32_t> freq);

// Writes raw bits LSB first (the extra bits of both rANS coders), gathered in a 64-bit accumulator
// and stored 32 bits at a time. put_n writes n values in one loop with one check for room: the
// striped encoder's rows, where pushing byte by byte behind a branch had been a fifth of its time.
class BitWriter {
 public:
  void put(std::uint32_t value, unsigned nbits) {  // nbits <= 32, value < 2^nbits
    put_n(1, [&](std::size_t) { return std::pair<std::uint32_t, unsigned>(value, nbits); });
  }
  // value(i) -> (bits, their count <= 32) for i < n.
  template <class Value>
  void put_n(std::size_t n, Value value) {
    if (out_.size() < size_ + 4 * n + 4) out_.resize(std::max(2 * out_.size(), size_ + 4 * n + 4));
    std::uint8_t* out = out_.data() + size_;
    std::uint64_t acc = acc_;
    unsigned count = count_;  // < 32 between values
    for (std::size_t i = 0; i < n; ++i) {
      const auto [bits, nbits] = value(i);
      acc |= std::uint64_t(bits) << count;
      count += nbits;
      if (count >= 32) {
        const auto word = static_cast<std::uint32_t>(acc);
        for (int b = 0; b < 4; ++b) out[b] = static_cast<std::uint8_t>(word >> (8 * b));
        out += 4;
        acc >>= 32;
        count -= 32;
      }
    }
    size_ = std::size_t(out - out_.data());
    acc_ = acc;
    count_ = count;
  }
  std::vector<std::uint8_t> finish() {
    out_.resize(size_);
    for (unsigned b = 0; b < count_; b += 8) out_.push_back(static_cast<std::uint8_t>(acc_ >> b));
    acc_ = 0, count_ = 0, size_ = 0;
    return std::move(out_);
  }

 private:
  std::vector<std::uint8_t> out_;  // the first size_ bytes written, the rest room
  std::size_t size_ = 0;
  std::uint64_t acc_ = 0;
  unsigned count_ = 0;
};

// Reads the extra bits. Past the end it supplies zero bits and counts them, so the hot loop has no
// error branch; consumed_exactly() then tells whether the stream was consumed exactly.
class BitReader {
 public:
  explicit BitReader(std::span<const std::uint8_t> bytes)
      : begin_(bytes.data()), p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  std::uint32_t read(unsigned nbits) {  // nbits <= 32
    if (count_ < nbits) refill();
    const auto v = static_cast<std::uint32_t>(buf_ & ((std::uint64_t{1} << nbits) - 1));
    buf_ >>= nbits;
    count_ -= nbits;
    return v;
  }

  bool consumed_exactly() const {
    const std::uint64_t supplied = 8 * static_cast<std::uint64_t>(p_ - begin_) + padded_;
    const std::uint64_t used = supplied - count_;
    const std::uint64_t real = 8 * static_cast<std::uint64_t>(end_ - begin_);
    return p_ == end_ && used <= real && real - used < 8 && buf_ == 0;
  }

 private:
  // Out of line: it runs once per ~4 bytes of extra bits, and keeping read() small lets the decoding
  // loops inline it.
  [[gnu::noinline]] void refill();

  const std::uint8_t* begin_;
  const std::uint8_t* p_;
  const std::uint8_t* end_;
  std::uint64_t buf_ = 0;
  unsigned count_ = 0;
  std::uint64_t padded_ = 0;
};

inline std::uint32_t read_u32le(const std::uint8_t* p) {
  return p[0] | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24);
}
inline void append_u32le(std::uint32_t x, std::vector<std::uint8_t>& out) {
  for (int b = 0; b < 4; ++b) out.push_back(static_cast<std::uint8_t>(x >> (8 * b)));
}

// ceil(2^43 / f) for a frequency f in [1, kProbScale]: x / f == (x * reciprocal(f)) >> 43 for
// every 32-bit x (the error of the rounded-up reciprocal stays below 2^32 / 2^43 = 2^-11 <= 1/f).
inline std::uint64_t reciprocal(std::uint32_t f) { return ((std::uint64_t{1} << 43) + f - 1) / f; }
inline std::uint32_t divide(std::uint32_t x, std::uint64_t reciprocal) {
  return static_cast<std::uint32_t>((static_cast<unsigned __int128>(x) * reciprocal) >> 43);
}

// One rANS encoding step of a symbol with frequency f (reciprocal r = reciprocal(f)) and
// cumulative frequency c: emits at most one 16-bit word into `words` (collected in reverse: the
// caller flips them).
// `words`: anything with push_back(std::uint16_t).
template <class Words>
inline void encode_step(std::uint32_t& x, std::uint32_t f, std::uint64_t r, std::uint32_t c, Words& words) {
  if (std::uint64_t{x} >= (std::uint64_t{f} << (32 - kProbBits))) {
    words.push_back(static_cast<std::uint16_t>(x));
    x >>= 16;
  }
  const std::uint32_t q = divide(x, r);
  x = (q << kProbBits) + (x - q * f) + c;
}

}  // namespace tezip::codecs::rans
