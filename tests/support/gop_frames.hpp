#pragma once
// GOP-level test frames (planar uint16, as encode_gops takes them).
#include <algorithm>
#include <random>
#include <vector>

#include "compressor/gop_codec.hpp"

namespace tezip::test {

// A moving bright disc over a drifting gradient with sensor noise: what camera sequences look like.
inline GopFrames moving_scene(const FrameShape& shape, std::size_t frames, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0, shape.max_value / 200.0);
  GopFrames out;
  for (std::size_t t = 0; t < frames; ++t) {
    std::vector<std::uint16_t> f(shape.size());
    for (std::uint32_t c = 0; c < shape.channels; ++c)
      for (std::uint32_t y = 0; y < shape.height; ++y)
        for (std::uint32_t x = 0; x < shape.width; ++x) {
          double v = 0.3 + 0.3 * (x + 2.0 * t) / shape.width + 0.1 * c;
          const double dx = x - (10.0 + 3 * t), dy = y - (12.0 + t);
          if (dx * dx + dy * dy < 60) v = 0.9;
          if (x < 4) v = 0;  // exact zeros: PwRel must keep them
          v = v * shape.max_value + (v > 0 ? noise(rng) : 0);
          f[(std::size_t(c) * shape.height + y) * shape.width + x] = std::uint16_t(std::clamp(v, 0.0, double(shape.max_value)));
        }
    out.emplace_back(f.begin(), f.end());
  }
  return out;
}

}  // namespace tezip::test
