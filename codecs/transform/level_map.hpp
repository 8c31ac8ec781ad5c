#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "codecs/simd.hpp"

namespace tezip::codecs {

// The pixel values a plane uses, where they leave gaps: a camera that applies a digital gain or
// stretches its contrast after an 8-bit (or 10- or 12-bit) conversion never produces some values
// (ViSP's `line` and `ellipse-1`: every eighth or ninth level missing, at a spacing that changes
// with each frame's gain), and a sensor whose samples are shifted up to 16 bits uses one value in
// 2^k. Coded as indices into the levels it uses (0 .. K - 1), with its forecast mapped to the index
// of the nearest level, a plane's residuals shrink by the gaps the forecast and the pixel have
// between them: the noise that spread over nine levels spreads over eight indices (docs/defaults.md,
// "Level maps"). Lossless planes only: the mapping is exact, and the prediction stays in pixels.
class LevelMap {
 public:
  // The map of `plane` (values at most `max_value`), or none where its levels leave no gap between
  // its smallest and its largest (nothing to gain).
  static std::optional<LevelMap> of(std::span<const std::uint16_t> plane, std::uint32_t max_value);
  // Read from `symbols` at `pos` (advanced), as append_symbols writes it; throws CodecError where
  // the runs do not cover 0 .. max_value exactly or leave no level used.
  static LevelMap read(std::span<const std::uint32_t> symbols, std::size_t& pos, std::uint32_t max_value);

  // The map as symbols: the number of runs, then the runs' lengths, alternately of values unused and
  // used, the first (possibly empty) of values unused, covering 0 .. max_value.
  void append_symbols(std::vector<std::uint32_t>& out) const;

  // The number of levels used, K: indices run 0 .. K - 1.
  std::uint32_t size() const { return std::uint32_t(levels_.size()); }
  // Each pixel's index (every value of `plane` must be a level of the map).
  void to_indices(std::span<const std::uint16_t> plane, std::span<std::uint16_t> out) const;
  // Each forecast value's nearest level's index (the lower of two as near).
  void to_ranks(std::span<const std::uint16_t> forecast, std::span<std::uint16_t> out, SimdPath path = simd_path()) const;
  // Indices back to pixel values, in place; an index past K - 1 (a damaged stream) becomes K - 1's
  // level, so that the lookup stays in the table (the frame's checksum then tells).
  // `path`: for 8-bit planes AVX-512 looks up 32 values at a time in the table held in registers
  // (docs/performance.md, "Level maps' lookups in registers"); the same values on every path.
  void to_levels(std::span<std::uint16_t> values, SimdPath path = simd_path()) const;

 private:
  explicit LevelMap(std::vector<std::uint16_t> levels, std::uint32_t max_value);
  std::vector<std::uint16_t> levels_;  // the values used, ascending
  std::vector<std::uint16_t> rank_;    // [0 .. max_value]: the nearest level's index
  std::vector<std::uint16_t> padded_;  // 8-bit planes: levels_ and K - 1's level up to 256 entries
};

}  // namespace tezip::codecs
