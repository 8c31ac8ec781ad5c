#pragma once
// Image files and video, through OpenCV in the module libtezip_images.so (predictor/shared_module.hpp):
// the core never links OpenCV and its ~250 libraries, so a loader or a `tezip verify` starts without
// them; compress, decompress to image files and `verify --against` load the module on first use.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace tezip {

// One image, interleaved in the codec's channel order (B, G, R for colour), rows of
// width * channels samples of 8 or 16 bits (16-bit samples in this machine's byte order).
struct RasterImage {
  std::uint32_t width = 0, height = 0, channels = 0;
  std::uint32_t bits = 8;  // 8 or 16; 0 for any other sample type (which sources refuse)
  std::vector<std::uint8_t> samples;
};

// Decodes an image file (PNG, PNM, BMP, TIFF, JPEG, ... as the codec's back end reads them). Throws
// InputError naming the file when it cannot be read or decoded.
RasterImage read_image_file(const std::filesystem::path& path);

// Encodes `image` in the format named by `extension` (".png", ".tif", ...); `bilevel` asks PNG for
// 1-bit samples (every sample 0 or 255). Throws OutputError naming `file`.
std::vector<std::uint8_t> encode_image(const std::string& extension, const RasterImage& image, bool bilevel,
                                       const std::string& file);

// Frames of a video file, decoded in order.
class VideoDecoder {
 public:
  virtual ~VideoDecoder() = default;
  // The next frame into `image`; false at the end (or on a frame that cannot be decoded).
  virtual bool read(RasterImage& image) = 0;
  // Skips the next frame without converting it; false at the end.
  virtual bool skip() = 0;
};

// Throws InputError when `path` is not a video the back end can open.
std::unique_ptr<VideoDecoder> open_video(const std::filesystem::path& path);

}  // namespace tezip
