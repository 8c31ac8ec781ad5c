#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

#include "format/frame.hpp"

namespace tezip {

// The checked header of a .npy file (NumPy format versions 1.0, 2.0 and 3.0).
struct NpyHeader {
  PixelType type = PixelType::U8;      // dtype '|u1' (or '<u1') or '<u2'; nothing else
  std::vector<std::uint64_t> shape;    // C order; every dimension >= 1
  std::uint64_t data_offset = 0;       // where the array's bytes begin
  std::uint64_t data_bytes = 0;        // product(shape) * element size
};

// Reads and checks the header of `path`: magic, version, a dict with exactly 'descr',
// 'fortran_order' (must be False) and 'shape', a supported dtype, at most `max_dims` dimensions,
// and a file size equal to data_offset + data_bytes (so later reads at computed offsets are safe).
// Throws InputError naming the file.
NpyHeader read_npy_header(const std::filesystem::path& path, std::size_t max_dims = 4);

}  // namespace tezip
