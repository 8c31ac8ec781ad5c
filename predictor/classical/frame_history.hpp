#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "codecs/buffer_pool.hpp"
#include "predictor/predictor.hpp"

namespace tezip {

// The last two reconstructed frames of a GOP; `older` is empty until two frames were seen. Frames
// are megabytes: their blocks come from the buffer pool, so each GOP does not fault them in again.
struct FrameHistory final : GopState {
  FrameShape shape;
  std::vector<std::uint16_t, codecs::BufferAllocator<std::uint16_t>> last, older;
};

// Base of the classical predictors, which forecast from the last two reconstructed frames.
class HistoryPredictor : public Predictor {
 public:
  bool forecast_is_pure() const override { return true; }
  std::unique_ptr<GopState> begin_gop(const FrameShape& shape, std::span<const std::uint16_t> key_frame) const override {
    auto state = std::make_unique<FrameHistory>();
    state->shape = shape;
    state->last.assign(key_frame.begin(), key_frame.end());
    return state;
  }

  void observe(std::span<GopState* const> gops, std::span<const std::span<const std::uint16_t>> frames) const override {
    for (std::size_t i = 0; i < gops.size(); ++i) {
      auto& state = static_cast<FrameHistory&>(*gops[i]);
      state.older.swap(state.last);
      state.last.assign(frames[i].begin(), frames[i].end());
    }
  }
};

}  // namespace tezip
