#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "codecs/simd.hpp"

namespace tezip::codecs {

// Spatial decorrelation of a plane of quantized symbols, chosen per plane: what is left of a
// temporal residual is often still smooth across the image. Left, Median and Gradient predict each
// value from its left (a), upper (b) and upper-left (c) neighbours; in the first row from the left
// (the first value from 0), in the first column from above.
enum class PlaneTransform : std::uint8_t {
  None = 0,
  Left = 1,    // a
  Median = 2,  // LOCO-I's median edge detector: a + b - c clamped to [min(a, b), max(a, b)]
  // (3 is the GOP codec's mark of a plane coded spatially, in the same byte of the chunk.)
  // a + b - c, unclamped: exact on linear ramps, where the median's clamp cuts smooth curves
  // (simulated fields, waves; docs/defaults.md, "Smooth fields: the gradient and interpolation
  // transforms, interpolated planes"). Its inverse is the left transform's running sums of each
  // row, then the row above added.
  Gradient = 4,
  // SZ3's interpolation in two dimensions: levels from coarse to fine, each value predicted by the
  // cubic through the coarser values around it along its row or column (plane_transform.cpp,
  // interpolation_levels). Its errors on a smooth field are far below the gradient's, whose three
  // neighbours add their rounding noise; it inverts whole planes only.
  Interpolation = 5,
};

void forward_transform(PlaneTransform transform, std::span<const std::int32_t> plane, std::size_t width,
                       std::span<std::int32_t> out);
// In place; throws CodecError on a size that is not whole rows.
void inverse_transform(PlaneTransform transform, std::span<std::int32_t> plane, std::size_t width);
// Rows [y_begin, y_end) only, in place; the rows above y_begin must already be inverted. Inverting
// a plane a few rows at a time, in order, gives the same values as inverse_transform. `path`: the
// median's AVX2 kernel (eight rows a vector) or the portable wavefront; the same values either way.
// The interpolation transform inverts whole planes only (y_begin 0, y_end the height: else
// std::invalid_argument); inverts_by_rows says which do.
void inverse_transform_rows(PlaneTransform transform, std::span<std::int32_t> plane, std::size_t width,
                            std::size_t y_begin, std::size_t y_end, SimdPath path = simd_path());

inline bool inverts_by_rows(PlaneTransform t) { return t != PlaneTransform::Interpolation; }

// The transform that leaves the fewest estimated bits over a sample of rows (an order-0 coder's:
// the entropy of the zigzagged values' bit lengths plus the bits below each leading one), and
// that estimate.
struct TransformChoice {
  PlaneTransform transform = PlaneTransform::None;
  std::uint64_t cost = 0;
};
// `path`: the histograms' AVX2 kernel or the portable loop; the same counts either way. `smooth`
// false: none, left and median only (the gradient and interpolation left out).
TransformChoice choose_transform(std::span<const std::int32_t> plane, std::size_t width, SimdPath path = simd_path(),
                                 bool smooth = true);
// The estimate of the interpolation transform's residuals, weighed where the gradient's estimate
// is the smallest of the four above: its levels put a position's prediction along rows or columns
// by the position's residues, so the sample is every step-th group of step consecutive rows
// (step = cost_sample_step), each residual computed from the plane on its own, and the bits
// scaled to the count of values the other estimates read.
std::uint64_t estimate_interpolation_cost(std::span<const std::int32_t> plane, std::size_t width);
// The same estimate for a plane coded as it is.
std::uint64_t estimate_cost(std::span<const std::int32_t> plane, std::size_t width, SimdPath path = simd_path());
// The rows those estimates sample: every cost_sample_step(height)-th, from row 0.
std::size_t cost_sample_step(std::size_t height);
// The estimate over values that are already a sample (every value counts).
std::uint64_t estimate_cost_rows(std::span<const std::int32_t> sampled, SimdPath path = simd_path());

// An estimate of a plane's bits under contexts of its neighbours, as the striped rANS coder
// models them (codecs/entropy/striped_rans.hpp): each sampled value's bucket (the bit length of its zigzag)
// counted under the octave of its neighbours' buckets (upper left, upper, upper right, twice the
// left, the one before it), the entropy of each context's buckets plus the bits below each leading
// one. The order-0 estimates above see the same values in any order; this one sees where they
// lie (the polyphase layout's choice, codecs/transform/polyphase.hpp). Rows as estimate_cost samples them,
// each below the first with the row above it. `polyphase`: the estimate of the plane as
// to_polyphase would lay it out, read from the raster plane in place (the same count).
std::uint64_t estimate_context_cost(std::span<const std::int32_t> plane, std::size_t width, bool polyphase = false);

// The median transform's prediction of a value from its left (a), upper (b) and upper-left (c)
// neighbours, LOCO-I's median edge detector, as a clamp: in 64 bits a + b - c cannot wrap, and
// clamped to [min(a, b), max(a, b)] it is the median predictor's value for every input (c at or
// above the larger gives the smaller, at or below the smaller the larger). The decoder's, the cost
// estimates' and the spatial-block decision's form (fewer branches than the three-way test).
inline std::int32_t med_clamped(std::int32_t a, std::int32_t b, std::int32_t c) {
  const std::int64_t lo = std::min(a, b), hi = std::max(a, b);
  return std::int32_t(std::clamp(std::int64_t(a) + b - c, lo, hi));
}

// LOCO-I's median edge detector on pixels: min(a, b) if c >= max(a, b), max(a, b) if c <= min(a, b), else
// a + b - c; that is a + b - c clamped to [min, max], without branches (on noisy planes the
// branches mispredicted: the serial intra reconstruction spent a third of decoding Moving MNIST).
inline std::uint32_t med_pixels(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  const std::int32_t lo = std::int32_t(std::min(a, b)), hi = std::int32_t(std::max(a, b));
  return std::uint32_t(std::clamp(std::int32_t(a) + std::int32_t(b) - std::int32_t(c), lo, hi));
}

// Forecast of pixel i (column x) of a plane from reconstructed neighbours (left a, up b, up-left
// c): 0 at the first pixel, the left one in the first row, the upper one in the first column, else
// med_pixels. Intra planes' forecast (linear_quantizer.cpp) and sparse planes' (sparse_frames.cpp).
inline std::uint32_t intra_forecast(std::span<const std::uint16_t> recon, std::size_t i, std::size_t x,
                                    std::size_t width) {
  if (i < width) return x == 0 ? 0 : recon[i - 1];
  if (x == 0) return recon[i - width];
  return med_pixels(recon[i - 1], recon[i - width], recon[i - width - 1]);
}

// The mean of four neighbours, rounded: the intra planes' forecast of chunk version 17, which the
// encoder's estimate, its quantizer and the decoder's two-row reconstruction each compute.
inline std::uint32_t mean_of_four(std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t d) {
  return (a + b + c + d + 2) >> 2;
}

// Forecast of pixel i (column x) by the mean of its reconstructed neighbours left a, up-left c, up b
// and up-right d (the upper one again in the last column), rounded: mean_of_four(a, b, c, d); the
// first row and column as intra_forecast. On flat scenes under sensor noise, where the median
// follows one noisy neighbour, the mean of four halves the neighbours' noise (docs/defaults.md,
// "Intra planes forecast by the mean of four").
inline std::uint32_t mean_forecast(std::span<const std::uint16_t> recon, std::size_t i, std::size_t x,
                                   std::size_t width) {
  if (i < width) return x == 0 ? 0 : recon[i - 1];
  if (x == 0) return recon[i - width];
  const std::size_t up = i - width;
  const std::uint32_t d = x + 1 < width ? recon[up + 1] : recon[up];
  return mean_of_four(recon[i - 1], recon[up - 1], recon[up], d);
}

inline std::uint32_t zigzag(std::int32_t v) { return (std::uint32_t(v) << 1) ^ std::uint32_t(v >> 31); }
inline std::int32_t unzigzag(std::uint32_t u) { return std::int32_t(u >> 1) ^ -std::int32_t(u & 1); }

}  // namespace tezip::codecs
