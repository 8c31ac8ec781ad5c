#pragma once
// LEB128 varints: the one implementation behind the archive's ByteWriter/ByteReader
// (format/byte_io.hpp) and the coders' headers (codecs/rank_remap.hpp, symbol_coder, rans).
// Seven bits per byte, least significant first, the high bit set on every byte but the last.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "codecs/codec_error.hpp"

namespace tezip::codecs {

enum class VarintStatus { ok, truncated, overflow };

// Decodes the varint at bytes[pos] into `value` and advances `pos` past it. `truncated` when the
// bytes end first; `overflow` when it does not fit 64 bits (a tenth byte above 1, or more than ten
// bytes). On failure `value` and `pos` are unspecified.
inline VarintStatus decode_varint(std::span<const std::uint8_t> bytes, std::size_t& pos, std::uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= bytes.size()) return VarintStatus::truncated;
    const std::uint8_t b = bytes[pos++];
    if (shift == 63 && b > 1) return VarintStatus::overflow;
    value |= std::uint64_t(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return VarintStatus::ok;
  }
  return VarintStatus::overflow;
}

inline void append_varint(std::uint64_t value, std::vector<std::uint8_t>& out) {
  while (value >= 0x80) {
    out.push_back(std::uint8_t(value | 0x80));
    value >>= 7;
  }
  out.push_back(std::uint8_t(value));
}

// Throws CodecError on a truncated or over-long (> 64-bit) varint.
inline std::uint64_t read_varint(std::span<const std::uint8_t> bytes, std::size_t& pos) {
  std::uint64_t value = 0;
  switch (decode_varint(bytes, pos, value)) {
    case VarintStatus::ok: return value;
    case VarintStatus::truncated: throw CodecError("truncated varint");
    case VarintStatus::overflow: break;
  }
  throw CodecError("varint overflows 64 bits");
}

}  // namespace tezip::codecs
