#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "codecs/simd.hpp"

namespace tezip::codecs {

// Coded block motion, as video codecs do it: the encoder searches, per 16 x 16 block (or each of its
// four 8 x 8 quarters where that pays), the displacement of the reference frame (the previous
// reconstruction) that best matches the plane; the vectors are predicted from their coded
// neighbours and stored, and both sides build the same motion-compensated forecast from them.
// Vectors are in quarter pixels; fractional samples are bilinear between the four neighbouring
// pixels, weights in quarters, rounded to nearest (integer arithmetic: the same bytes on every
// machine; measured against half pixels: mire2 2.804 -> 2.824 lossless, 7.214 -> 7.458 at abs 2,
// castle -0.7% / +0.7%, sample/vtest abs 2 -0.6%). The reference is
// extended past its borders by repeating its edge pixels.
inline constexpr std::uint32_t kMotionUnit = 8;        // the smallest block; a 16 x 16 block is 2 x 2 units
inline constexpr std::int32_t kMotionRange = 128;      // |vector component| <= 128 quarter pixels (32 pixels)

struct MotionVector {
  std::int16_t x = 0, y = 0;  // quarter pixels
  bool operator==(const MotionVector&) const = default;
};

// A 16 x 16 block's mode (MotionField::modes).
inline constexpr std::uint8_t kWholeBlock = 0;    // one vector for its four units
inline constexpr std::uint8_t kSplitBlock = 1;    // a vector per unit
// No vector: the forecast is the block's DC, the rounded mean of the reference's co-located pixels,
// so that the plane's spatial transform predicts its pixels from each other (an intra block inside
// an inter frame, as video codecs have; chunk version 7). Its units hold their predicted vector,
// for the predictions of the vectors after it.
inline constexpr std::uint8_t kSpatialBlock = 2;

// One plane's vectors: one per 8 x 8 unit (row-major, units_x(width) per row), and per 16 x 16
// block its mode: whole (its four units share the first's vector), split or spatial.
struct MotionField {
  std::uint32_t width = 0, height = 0;
  std::vector<MotionVector> units;
  std::vector<std::uint8_t> modes;  // per 16 x 16 block, row-major: kWholeBlock, kSplitBlock, kSpatialBlock
  MotionField() = default;
  MotionField(std::uint32_t width, std::uint32_t height);
  std::uint32_t units_x() const { return (width + kMotionUnit - 1) / kMotionUnit; }
  std::uint32_t units_y() const { return (height + kMotionUnit - 1) / kMotionUnit; }
  std::uint32_t blocks_x() const { return (width + 2 * kMotionUnit - 1) / (2 * kMotionUnit); }
  std::uint32_t blocks_y() const { return (height + 2 * kMotionUnit - 1) / (2 * kMotionUnit); }
};

// What the search found: the field, its estimated coded size in bits (vectors and split flags),
// and the sums of absolute differences of its forecast and of the zero field (the reference as it is).
struct MotionSearch {
  MotionField field;
  std::uint64_t vector_bits = 0;
  std::uint64_t sad = 0;
  std::uint64_t zero_sad = 0;
};

// The estimated bits of a residual r (plane - forecast) once quantized: bits[r + offset], in units
// of 1 / unit bit. The search finds candidates by SAD and then decides between the best of them,
// the zero vector and the predicted one, and whether to split, by these bits: SAD alone does not
// see that exact zeros (static areas of compressed video) are almost free.
struct ResidualBits {
  std::vector<std::uint8_t> bits;  // three zero bytes beyond the last entry (AVX2 kernels read four bytes at an entry)
  std::int32_t offset = 0;
  bool lossless = false;     // uniform(max, 0): bits[r] is value_bits(r), which kernels compute without the table
  std::uint32_t unit = 1;    // entries per bit
  std::uint32_t tolerance = 0;
  // Empty, or kResidualContexts tables of bits.size() entries each: the price of r in context k
  // at context_bits[k * bits.size() + r + offset], k the class of the activity of r's causal
  // neighbours (the magnitudes of their bins: residual_context). The coder codes each residual
  // in a context of its neighbours' magnitudes; these prices let the search see that too.
  std::vector<std::uint8_t> context_bits;
  std::uint32_t context_shift = 0;  // the activity's shift (residual_context)
  // Residuals coded as they are (lossless), or in bins of 2 * tolerance + 1 (uniform bounds), each
  // bin priced as an Elias-gamma-like code of its index (1 bit for 0, 3 for +-1, 5 for +-2 and +-3...).
  static ResidualBits uniform(std::uint32_t max_value, std::uint32_t tolerance);
  // The bins of `prior` (a uniform table) priced by what a residual (plane - forecast) shows: -log2
  // of each bin's share, in quarter bits, with prior's own prices as kPriorWeight pixels' worth of
  // counts (a bin the sample never met keeps a finite price).
  static ResidualBits measured(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> forecast,
                               const ResidualBits& prior);
  // The same from counts of residuals already made: counts[r + prior.offset], each r in
  // [-offset, offset]; `total` their sum.
  static ResidualBits measured(std::span<const std::uint32_t> counts, std::uint64_t total, const ResidualBits& prior);
  // measured(plane, forecast, prior), and context_bits measured the same way within each context
  // of the residual (planes `width` wide; the activity summed from the neighbours' bins).
  static ResidualBits measured_in_contexts(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> forecast,
                                           std::uint32_t width, const ResidualBits& prior);
};

// The contexts of ResidualBits::context_bits: the activity of a residual is the sum of the
// magnitudes of its left, upper, upper-left and upper-right neighbours (0 outside the plane),
// shifted right by `shift`, in classes 0, 1-2, 3-5, 6-11, 12-23 and 24 or more. measured_in_contexts
// shifts where the residual's mean magnitude is 8 or more, so that a typical activity falls in the
// classes' range (16-bit data, noisy planes).
inline constexpr std::size_t kResidualContexts = 6;
std::size_t residual_context(std::uint32_t activity, std::uint32_t shift);

// Which prices the search decides by: the table as given, or (ResidualBits::measured) its bins
// priced by the residual the hint's field leaves in this plane (where there is no hint, the field
// of a first pass by the given table). Noise and quantization bins are far from the uniform
// table's prices: on camera clips at abs 2 the measured prices code 12-17% smaller, on gray film
// lossless 1.8%; the GOP codec measures which suits a GOP (docs/defaults.md, "Measured residual
// prices for the motion search"). `measured` prices the residual (or its bins) by one order-0 table;
// `contextual` in its contexts (measured_in_contexts).
enum class ResidualPrices : std::uint8_t { table, measured, contextual };

// The estimated bits of the residual plane - forecast over the area (x, y, w, h) of a plane `width`
// wide, `forecast` the area's forecast with rows `stride` apart: what the search settles blocks by
// (the sum of `table`'s entries). The same on every kernel path (the lossless table's is computed).
// With context_bits, each residual priced in its context; its neighbours outside the area are those
// of the forecast extended where `margin` (the forecast may be read one pixel left of the area,
// above it and right of it: forecast[-1 - stride] to forecast[w - stride], forecast[-1 + y * stride]
// and forecast[w + y * stride]), else 0, and 0 outside the plane.
std::uint64_t area_residual_bits(std::span<const std::uint16_t> plane, std::uint32_t width, std::uint32_t x, std::uint32_t y,
                                 std::uint32_t w, std::uint32_t h, const std::uint16_t* forecast, std::size_t stride,
                                 const ResidualBits& table, SimdPath path = simd_path(), bool margin = false);

// Searches `plane` against `reference` (both width x height). `hint` (may be null) is the field of
// the previous frame of the same plane: its vectors are candidates. Without `bits` (null), SAD
// decides everything. `max_value`: no pixel of either exceeds it (the forecasts' arithmetic; the
// result is the same for any value at least the largest pixel). `prices`: how `bits` prices the
// residuals (ResidualPrices). Deterministic.
MotionSearch search_motion(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> reference,
                           std::uint32_t width, const MotionField* hint = nullptr, const ResidualBits* bits = nullptr,
                           std::uint32_t max_value = 65535, SimdPath path = simd_path(),
                           ResidualPrices prices = ResidualPrices::table);

// Marks as spatial (kSpatialBlock) the blocks of `field` whose pixels less their DC cost fewer
// estimated bits under the median transform than their residual to `forecast` (the field's
// compensation of `reference`), the vectors they no longer carry counted; in raster order, each
// block judged beside the residuals of the blocks before it as they were decided. The bits are
// `bits`' bins priced by the median transform of the whole residual (ResidualBits::measured: cup
// 0.85% smaller losslessly than by the uniform table, docs/defaults.md). Returns how many.
// `path`: the estimate's AVX2 kernel (where the table has ResidualBits::uniform's three bytes of
// padding) or the portable loop; the same decisions either way.
std::size_t choose_spatial_blocks(MotionField& field, std::span<const std::uint16_t> plane,
                                  std::span<const std::uint16_t> reference, std::span<const std::uint16_t> forecast,
                                  const ResidualBits& bits, SimdPath path = simd_path());

// The motion-compensated forecast of a field: `out` = reference displaced block by block.
// `max_value`: the largest value a reference pixel may have (below 4096, 16-bit arithmetic does).
void compensate(const MotionField& field, std::span<const std::uint16_t> reference, std::span<std::uint16_t> out,
                std::uint32_t max_value = 65535, SimdPath path = simd_path());

// A forecast plane (rows of `width`) smoothed by a separable filter each way, edges repeated,
// rounded, never above the largest input: `strong` [1 2 1] / 4 ((the 9 weighted pixels + 8) >> 4),
// `weak` [1 6 1] / 8 ((... + 32) >> 6). In bounded modes a compensated reference carries its
// quantization error and noise, which this averages (chunk version 12, compressor/gop_codec.cpp).
// `out` must not overlap `in`.
enum class Smoothing : std::uint8_t { weak, strong };
void smooth_forecast(std::span<const std::uint16_t> in, std::size_t width, std::span<std::uint16_t> out, Smoothing strength,
                     SimdPath path = simd_path());

// The field with every vector scaled by num / den (rounded half away from zero) and clamped to the
// range: the vectors towards a reference on the other side of the frame (num < 0), for bi-prediction.
MotionField scale_field(const MotionField& field, int num, int den);

// The field towards the reference of `next`'s frame: each unit's vector in `field` (towards the
// frame `next` belongs to) followed by the vector of `next`'s unit under the point it reaches (the
// unit's centre displaced, floored to a unit, clamped to the plane), the sum clamped to the range;
// `field`'s modes. Motion two frames back both sides already have, for more references without
// coded vectors. Both fields of one size.
MotionField chain_field(const MotionField& field, const MotionField& next);

// Appends the field's symbols (split flags, then the zigzagged differences between each vector and
// its prediction from the neighbours coded before it) to `out`.
void append_motion_symbols(const MotionField& field, std::vector<std::uint32_t>& out);

// Reads a field of the given size from symbols[pos...], advancing pos. Throws CodecError on symbols
// that run out, a block mode above 1 (above 2 with `spatial`: chunk version 7), or a vector out of range.
MotionField read_motion_symbols(std::span<const std::uint32_t> symbols, std::size_t& pos, std::uint32_t width,
                                std::uint32_t height, bool spatial = true);

}  // namespace tezip::codecs
