#pragma once
#include <filesystem>
#include <string>

#include "format/frame.hpp"

namespace tezip {

enum class OutputFormat { Original, Png };

// Writes one decoded frame into `dir`, under its original name and file type when that type keeps
// the pixels exactly (png, pgm/ppm, bmp, tiff); frames that came from lossy or container sources
// (jpeg, video, npy) are written as PNG with the extension changed. Returns the path written.
// The file is written under a temporary name and renamed, so a failure leaves no partial file.
// The file name write_frame gives a frame: its own, or with the extension changed to ".png".
std::string output_file_name(const std::string& name, const std::string& format, const Geometry& geometry,
                             OutputFormat output);

std::filesystem::path write_frame(const std::filesystem::path& dir, const Frame& frame,
                                  const Geometry& geometry, OutputFormat format);

}  // namespace tezip
