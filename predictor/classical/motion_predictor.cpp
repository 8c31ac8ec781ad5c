#include <algorithm>
#include <cstdlib>
#include <vector>

#include "predictor/classical/frame_history.hpp"
#include "predictor/classical/motion_predictor.hpp"

namespace tezip {
namespace {

constexpr int kBlock = 16;
constexpr int kRange = 4;

// Block matching that the decoder can repeat: the motion of each 16x16 block of y[t-1] is found
// against y[t-2] (both reconstructed, so no vectors are stored), and the block is assumed to keep
// moving the same way. Integer SAD on the first channel, a fixed scan order and ties broken towards
// the smaller vector make it bit-exact everywhere.
class MotionExtrapolationPredictor final : public HistoryPredictor {
 public:
  PredictorIdentity identity() const override {
    PredictorIdentity id;
    id.kind = "motion";
    id.configuration = "block=16,range=4";
    return id;
  }

  void forecast(std::span<GopState* const> gops, std::span<const std::span<std::uint16_t>> forecasts) const override {
    for (std::size_t i = 0; i < gops.size(); ++i) {
      const auto& state = static_cast<const FrameHistory&>(*gops[i]);
      if (state.older.empty()) {
        std::copy(state.last.begin(), state.last.end(), forecasts[i].begin());
        continue;
      }
      predict_one(state, forecasts[i]);
    }
  }

 private:
  static void predict_one(const FrameHistory& state, std::span<std::uint16_t> out) {
    const int width = int(state.shape.width), height = int(state.shape.height);
    const std::size_t plane = std::size_t(width) * height;
    const std::uint16_t* y1 = state.last.data();
    const std::uint16_t* y2 = state.older.data();
    for (int by = 0; by < height; by += kBlock)
      for (int bx = 0; bx < width; bx += kBlock) {
        const int bw = std::min(kBlock, width - bx), bh = std::min(kBlock, height - by);
        int best_dx = 0, best_dy = 0;
        std::uint64_t best = UINT64_MAX;
        // Search order by growing |v|: a later candidate must be strictly better to win.
        for (int radius = 0; radius <= kRange; ++radius)
          for (int dy = -radius; dy <= radius; ++dy)
            for (int dx = -radius; dx <= radius; ++dx) {
              if (std::max(std::abs(dx), std::abs(dy)) != radius) continue;
              if (bx - dx < 0 || by - dy < 0 || bx - dx + bw > width || by - dy + bh > height) continue;
              std::uint64_t sad = 0;
              for (int y = 0; y < bh && sad < best; ++y) {
                const std::uint16_t* a = y1 + std::size_t(by + y) * width + bx;
                const std::uint16_t* b = y2 + std::size_t(by + y - dy) * width + (bx - dx);
                std::uint32_t row = 0;
                for (int x = 0; x < bw; ++x) row += std::uint32_t(std::abs(int(a[x]) - int(b[x])));
                sad += row;
              }
              if (sad < best) {
                best = sad;
                best_dx = dx;
                best_dy = dy;
              }
            }
        // The content of this block moved by (dx, dy) from t-2 to t-1; at t it is another step on.
        for (std::uint32_t c = 0; c < state.shape.channels; ++c)
          for (int y = 0; y < bh; ++y)
            for (int x = 0; x < bw; ++x) {
              const int sx = std::clamp(bx + x - best_dx, 0, width - 1);
              const int sy = std::clamp(by + y - best_dy, 0, height - 1);
              out[c * plane + std::size_t(by + y) * width + bx + x] = y1[c * plane + std::size_t(sy) * width + sx];
            }
      }
  }
};

}  // namespace

std::unique_ptr<Predictor> make_motion_predictor() { return std::make_unique<MotionExtrapolationPredictor>(); }

}  // namespace tezip
