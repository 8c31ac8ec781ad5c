#pragma once
// Rows drawn for the encoder's estimates by a hash of their index (SplitMix64's finalizer). A
// fixed pattern of rows (every other one, every fourth, every eighth) samples rows of one kind in
// frames whose rows alternate, as decoded video's are (chroma upsampled from half the rows): on
// cup it moved the striped coder's estimates by 1-2% and hid what side classes save there
// (docs/performance.md, "Encoding: the striped coder's estimates on half the rows").
#include <cstddef>
#include <cstdint>

namespace tezip::codecs {

// Whether row `row` is in the sample of about one row in 2^k.
inline bool row_in_sample(std::size_t row, unsigned k) {
  std::uint64_t z = std::uint64_t(row) + 0x9E3779B97F4A7C15u;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return ((z ^ (z >> 31)) & ((std::uint64_t{1} << k) - 1)) == 0;
}

}  // namespace tezip::codecs
