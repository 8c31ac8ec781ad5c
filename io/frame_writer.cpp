#include "io/frame_writer.hpp"

#include <system_error>

#include "io/atomic_file.hpp"
#include "format/errors.hpp"
#include "format/file_format.hpp"
#include "io/image_codec.hpp"

#include <algorithm>

namespace fs = std::filesystem;

namespace tezip {
namespace {

// A frame name comes from an archive, which may be hostile: it must stay a plain file name inside `dir`.
bool safe_file_name(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (char c : name) {
    if (c == '/' || c == '\\' || c == '\0') return false;
  }
  return true;
}

// Formats whose encoder here keeps every pixel of this geometry exactly.
bool keeps_pixels(const std::string& recorded, const Geometry& g) {
  const std::string format = parse_file_format(recorded).container;
  if (format == "png" || format == "pgm" || format == "ppm" || format == "tiff") return true;
  if (format == "bmp") return g.type == PixelType::U8;  // BMP has no 16-bit mode
  return false;
}

// Planar to interleaved samples; `swap_red_blue` turns R, G, B into the codec's B, G, R.
RasterImage to_interleaved(const Frame& frame, const Geometry& g, bool swap_red_blue) {
  RasterImage m;
  m.width = g.width;
  m.height = g.height;
  m.channels = g.channels;
  m.bits = g.type == PixelType::U8 ? 8 : 16;
  const std::size_t plane = g.plane_size();
  const std::size_t c = g.channels, n = plane * c;
  m.samples.resize(n * (m.bits / 8));
  const std::uint16_t* src = frame.pixels.data();
  auto channel = [&](std::size_t k) { return swap_red_blue && c == 3 ? 2 - k : k; };
  if (g.type == PixelType::U8) {
    std::uint8_t* p = m.samples.data();
    for (std::size_t i = 0; i < n; ++i) p[i] = std::uint8_t(src[channel(i % c) * plane + i / c]);
  } else {
    auto* p = reinterpret_cast<std::uint16_t*>(m.samples.data());
    for (std::size_t i = 0; i < n; ++i) p[i] = src[channel(i % c) * plane + i / c];
  }
  return m;
}


// A PNM file with the original's maxval and sample encoding (OpenCV writes only binary files with
// the full maxval). Samples above maxval, which only a lossy bound can produce, are clamped: the
// original was at most maxval, so clamping brings them closer to it.
std::vector<std::uint8_t> encode_pnm(const Frame& frame, const Geometry& g, const FileFormat& f) {
  const std::uint32_t maxval = f.maxval ? f.maxval : g.max_value();
  const bool colour = g.channels == 3;
  std::string text = std::string("P") + (colour ? (f.plain ? '3' : '6') : (f.plain ? '2' : '5')) + "\n" +
                     std::to_string(g.width) + " " + std::to_string(g.height) + "\n" + std::to_string(maxval) + "\n";
  std::vector<std::uint8_t> out(text.begin(), text.end());
  const std::size_t plane = g.plane_size();
  for (std::size_t i = 0; i < plane; ++i) {
    for (std::size_t k = 0; k < g.channels; ++k) {
      // Planes hold OpenCV's B, G, R order; PNM stores R, G, B.
      const std::size_t c = colour ? 2 - k : 0;
      const std::uint32_t v = std::min<std::uint32_t>(frame.pixels[c * plane + i], maxval);
      if (f.plain) {
        const std::string s = std::to_string(v);
        out.insert(out.end(), s.begin(), s.end());
        out.push_back((k + 1 == g.channels && (i + 1) % g.width == 0) ? '\n' : ' ');
      } else if (maxval > 255) {
        out.push_back(std::uint8_t(v >> 8));
        out.push_back(std::uint8_t(v & 0xff));
      } else {
        out.push_back(std::uint8_t(v));
      }
    }
  }
  return out;
}

}  // namespace

std::string output_file_name(const std::string& frame_name, const std::string& format, const Geometry& geometry,
                             OutputFormat output) {
  fs::path name(frame_name);
  if (output != OutputFormat::Original || !keeps_pixels(format, geometry)) name.replace_extension(".png");
  return name.string();
}

fs::path write_frame(const fs::path& dir, const Frame& frame, const Geometry& geometry, OutputFormat format) {
  if (!safe_file_name(frame.name)) throw OutputError("unsafe frame name '" + frame.name + "' (not a plain file name)");
  const fs::path name = output_file_name(frame.name, frame.format, geometry, format);
  const fs::path target = dir / name;
  const std::string file = target.string();

  if ((geometry.channels != 1 && geometry.channels != 3) || geometry.width == 0 || geometry.height == 0 ||
      geometry.width > (1u << 20) || geometry.height > (1u << 20)) {
    throw OutputError(file + ": cannot write a frame of " + std::to_string(geometry.width) + "x" +
                      std::to_string(geometry.height) + " with " + std::to_string(geometry.channels) + " channels");
  }
  if (frame.pixels.size() != geometry.pixel_count()) {
    throw OutputError(file + ": the frame has " + std::to_string(frame.pixels.size()) + " values, its geometry needs " +
                      std::to_string(geometry.pixel_count()));
  }
  if (geometry.type == PixelType::U8) {
    for (std::uint16_t v : frame.pixels) {
      if (v > 255) throw OutputError(file + ": an 8-bit frame holds the value " + std::to_string(v));
    }
  }

  // Encoded in memory, then written with checked writes: imwrite does not report a full disk.
  std::vector<std::uint8_t> encoded;
  const FileFormat recorded = parse_file_format(frame.format);
  const bool original = format == OutputFormat::Original && keeps_pixels(frame.format, geometry);
  if (original && (recorded.maxval || recorded.plain) && (recorded.container == "pgm" || recorded.container == "ppm")) {
    encoded = encode_pnm(frame, geometry, recorded);
  } else {
    // A colour .npy array holds R, G, B (NumPy's convention); image encoders expect B, G, R.
    const RasterImage image = to_interleaved(frame, geometry, frame.format == "npy");
    // A 1-bit PNG reads as 0 and 255; written 1-bit again when every pixel still is one of them.
    const bool bilevel = original && recorded.bits == 1 && geometry.type == PixelType::U8 &&
                         std::all_of(frame.pixels.begin(), frame.pixels.end(), [](std::uint16_t v) { return v == 0 || v == 255; });
    encoded = encode_image(name.extension().string(), image, bilevel, file);
  }
  write_file_atomically(target, encoded, /*create_folder=*/true);
  return target;
}

}  // namespace tezip
