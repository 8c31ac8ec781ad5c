#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "codecs/simd.hpp"

namespace tezip::codecs {

// How much error one plane may carry: a uniform integer tolerance, or PwRel's floor(rel * x).
struct PlaneBound {
  std::uint32_t tolerance = 0;  // uniform modes (0 = lossless)
  double pointwise_rel = 0;     // > 0 selects PwRel
  std::uint32_t max_value = 255;
  // Every pixel exact: dequantization is forecast + residual (the decoder's fused passes test it).
  bool lossless() const { return tolerance == 0 && pointwise_rel <= 0; }
};

// A uniform tolerance (no pointwise bound) whose dequantization f + q w, with q clamped to
// +-(max_value + 1) bins, stays within 32 bits (dequantize_plane's vectorized path).
inline bool uniform_in_32_bits(const PlaneBound& bound) {
  const std::int64_t w = 2 * std::int64_t(bound.tolerance) + 1;
  return bound.pointwise_rel <= 0 && (std::int64_t(bound.max_value) + 1) * (w + 1) < (std::int64_t{1} << 30);
}

// The bin of residual r for half width e (bins of width w = 2e + 1 centred on 0), by a
// multiplication: (|r| + e) / w == ((|r| + e) * m) >> 32 with
// m = ceil(2^32 / w), exact while |r| + e < 2^17 and w < 2^15 (the rounding error stays below
// 2^17 / 2^32 = 2^-15 < 1 / w). Pixels are at most 16-bit, so only the width can rule it out.
struct UniformBins {
  std::int32_t e = 0, w = 1;
  std::uint64_t m = 0;

  explicit UniformBins(std::uint32_t half_width)
      : e(std::int32_t(half_width)), w(2 * std::int32_t(half_width) + 1), m(((std::uint64_t{1} << 32) + std::uint64_t(w) - 1) / std::uint64_t(w)) {}
  static bool exact(std::uint32_t half_width) { return half_width < (1u << 14) - 1; }
  std::int32_t bin(std::int32_t r) const {
    const std::uint32_t u = std::uint32_t(r >= 0 ? r : -r) + std::uint32_t(e);
    const auto q = std::int32_t((std::uint64_t(u) * m) >> 32);
    return r >= 0 ? q : -q;
  }
};

// SZ-style linear quantizer: the residual x - forecast becomes the index q of a bin of width
// 2e + 1 centred on the forecast, and the reconstruction is forecast + q (2e + 1), clamped to the
// pixel range (clamping only moves it towards x). With a uniform tolerance e every pixel is
// within e. PwRel's tolerance depends on x, which the decoder lacks, so the bin width comes from
// the forecast instead (floor(rel f / (1 + rel))), and a pixel whose bin misses floor(rel x) is
// sent verbatim behind an escape symbol. Encoder and decoder share `reconstruct`, so they cannot drift.
class LinearQuantizer {
 public:
  explicit LinearQuantizer(const PlaneBound& bound);

  // The symbol no real bin index can take: |q| <= max_value.
  std::int32_t escape() const { return std::int32_t(bound_.max_value) + 1; }

  // Quantizes x against forecast f; returns the symbol, sets `recon`; appends x to `literals` on escape.
  std::int32_t quantize(std::uint32_t x, std::uint32_t f, std::uint16_t& recon,
                        std::vector<std::uint16_t>& literals) const;
  // Decoder side of `quantize`. Returns false if the symbol is an escape (the caller reads a literal).
  bool reconstruct(std::int32_t q, std::uint32_t f, std::uint16_t& recon) const;
  // The half width e of the bin around forecast f (PwRel: from f itself).
  std::uint32_t half_width(std::uint32_t f) const;

 private:
  PlaneBound bound_;
};

// Sequential reader of escape literals; throws CodecError when they run out.
class LiteralCursor {
 public:
  explicit LiteralCursor(std::span<const std::uint16_t> literals) : literals_(literals) {}
  std::uint16_t next();
  bool exhausted() const { return position_ == literals_.size(); }

 private:
  std::span<const std::uint16_t> literals_;
  std::size_t position_ = 0;
};

// Inter planes: the forecast of the whole plane is known before coding it. `path`: the
// uniform-tolerance loop in AVX2 or portable; the same symbols and pixels either way. Lossless,
// `recon` may be empty where the caller needs no copy of the plane (estimates).
void quantize_plane(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> forecast,
                    const PlaneBound& bound, std::span<std::int32_t> symbols, std::span<std::uint16_t> recon,
                    std::vector<std::uint16_t>& literals, SimdPath path = simd_path());
// `path`: the uniform-tolerance loop in AVX2 or portable; the same pixels either way.
void dequantize_plane(std::span<const std::int32_t> symbols, std::span<const std::uint16_t> forecast,
                      const PlaneBound& bound, std::span<std::uint16_t> recon, LiteralCursor& literals,
                      SimdPath path = simd_path());

// What forecasts each pixel of an intra plane from its reconstructed neighbours: LOCO-I's median
// edge detector (intra_forecast), or the mean of four (mean_forecast, chunk version 17), which the
// encoder takes where its estimate is smaller (flat scenes under sensor noise).
enum class IntraPredictor : std::uint8_t { median, mean };

// Key-frame planes: each pixel is forecast from its already reconstructed neighbours (by
// `predictor`), so quantization runs pixel by pixel.
// `path`: a uniform tolerance in AVX2 runs sixteen rows at once (the decoder's wavefront); the same
// symbols and pixels on every path. The mean's loops are portable C++ on every path.
void quantize_plane_intra(std::span<const std::uint16_t> plane, std::size_t width, const PlaneBound& bound,
                          std::span<std::int32_t> symbols, std::span<std::uint16_t> recon,
                          std::vector<std::uint16_t>& literals, SimdPath path = simd_path(),
                          IntraPredictor predictor = IntraPredictor::median);
// `path`: lossless and uniform-tolerance planes of at least 16 columns reconstruct eight rows a
// vector in AVX2 (codecs/transform/wavefront_avx2.hpp); the same pixels on every path.
void dequantize_plane_intra(std::span<const std::int32_t> symbols, std::size_t width, const PlaneBound& bound,
                            std::span<std::uint16_t> recon, LiteralCursor& literals, SimdPath path = simd_path(),
                            IntraPredictor predictor = IntraPredictor::median);

// Interpolated planes in bounded modes (a uniform tolerance): SZ3's interpolation in two dimensions
// (codecs/transform/interpolation.hpp) quantized in closed loop, each pixel predicted from pixels
// already reconstructed, the prediction clamped to the pixel range, its residual's bin the symbol
// and the reconstruction prediction + bin (2e + 1) clamped again. On smooth fields the bins of the
// pixels themselves are a staircase whose steps the interpolation cannot predict; closed loop they
// are mostly 0 (docs/defaults.md, "Interpolated planes quantized in closed loop"). With a
// `forecast` (not empty) the interpolation is of the residual: each pixel's prediction is its
// forecast plus the interpolation of the reconstructed pixels less their forecasts. The whole
// plane at once, in the levels' order: scalar.
void quantize_plane_interpolated(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> forecast,
                                 std::size_t width, const PlaneBound& bound, std::span<std::int32_t> symbols,
                                 std::span<std::uint16_t> recon);
// Its inverse; any symbols (a damaged stream's) give pixels in range.
void dequantize_plane_interpolated(std::span<const std::int32_t> symbols, std::span<const std::uint16_t> forecast,
                                   std::size_t width, const PlaneBound& bound, std::span<std::uint16_t> recon);

// An estimate of quantize_plane_intra's symbols at a quarter of its cost: the rows that
// codecs::estimate_cost samples (cost_sample_step), each pixel forecast from its *original*
// neighbours and quantized with the plane's bin width. Exact for lossless planes, where
// reconstruction and original agree; for error-bounded ones the encoder uses it only to skip intra
// coding that is clearly worse. Feed the result to estimate_cost_rows.
std::vector<std::int32_t> sample_intra_symbols(std::span<const std::uint16_t> plane, std::size_t width,
                                               const PlaneBound& bound, IntraPredictor predictor = IntraPredictor::median);

}  // namespace tezip::codecs
