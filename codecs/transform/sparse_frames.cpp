#include "codecs/transform/sparse_frames.hpp"

#include <algorithm>
#include <cstring>

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

namespace {

// The set bits of `bytes` mask bytes, eight bytes a step by SWAR: the portable build has no popcnt
// instruction, and std::popcount became a library call per byte (6.5% of decoding castle).
std::size_t set_bits(const std::uint8_t* m, std::size_t bytes) {
  const auto count = [](std::uint64_t x) {
    x -= (x >> 1) & 0x5555555555555555u;
    x = (x & 0x3333333333333333u) + ((x >> 2) & 0x3333333333333333u);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Fu;
    return std::size_t((x * 0x0101010101010101u) >> 56);
  };
  std::size_t n = 0, k = 0;
  for (; k + 8 <= bytes; k += 8) {
    std::uint64_t word;
    std::memcpy(&word, m + k, 8);
    n += count(word);
  }
  for (; k < bytes; ++k) n += count(m[k]);
  return n;
}

// One plane's pixels from its mask `m` and residuals `r` (two bytes each where Wide), which the
// caller has checked hold every foreground pixel's; `r` moves past those read. Returns nonzero
// where a pixel left the range or came out as the background. Bytes of eight background pixels
// are filled at once (most of the background), bytes of eight interior foreground pixels decoded
// without their bits' tests: the median of each pixel's neighbours is a chain from left to right.
template <bool Wide>
std::uint32_t read_pixels(const std::uint8_t* m, const std::uint8_t*& r, std::size_t width, std::span<std::uint16_t> plane,
                          std::uint16_t background, std::uint32_t max_value) {
  constexpr std::uint32_t modulus = Wide ? 0xFFFF : 0xFF;
  std::uint32_t bad = 0;
  const auto pixel = [&](std::uint32_t forecast) {
    std::uint32_t residual = r[0];
    if constexpr (Wide) residual |= std::uint32_t(r[1]) << 8;
    r += Wide ? 2 : 1;
    const std::uint32_t v = (forecast + residual) & modulus;
    bad |= std::uint32_t(v == background || v > max_value);
    return std::uint16_t(v);
  };
  for (std::size_t y = 0, i = 0; y < plane.size() / width; ++y) {
    std::uint16_t* row = plane.data() + y * width;
    for (std::size_t x = 0; x < width; ++x, ++i) {
      if (i % 8 == 0 && x + 8 <= width) {
        const std::uint8_t bits = m[i / 8];
        if (bits == 0) {
          std::fill(row + x, row + x + 8, background);
          x += 7, i += 7;
          continue;
        }
        if (bits == 0xFF && y > 0 && x > 0) {
          const std::uint16_t* up = row - width;
          for (std::size_t k = x; k < x + 8; ++k) row[k] = pixel(med_pixels(row[k - 1], up[k], up[k - 1]));
          x += 7, i += 7;
          continue;
        }
      }
      row[x] = (m[i / 8] & (0x80 >> (i % 8))) == 0 ? background : pixel(intra_forecast(plane, i, x, width));
    }
  }
  return bad;
}

}  // namespace

void SparsePlaneReader::read(std::size_t width, std::span<std::uint16_t> plane) {
  check_shape(plane.size(), width);
  const std::size_t n = plane.size(), bytes = sparse_mask_bytes(1, n);
  if (mask_.size() - mask_pos_ < bytes) throw CodecError("sparse plane: the mask ends early");
  const std::uint8_t* m = mask_.data() + mask_pos_;
  if ((n % 8) != 0 && (m[bytes - 1] & (0xFF >> (n % 8))) != 0) throw CodecError("sparse plane: mask bits past the plane");
  const bool wide = sample_bytes(max_value_) == 2;
  if ((residuals_.size() - residual_pos_) / (wide ? 2 : 1) < set_bits(m, bytes))
    throw CodecError("sparse plane: the residuals end early");
  const std::uint8_t* r = residuals_.data() + residual_pos_;
  const std::uint32_t bad = wide ? read_pixels<true>(m, r, width, plane, background_, max_value_)
                                 : read_pixels<false>(m, r, width, plane, background_, max_value_);
  if (bad) throw CodecError("sparse plane: a pixel outside the range, or the background where the mask says foreground");
  residual_pos_ = std::size_t(r - residuals_.data());
  mask_pos_ += bytes;
}

void SparsePlaneReader::finish() const {
  if (mask_pos_ != mask_.size() || residual_pos_ != residuals_.size()) throw CodecError("sparse planes: bytes left over");
}

}  // namespace tezip::codecs
