#pragma once
// A frame's original file format as the archive records it (FrameEntry::format): the container
// ("png", "pgm", "ppm", "bmp", "tiff", "jpeg", "video", "npy") plus what the decoded pixels do not
// show but a faithful file needs: "pgm:100" (a PNM maxval other than 255 or 65535), "pgm:a" (plain,
// ASCII PNM), "png:1" / "png:2" / "png:4" (gray PNG of that bit depth), "png:p" (palette PNG).
// Readers that do not know a qualifier see an unknown format and write PNG.
#include <cstdint>
#include <filesystem>
#include <string>

namespace tezip {

struct FileFormat {
  std::string container;
  std::uint32_t maxval = 0;  // PNM: 0 when the pixel type's full range (255 or 65535)
  bool plain = false;        // PNM: ASCII samples (P2, P3)
  unsigned bits = 0;         // PNG gray: 1, 2 or 4; 0 when 8 or 16
  bool palette = false;      // PNG colour type 3 (read as 8-bit colour)
};

FileFormat parse_file_format(const std::string& text);
std::string to_string(const FileFormat& format);

// The format of the image file at `path`, whose container is `container`: for PNM and PNG, the
// header is read for the qualifiers above; `max_value` is the decoded pixel type's.
FileFormat detect_file_format(const std::filesystem::path& path, const std::string& container, std::uint32_t max_value);

// How a frame of this format comes back from `decompress --format original`: "" when as the same
// kind of file (container, bit depth, channels, maxval, samples), otherwise what differs.
std::string restoration_note(const FileFormat& format);

}  // namespace tezip
