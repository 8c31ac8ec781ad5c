#pragma once
// A reversible colour transform in the pixel domain for colour GOPs: JPEG 2000's RCT
// (which FFV1 uses too) on a frame's planar B, G, R planes of integers in [0, M]:
//   Y = floor((R + 2 G + B) / 4)   in [0, M]
//   U = B - G + M                  in [0, 2 M]
//   V = R - G + M                  in [0, 2 M]
// stored as the planes Y, U, V (luma first: a frame's coded motion is searched on its first
// plane), exactly invertible: G = Y - floor((U + V - 2 M) / 4), B = U - M + G, R = V - M + G.
// On decoded video, whose chroma was subsampled and is smooth, the differences code far smaller
// than the channels or their residuals' differences (Megamind, 30 frames lossless: 3,180,309 bytes
// against 3,598,432; docs/colour.md, "A reversible colour transform, chosen per GOP").
// Bounded GOPs code Y within the bound and U, V exactly: with U and V exact, G, B and R each come
// back with Y's error d (G = Y + d - floor(...), B = U - M + G, R = V - M + G), so a bound on Y is
// the same bound on every RGB channel; clamping to [0, M] only brings a pixel nearer its value
// (docs/colour.md, "The transform at a bound").
// Subtract green, for bounded GOPs whose bound is split between luma and chroma: the planes
//   G, U = B - G + M, V = R - G + M
// (the RCT's U and V, G in place of Y); decoded B = U - M + G, R = V - M + G. With G within e_g of
// its value and U, V within e_c of theirs, every RGB channel is within e_g + e_c: the bound can be
// split, so that the chroma, where it is smooth, sheds its noise too (docs/colour.md, "A chroma
// within a share of the bound").
#include <cstddef>
#include <cstdint>
#include <span>

#include "codecs/simd.hpp"

namespace tezip::codecs {

// The transform's code in a colour-transformed chunk (compressor/gop_codec.cpp): a lossless GOP's,
// a bounded GOP's (Y within the bound, U and V exact, the inverse clamped), and a bounded GOP's
// through subtract green (G and the chroma each within a share of the bound, the inverse clamped).
inline constexpr std::uint8_t kRctTransform = 1;
inline constexpr std::uint8_t kRctBoundedTransform = 2;
inline constexpr std::uint8_t kGreenSplitTransform = 3;

// Whether frames of largest value M can be transformed: 2 M must fit 16 bits.
constexpr bool rct_fits(std::uint32_t max_value) { return max_value <= 32767; }
// The largest value of a transformed plane.
constexpr std::uint32_t rct_max_value(std::uint32_t max_value) { return 2 * max_value; }

// `bgr`: one frame, planes B, G, R of plane_size pixels in [0, max_value]; `out` receives Y, U, V.
void forward_rct(std::span<const std::uint16_t> bgr, std::size_t plane_size, std::uint32_t max_value,
                 std::span<std::uint16_t> out);

// Subtract green: `bgr` as above, `out` receives G, U, V.
void forward_subtract_green(std::span<const std::uint16_t> bgr, std::size_t plane_size, std::uint32_t max_value,
                            std::span<std::uint16_t> out);

// The inverse: `yuv` (planes Y, U, V) to planes B, G, R in `out`, pixels [first, first + count)
// of each plane (a band of rows, while it is in cache; by default all). Returns false where a pixel
// of the result would leave [0, max_value] (damaged data; `out` is then unspecified).
// `path`: the AVX2 kernel (16-bit lanes, where M <= 8191 keeps every sum in them) or the portable
// loop; the same pixels and the same verdict either way.
bool inverse_rct(std::span<const std::uint16_t> yuv, std::size_t plane_size, std::uint32_t max_value,
                 std::span<std::uint16_t> out, std::size_t first = 0, std::size_t count = SIZE_MAX,
                 SimdPath path = simd_path());

// The inverse of a bounded GOP's planes, whose Y was quantized within [0, 2 M]: Y clamped to
// [0, M], then B, G and R clamped to [0, M] (each step only brings a pixel nearer its value).
// The same pixels on every path.
void inverse_rct_clamped(std::span<const std::uint16_t> yuv, std::size_t plane_size, std::uint32_t max_value,
                         std::span<std::uint16_t> out, std::size_t first = 0, std::size_t count = SIZE_MAX,
                         SimdPath path = simd_path());

// The inverse of subtract green for a bounded GOP, whose planes were quantized within [0, 2 M]: G
// clamped to [0, M], then B and R clamped to [0, M]. The same pixels on every path.
void inverse_subtract_green_clamped(std::span<const std::uint16_t> guv, std::size_t plane_size, std::uint32_t max_value,
                                    std::span<std::uint16_t> out, std::size_t first = 0, std::size_t count = SIZE_MAX,
                                    SimdPath path = simd_path());

}  // namespace tezip::codecs
