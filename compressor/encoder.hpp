#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "compressor/archive.hpp"

namespace tezip {

// Called with raw pixel bytes done and in total.
using ProgressFn = std::function<void(std::uint64_t done, std::uint64_t total)>;

struct CompressOptions {
  CodingSettings coding;
  std::string predictor = "previous";
  GopPolicy gop;
  unsigned threads = 0;  // 0: all cores
  bool overwrite = false;
  ProgressFn progress;
};

struct CompressReport {
  std::uint64_t sequences = 0;
  std::uint64_t frames = 0;
  std::uint64_t chunks = 0;
  std::uint64_t raw_bytes = 0;
  std::uint64_t archive_bytes = 0;
  double seconds = 0;
};

// Compresses INPUT (see open_sources) into the archive `output`, written atomically.
CompressReport compress(const std::filesystem::path& input, const std::filesystem::path& output,
                        const CompressOptions& options);

unsigned resolve_threads(unsigned requested);

}  // namespace tezip
