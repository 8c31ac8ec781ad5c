#include "codecs/transform/sparse_frames.hpp"

#include <algorithm>

#include "codecs/codec_error.hpp"
#include "codecs/quantize/pixel_frames.hpp"
#include "codecs/transform/plane_transform.hpp"

namespace tezip::codecs {
namespace {

void check_shape(std::size_t size, std::size_t width) {
  if (width == 0 || size % width != 0) throw CodecError("sparse plane: size is not whole rows");
}

}  // namespace

void pack_sparse_plane(std::span<const std::uint16_t> plane, std::size_t width, std::uint32_t max_value,
                       std::uint16_t background, std::vector<std::uint8_t>& mask, std::vector<std::uint8_t>& residuals) {
  check_shape(plane.size(), width);
  const bool wide = sample_bytes(max_value) == 2;
  const std::uint32_t modulus = wide ? 0xFFFF : 0xFF;
  const std::size_t at = mask.size();
  mask.resize(at + sparse_mask_bytes(1, plane.size()), 0);
  for (std::size_t i = 0; i < plane.size(); ++i) {
    if (plane[i] == background) continue;
    mask[at + i / 8] |= std::uint8_t(0x80 >> (i % 8));
    const std::uint32_t r = (plane[i] - intra_forecast(plane, i, i % width, width)) & modulus;
    residuals.push_back(std::uint8_t(r));
    if (wide) residuals.push_back(std::uint8_t(r >> 8));
  }
}

SparsePlaneReader::SparsePlaneReader(std::span<const std::uint8_t> mask, std::span<const std::uint8_t> residuals,
                                     std::uint32_t max_value, std::uint16_t background)
    : mask_(mask), residuals_(residuals), max_value_(max_value), background_(background) {
  if (background > max_value) throw CodecError("sparse plane: the background exceeds the pixel range");
}

void SparsePlaneReader::read(std::size_t width, std::span<std::uint16_t> plane) {
  check_shape(plane.size(), width);
  const std::size_t n = plane.size(), bytes = sparse_mask_bytes(1, n);
  if (mask_.size() - mask_pos_ < bytes) throw CodecError("sparse plane: the mask ends early");
  const std::uint8_t* m = mask_.data() + mask_pos_;
  if ((n % 8) != 0 && (m[bytes - 1] & (0xFF >> (n % 8))) != 0) throw CodecError("sparse plane: mask bits past the plane");
  const bool wide = sample_bytes(max_value_) == 2;
  const std::uint32_t modulus = wide ? 0xFFFF : 0xFF;
  const std::size_t sample = wide ? 2 : 1;
  std::uint32_t bad = 0;
  for (std::size_t y = 0, i = 0; y < n / width; ++y) {
    std::uint16_t* row = plane.data() + y * width;
    for (std::size_t x = 0; x < width; ++x, ++i) {
      // Eight background pixels at once where a whole mask byte is zero (most of the background).
      if (i % 8 == 0 && x + 8 <= width && m[i / 8] == 0) {
        std::fill(row + x, row + x + 8, background_);
        x += 7, i += 7;
        continue;
      }
      if ((m[i / 8] & (0x80 >> (i % 8))) == 0) {
        row[x] = background_;
        continue;
      }
      if (residuals_.size() - residual_pos_ < sample) throw CodecError("sparse plane: the residuals end early");
      std::uint32_t r = residuals_[residual_pos_];
      if (wide) r |= std::uint32_t(residuals_[residual_pos_ + 1]) << 8;
      residual_pos_ += sample;
      const std::uint32_t v = (intra_forecast(plane, i, x, width) + r) & modulus;
      bad |= std::uint32_t(v == background_ || v > max_value_);
      row[x] = std::uint16_t(v);
    }
  }
  if (bad) throw CodecError("sparse plane: a pixel outside the range, or the background where the mask says foreground");
  mask_pos_ += bytes;
}

void SparsePlaneReader::finish() const {
  if (mask_pos_ != mask_.size() || residual_pos_ != residuals_.size()) throw CodecError("sparse planes: bytes left over");
}

}  // namespace tezip::codecs
