#pragma once
// LEB128 varints: the one implementation behind the archive's ByteWriter/ByteReader
// (format/byte_io.hpp) and the coders' headers (codecs/entropy/rank_remap.hpp, symbol_coder, rans).
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

// Writes `value` at `out` (room for 10 bytes); returns the byte after it.
inline std::uint8_t* write_varint(std::uint64_t value, std::uint8_t* out) {
  while (value >= 0x80) {
    *out++ = std::uint8_t(value | 0x80);
    value >>= 7;
  }
  *out++ = std::uint8_t(value);
  return out;
}

inline void append_varint(std::uint64_t value, std::vector<std::uint8_t>& out) {
  const std::size_t at = out.size();
  out.resize(at + 10);
  out.resize(std::size_t(write_varint(value, out.data() + at) - out.data()));
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
