#pragma once
// Cuts a sequence into GOPs as its frames arrive (DESIGN.md §2): static windows of at most
// `max_gop` frames (TEZIP's SWP), or TEZIP's dynamic window (DWP): a new key frame when the
// predictor's forecast of the next frame, made from the GOP's original frames so far, misses it by a
// mean squared error (pixels scaled to [0, 1]) above the policy's threshold; `max_gop` still bounds
// the GOP. A predictor that codes every frame spatially gets static windows.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "format/archive.hpp"
#include "predictor/predictor.hpp"

namespace tezip {

class Grouper {
 public:
  Grouper(const Predictor& predictor, const FrameShape& shape, const GopPolicy& policy, std::size_t max_gop);
  // Takes the next frame; true when it starts a new GOP, the previous one being complete (never for
  // the first frame).
  bool next(std::span<const std::uint16_t> frame);

 private:
  const Predictor& predictor_;
  FrameShape shape_;
  bool dynamic_;
  double threshold_;
  std::size_t max_gop_;
  std::size_t count_ = 0;         // frames in the current GOP
  std::unique_ptr<GopState> probe_;  // dynamic: the predictor fed the current GOP's original frames
  std::vector<std::uint16_t> forecast_;
};

}  // namespace tezip
