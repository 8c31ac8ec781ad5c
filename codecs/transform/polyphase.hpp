#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "codecs/simd.hpp"

namespace tezip::codecs {

// The separable polyphase layout of a plane of `width` columns: its even rows (0, 2, 4, ...), then
// its odd rows; within each row its even columns, then its odd ones. So the quarter of the plane
// at even rows and columns becomes an image of its own in the top-left corner, and the other three
// phases the other corners. Decoded colour video was stored with chroma at half resolution: in its
// reversible colour transform's chroma planes every 2 x 2 block holds one value (92-100% of the
// pixels of the colour clips measured), where the median predictor leaves exact zeros on three
// pixels of four and the pixel at even row and column is the median prediction of the half-size
// plane. In raster order those zeros sit among the residuals that carry the plane, and the coder's
// contexts (the neighbours' residuals) see zeros around every one of them; in this layout the
// residuals that carry the plane have each other as neighbours, and the zeros a corner of their own.
// Throws std::invalid_argument where `in` is not whole rows of `width` or `out` is not its size.
void to_polyphase(std::span<const std::int32_t> in, std::size_t width, std::span<std::int32_t> out);
// A plane's side classes (codecs/entropy/striped_rans.hpp), which follow its symbols into the layout.
void to_polyphase(std::span<const std::uint8_t> in, std::size_t width, std::span<std::uint8_t> out);
// The inverse (the decoder's): `path` AVX2 (two rows' halves interleaved eight values a step) or
// portable, the same values.
void from_polyphase(std::span<const std::int32_t> in, std::size_t width, std::span<std::int32_t> out,
                    SimdPath path = simd_path());

}  // namespace tezip::codecs
