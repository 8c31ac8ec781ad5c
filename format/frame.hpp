#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codecs/buffer_pool.hpp"

namespace tezip {

enum class PixelType : std::uint8_t { U8 = 1, U16 = 2 };

// Size and type shared by every frame of a sequence.
struct Geometry {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint32_t channels = 0;  // 1 (gray) or 3 (colour, stored in the source's channel order)
  PixelType type = PixelType::U8;

  std::size_t plane_size() const { return std::size_t(width) * height; }
  std::size_t pixel_count() const { return plane_size() * channels; }
  std::size_t raw_bytes() const { return pixel_count() * (type == PixelType::U8 ? 1 : 2); }
  std::uint32_t max_value() const { return type == PixelType::U8 ? 255u : 65535u; }
  bool operator==(const Geometry&) const = default;
};

// A frame's pixels. Pixels(n) is not zeroed: every producer writes each pixel (a source reading a
// file, the decoder reconstructing a GOP); the decoder no longer copies a zeroed frame into each
// of its outputs first (docs/performance.md, "Page faults"). Pixels(n, 0) where zeros are meant.
// Large frames come from codecs/buffer_pool.hpp's pool: a GOP's frames reuse the last GOP's pages.
using Pixels = std::vector<std::uint16_t, codecs::BufferAllocator<std::uint16_t>>;

// One frame: pixels in planar order (channel 0 plane, then channel 1, ...), whatever the
// source's bit depth. `name` and `format` let the decoder give back the original files.
struct Frame {
  std::string name;    // file name relative to its sequence folder, e.g. "img_0007.png"
  std::string format;  // original container: png, pgm, ppm, bmp, tiff, jpeg, video, npy
  Pixels pixels;
};

std::string to_string(PixelType type);

// Names become paths when decompressing, so the writer and the reader (a hostile archive must not
// climb out of the output folder) apply these same rules. The longest name an archive holds.
inline constexpr std::size_t kMaxNameBytes = 4096;
// A frame name is a plain file name: not empty, ".", or "..", no '/', '\\' or NUL.
bool safe_frame_name(const std::string& name);
// A sequence name is "" or a relative path of such names ("day2/cam1").
bool safe_sequence_name(const std::string& name);

}  // namespace tezip
