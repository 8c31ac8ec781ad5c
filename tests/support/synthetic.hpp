#pragma once
// Synthetic image sequences for tests: shapes moving over a gradient, with seeded noise, so that
// frames are neither constant nor random and every predictor has something to do.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace tezip::test {

struct SyntheticSpec {
  int width = 32;
  int height = 24;
  int frames = 6;
  int channels = 1;        // 1 or 3
  int bits = 8;            // 8 or 16
  std::string ext = "png"; // png, pgm, ppm, tiff, bmp
  unsigned seed = 1;
  double noise = 2.0;      // standard deviation, in 8-bit steps (scaled for 16-bit)
  std::string prefix = "frame_";
};

// Frame t of the sequence described by `spec`, as OpenCV stores it (interleaved, B G R order).
inline cv::Mat synthetic_frame(const SyntheticSpec& spec, int t) {
  const int depth = spec.bits == 16 ? CV_16U : CV_8U;
  const double scale = spec.bits == 16 ? 257.0 : 1.0;
  const double max = spec.bits == 16 ? 65535.0 : 255.0;
  cv::Mat f(spec.height, spec.width, CV_MAKETYPE(CV_64F, spec.channels));
  for (int y = 0; y < spec.height; ++y)
    for (int x = 0; x < spec.width; ++x)
      for (int c = 0; c < spec.channels; ++c)
        f.ptr<double>(y)[x * spec.channels + c] =
            scale * (40.0 + 120.0 * x / std::max(1, spec.width - 1) + 60.0 * y / std::max(1, spec.height - 1) + 15.0 * c);
  // A disc and a box that move a little every frame.
  const cv::Scalar bright = cv::Scalar::all(scale * 230), dark = cv::Scalar::all(scale * 20);
  const int r = std::max(2, std::min(spec.width, spec.height) / 5);
  cv::circle(f, {(spec.width / 4 + 2 * t) % spec.width, spec.height / 2}, r, bright, cv::FILLED);
  cv::rectangle(f, cv::Rect((spec.width / 2 + t) % spec.width, (spec.height / 4 + t) % spec.height, r + 1, r),
                dark, cv::FILLED);
  std::mt19937 random(spec.seed * 7919u + unsigned(t));
  std::normal_distribution<double> noise(0.0, spec.noise * scale);
  double* p = f.ptr<double>(0);
  for (std::size_t i = 0; i < f.total() * std::size_t(spec.channels); ++i)
    p[i] = std::clamp(std::round(p[i] + (spec.noise > 0 ? noise(random) : 0.0)), 0.0, max);
  cv::Mat out;
  f.convertTo(out, depth);
  return out;
}

inline std::string synthetic_name(const SyntheticSpec& spec, int t) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d", t);
  return spec.prefix + buf + "." + spec.ext;
}

// Writes spec.frames frames into `dir` (created if needed); returns the paths in order.
inline std::vector<std::filesystem::path> write_synthetic_sequence(const std::filesystem::path& dir,
                                                                   const SyntheticSpec& spec) {
  std::filesystem::create_directories(dir);
  std::vector<std::filesystem::path> paths;
  for (int t = 0; t < spec.frames; ++t) {
    const auto path = dir / synthetic_name(spec, t);
    if (!cv::imwrite(path.string(), synthetic_frame(spec, t)))
      throw std::runtime_error("cannot write synthetic frame " + path.string());
    paths.push_back(path);
  }
  return paths;
}

// True when the two images have the same size, type and every pixel equal.
inline bool same_pixels(const cv::Mat& a, const cv::Mat& b) {
  if (a.size() != b.size() || a.type() != b.type()) return false;
  if (a.empty()) return true;
  cv::Mat diff;
  cv::absdiff(a.reshape(1), b.reshape(1), diff);
  return cv::countNonZero(diff) == 0;
}

// Largest absolute pixel difference (images of the same size and type).
inline double max_abs_difference(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat da, db;
  a.reshape(1).convertTo(da, CV_64F);
  b.reshape(1).convertTo(db, CV_64F);
  double lo = 0, hi = 0;
  cv::minMaxLoc(cv::abs(da - db), &lo, &hi);
  return hi;
}

}  // namespace tezip::test
