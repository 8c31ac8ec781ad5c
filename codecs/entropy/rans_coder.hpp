#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tezip::codecs {

// Static context-modelled rANS coder for rank streams: the fast-decoding sibling of the adaptive
// range coder. Each rank becomes a token (small ranks directly, larger ones an exponent bucket plus
// its top mantissa bit) and raw extra bits. The token is coded with one frequency table per context;
// the context is a class of the tokens of already decoded neighbours (left, upper, upper-left and
// upper-right in rows of `row_width`; the previous three symbols when row_width == 0). The tables are
// measured over the whole call and stored in the output, so decoding is a table lookup per symbol.
// All ranks must be < alphabet_size.
std::vector<std::uint8_t> encode_rans(std::span<const std::uint32_t> ranks, std::size_t row_width,
                                      std::uint64_t alphabet_size);

// Decodes out.size() ranks. Throws CodecError on anything encode_rans cannot have written: bad tables,
// a rank >= alphabet_size, truncated streams or trailing bytes. Allocation is bounded by out.size()
// and the input size. With `symbol_of_rank` (alphabet_size entries) `out` receives symbol_of_rank[rank]
// instead: mapped row by row while the ranks are still in cache, which saves a pass over `out`.
void decode_rans(std::span<const std::uint8_t> bytes, std::size_t row_width, std::uint64_t alphabet_size,
                 std::span<std::uint32_t> out, std::span<const std::uint32_t> symbol_of_rank = {});

}  // namespace tezip::codecs
