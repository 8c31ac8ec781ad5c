#pragma once
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "format/frame.hpp"

namespace tezip {

// The frames of one sequence, in order. Geometry is known once the source is open and every
// frame must match it; a frame that does not raises InputError naming the file.
class SequenceSource {
 public:
  virtual ~SequenceSource() = default;
  // Sequence name: the sub-folder path relative to the dataset root ("" for a single sequence),
  // or "seq_00003" for the N sequences of an (N,T,H,W) array.
  virtual const std::string& name() const = 0;
  virtual const Geometry& geometry() const = 0;
  virtual std::size_t frame_count() const = 0;
  // Frame `index` (0-based). Video sources only read forwards: indices must increase.
  virtual Frame read(std::size_t index) = 0;
};

// How a 4-D .npy array is read: (T,H,W,C) one colour or gray sequence, or (N,T,H,W) N gray
// sequences. Auto: THWC when the last dimension is 1 or 3, NTHW otherwise (so an (N,T,H,3) array
// needs NTHW said).
enum class NpyLayout { Auto, THWC, NTHW };
std::string to_string(NpyLayout layout);
// "auto", "THWC" or "NTHW", any case; std::invalid_argument otherwise.
NpyLayout parse_npy_layout(const std::string& text);

struct SourceOptions {
  NpyLayout npy_layout = NpyLayout::Auto;
};

// Opens INPUT: a folder of frames, a folder whose sub-folders are sequences, a video file, or a
// .npy array (T,H,W[,C]) or (N,T,H,W) of uint8/uint16. Throws InputError naming the file.
// - Folder: image files (png, pgm, ppm, pnm, bmp, tif/tiff, jpg/jpeg, any case) directly inside
//   make one sequence named ""; otherwise each sub-folder holding image files is a sequence named
//   by its relative path ("cam1", "day2/cam1"). Natural order; hidden and other files are skipped.
//   A folder holding image files and sub-folders with image files is refused: either would be lost.
// - .npy (C order, '|u1' or '<u2'): 3-D is (T,H,W) gray; 4-D as options.npy_layout says (NpyLayout);
//   (N,T,H,W) makes N gray sequences "seq_00000", ... Colour arrays keep
//   their channel order, taken as R, G, B: `decompress` writes them as correct-colour PNG, while
//   image and video sources are stored in OpenCV's B, G, R order.
// - Any other file is opened as a video (OpenCV, FFmpeg first); frames are counted by decoding.
std::vector<std::unique_ptr<SequenceSource>> open_sources(const std::filesystem::path& input,
                                                          const SourceOptions& options = {});

// Natural order for file names: "f2" < "f10".
bool natural_less(const std::string& a, const std::string& b);

}  // namespace tezip
