#pragma once
// Small lossless archives for the Reader and Stream tests: a few synthetic sequences in
// sub-folders, compressed with short GOPs so there are many blocks to shard and shuffle.
#include <filesystem>
#include <memory>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

#include "compressor/encoder.hpp"
#include "synthetic.hpp"
#include "temp_dir.hpp"

namespace tezip::test {

struct LoaderData {
  std::shared_ptr<TempDir> dir = std::make_shared<TempDir>("tezip-loader");
  std::filesystem::path archive;
  std::vector<std::string> names;                       // sequence names, in archive order
  std::vector<std::vector<std::filesystem::path>> files;  // frame files of each sequence
};

// `lengths[i]` frames in sequence "s<i>"; `colour16` makes the last sequence 3-channel uint16.
inline LoaderData make_loader_data(const std::vector<int>& lengths, std::uint64_t gop = 3, bool colour16 = false,
                                   const std::string& prefix = "s") {
  LoaderData d;
  const auto src = d.dir->path() / "src";
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    SyntheticSpec spec;
    spec.frames = lengths[i];
    spec.width = 20;
    spec.height = 12;
    spec.seed = unsigned(i + 1);
    if (colour16 && i + 1 == lengths.size()) spec.channels = 3, spec.bits = 16;
    const std::string name = prefix + std::to_string(i);
    d.names.push_back(name);
    d.files.push_back(write_synthetic_sequence(src / name, spec));
  }
  CompressOptions options;  // lossless by default
  options.gop.size = gop;
  options.threads = 1;
  d.archive = d.dir->path() / "data.tzp";
  compress(src, d.archive, options);
  return d;
}

inline cv::Mat original_frame(const LoaderData& d, std::size_t sequence, std::size_t t) {
  return cv::imread(d.files.at(sequence).at(t).string(), cv::IMREAD_UNCHANGED);
}

}  // namespace tezip::test
