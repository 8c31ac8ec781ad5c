#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tezip::codecs {

// Probabilities are P(bit == 0) in units of 2^-kProbBits. 15 bits rather than LZMA's 11 lets a very
// skewed context (the zero symbol of coarsely quantized residuals) cost under 0.01 bit.
inline constexpr int kProbBits = 15;
inline constexpr std::uint32_t kProbOne = std::uint32_t{1} << kProbBits;

// An adaptive bit probability. It starts with large steps (a running average over the first few
// bits) so that the many contexts of a small chunk learn fast, then settles at a fixed rate so it keeps
// following statistics that drift across a frame.
struct BitModel {
  std::uint16_t p = kProbOne / 2;
  std::uint8_t seen = 0;
  static constexpr int kMinP = 31;

  void update(int bit) {
    const int shift = kShiftBySeen[seen];
    seen = static_cast<std::uint8_t>(seen + (seen != 255));
    // Branch-free move towards the target; floor division keeps p within [kMinP, kProbOne - kMinP],
    // so no bit is ever coded with (almost) zero width.
    const int target = bit ? kMinP : static_cast<int>(kProbOne) - kMinP;
    p = static_cast<std::uint16_t>(p + ((target - static_cast<int>(p)) >> shift));
  }

 private:
  // Step 2^-shift after `seen` bits: about 1/(seen+2) early on, 1/128 once well established (measured
  // on residual data: slower final rates compress better, the fast start matters for small chunks).
  static constexpr auto kShiftBySeen = [] {
    std::array<std::uint8_t, 256> shifts{};
    for (int n = 0; n < 256; ++n) {
      shifts[n] = n < 1 ? 1 : n < 3 ? 2 : n < 7 ? 3 : n < 15 ? 4 : n < 31 ? 5 : n < 127 ? 6 : 7;
    }
    return shifts;
  }();
};

// LZMA-style binary range encoder: 32-bit range, 64-bit low, carries resolved through a cached byte.
class RangeEncoder {
 public:
  void encode(BitModel& model, int bit) {
    const std::uint32_t bound = (range_ >> kProbBits) * model.p;
    if (bit == 0) {
      range_ = bound;
    } else {
      low_ += bound;
      range_ -= bound;
    }
    model.update(bit);
    while (range_ < kTop) {
      range_ <<= 8;
      shift_low();
    }
  }

  // Equiprobable bits, most significant first; nbits <= 32.
  void encode_direct(std::uint32_t value, int nbits) {
    for (int i = nbits - 1; i >= 0; --i) {
      range_ >>= 1;
      if ((value >> i) & 1) low_ += range_;
      while (range_ < kTop) {
        range_ <<= 8;
        shift_low();
      }
    }
  }

  // Flushes and hands over the coded bytes; the encoder must not be used afterwards.
  std::vector<std::uint8_t> finish();

 private:
  static constexpr std::uint32_t kTop = std::uint32_t{1} << 24;
  void shift_low();

  std::uint64_t low_ = 0;
  std::uint32_t range_ = 0xFFFFFFFF;
  std::uint8_t cache_ = 0;
  std::uint64_t pending_ = 1;  // bytes held back: cache_ plus any 0xFF run a carry may still change
  bool first_byte_ = true;     // the very first byte is always 0, so it is never written
  std::vector<std::uint8_t> out_;
};

// Decoder for RangeEncoder's output. A valid stream is consumed exactly; reads past the end yield
// zeros (no branch to throw from the hot path) and `consumed_exactly()` tells the caller afterwards.
class RangeDecoder {
 public:
  explicit RangeDecoder(std::span<const std::uint8_t> bytes) : bytes_(bytes) {
    for (int i = 0; i < 4; ++i) code_ = (code_ << 8) | next_byte();
  }

  int decode(BitModel& model) {
    const std::uint32_t bound = (range_ >> kProbBits) * model.p;
    // Written so the compiler can use conditional moves: the bit is data, not a predictable branch.
    const int bit = code_ >= bound ? 1 : 0;
    const std::uint32_t mask = 0u - static_cast<std::uint32_t>(bit);
    code_ -= bound & mask;
    range_ = (bound & ~mask) | ((range_ - bound) & mask);
    model.update(bit);
    while (range_ < kTop) {
      range_ <<= 8;
      code_ = (code_ << 8) | next_byte();
    }
    return bit;
  }

  std::uint32_t decode_direct(int nbits) {
    std::uint32_t value = 0;
    for (int i = 0; i < nbits; ++i) {
      range_ >>= 1;
      const std::uint32_t bit = code_ >= range_ ? 1 : 0;
      code_ -= range_ & (0u - bit);
      value = (value << 1) | bit;
      while (range_ < kTop) {
        range_ <<= 8;
        code_ = (code_ << 8) | next_byte();
      }
    }
    return value;
  }

  bool consumed_exactly() const { return pos_ == bytes_.size(); }

 private:
  static constexpr std::uint32_t kTop = std::uint32_t{1} << 24;
  std::uint8_t next_byte() {
    const std::uint8_t b = pos_ < bytes_.size() ? bytes_[pos_] : 0;
    ++pos_;
    return b;
  }

  std::span<const std::uint8_t> bytes_;
  std::size_t pos_ = 0;
  std::uint32_t code_ = 0;
  std::uint32_t range_ = 0xFFFFFFFF;
};

// The adaptive context coder for rank streams. Each rank is binarized as an Elias-gamma style code of
// rank + 1 (a unary bucket, then mantissa bits) and every binary decision is coded under a context
// made from the already decoded neighbours (left, upper, upper-left, upper-right in rows of
// `row_width`; row_width == 0 means a 1-D stream). All ranks must be < alphabet_size.
std::vector<std::uint8_t> encode_adaptive(std::span<const std::uint32_t> ranks, std::size_t row_width,
                                          std::uint64_t alphabet_size);
// Decodes out.size() ranks. Throws CodecError when a rank is >= alphabet_size or when the stream is
// not consumed exactly (truncated or trailing bytes).
void decode_adaptive(std::span<const std::uint8_t> bytes, std::size_t row_width, std::uint64_t alphabet_size,
                     std::span<std::uint32_t> out);

}  // namespace tezip::codecs
