#pragma once
// A plane whose pixels are mostly one exact background value (depth maps with an empty background
// of zeros, detector frames, masks, renderings on white), coded losslessly as two parts: the mask
// of its pixels that are not the background (one bit a pixel, rows in order, most significant bit
// first, the plane padded to whole bytes), and for those pixels only, in raster order, the residual
// of the median (LOCO-I) predictor over the plane's pixels, background included, modulo 2^8 or 2^16
// (sample_bytes: one byte for 8-bit planes, else two, little-endian). The background then costs a
// bit a pixel before the LZ coder instead of a residual stream whose edges between background and
// foreground are the largest residuals (measured on the castle depth maps: 77% of pixels are zero;
// docs/defaults.md, "Sparse chunks").
// Predictor: 0 at the first pixel, the left pixel in the first row, the one above in the first
// column, else the median of left, above and left + above - above-left.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tezip::codecs {

// Appends the plane's mask to `mask` and its foreground pixels' residuals to `residuals`.
void pack_sparse_plane(std::span<const std::uint16_t> plane, std::size_t width, std::uint32_t max_value,
                       std::uint16_t background, std::vector<std::uint8_t>& mask, std::vector<std::uint8_t>& residuals);

// The bytes of the masks of `planes` planes of `plane_size` pixels.
inline std::size_t sparse_mask_bytes(std::size_t planes, std::size_t plane_size) { return planes * ((plane_size + 7) / 8); }

// Reads sparse planes in the order they were packed: the masks from the front of `mask`, the
// residuals from the front of `residuals`. Throws CodecError where the parts run out or a pixel
// leaves the range (above max_value, or the background where the mask says foreground); finish()
// where bytes are left over.
class SparsePlaneReader {
 public:
  SparsePlaneReader(std::span<const std::uint8_t> mask, std::span<const std::uint8_t> residuals, std::uint32_t max_value,
                    std::uint16_t background);
  void read(std::size_t width, std::span<std::uint16_t> plane);
  void finish() const;

 private:
  std::span<const std::uint8_t> mask_, residuals_;
  std::size_t mask_pos_ = 0, residual_pos_ = 0;
  std::uint32_t max_value_;
  std::uint16_t background_;
};

}  // namespace tezip::codecs
