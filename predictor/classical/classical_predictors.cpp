#include <algorithm>
#include <stdexcept>
#include <vector>

#include "predictor/classical/frame_history.hpp"
#include "predictor/classical/motion_predictor.hpp"
#include "predictor/predictor.hpp"

namespace tezip {
namespace {

PredictorIdentity named(const char* kind) {
  PredictorIdentity id;
  id.kind = kind;
  return id;
}

// Forecasts the previous frame: `previous`, and what `auto` and `bidirectional` forecast as
// sequential predictors (the dynamic GOP window's test).
class PreviousFrameForecast : public HistoryPredictor {
 public:
  void forecast(std::span<GopState* const> gops, std::span<const std::span<std::uint16_t>> forecasts) const override {
    for (std::size_t i = 0; i < gops.size(); ++i) {
      const auto& state = static_cast<const FrameHistory&>(*gops[i]);
      std::copy(state.last.begin(), state.last.end(), forecasts[i].begin());
    }
  }
};

class PreviousFramePredictor final : public PreviousFrameForecast {
 public:
  PredictorIdentity identity() const override { return named("previous"); }
  bool forecasts_previous_frame() const override { return true; }
};

class LinearExtrapolationPredictor final : public HistoryPredictor {
 public:
  PredictorIdentity identity() const override { return named("linear"); }
  void forecast(std::span<GopState* const> gops, std::span<const std::span<std::uint16_t>> forecasts) const override {
    for (std::size_t i = 0; i < gops.size(); ++i) {
      const auto& state = static_cast<const FrameHistory&>(*gops[i]);
      auto out = forecasts[i];
      if (state.older.empty()) {  // second frame of a GOP: nothing to extrapolate from yet
        std::copy(state.last.begin(), state.last.end(), out.begin());
        continue;
      }
      const std::int32_t max_value = std::int32_t(state.shape.max_value);
      for (std::size_t p = 0; p < out.size(); ++p)
        out[p] = std::uint16_t(std::clamp(2 * std::int32_t(state.last[p]) - std::int32_t(state.older[p]), 0, max_value));
    }
  }
};

// Key frames only: the spatial (intra) coder handles every frame, so this never forecasts.
class IntraOnlyPredictor final : public Predictor {
 public:
  PredictorIdentity identity() const override { return named("intra"); }
  bool intra_only() const override { return true; }
  std::unique_ptr<GopState> begin_gop(const FrameShape&, std::span<const std::uint16_t>) const override {
    return std::make_unique<FrameHistory>();
  }
  void forecast(std::span<GopState* const>, std::span<const std::span<std::uint16_t>>) const override {
    throw std::logic_error("the intra predictor has no temporal forecast");
  }
  void observe(std::span<GopState* const>, std::span<const std::span<const std::uint16_t>>) const override {}
};

// Hierarchical bidirectional GOPs (B-frames): the GOP codec forecasts each frame from the
// reconstructions on both sides; as a sequential predictor (the dynamic window's test) it is `previous`.
class BidirectionalPredictor final : public PreviousFrameForecast {
 public:
  PredictorIdentity identity() const override { return named("bidirectional"); }
  bool bidirectional() const override { return true; }
};

// The encoder's choice per GOP (compressor/gop_codec.cpp measures it): the default, so that no
// user has to know that depth maps want `intra`. Between the choices it forecasts as `previous`,
// which the dynamic GOP window uses to place key frames.
class AutoPredictor final : public PreviousFrameForecast {
 public:
  PredictorIdentity identity() const override { return named("auto"); }
  bool forecasts_previous_frame() const override { return true; }
  std::span<const Predictor* const> choices() const override {
    static const PreviousFramePredictor previous;
    static const IntraOnlyPredictor intra;
    static const LinearExtrapolationPredictor linear;
    static const BidirectionalPredictor bidirectional;
    // The order is the archive format (chunk predictor byte - 1); ties go to the first.
    static const Predictor* const list[] = {&previous, &intra, &linear, &bidirectional};
    return list;
  }
};

}  // namespace

std::unique_ptr<Predictor> make_classical_predictor(const std::string& kind) {
  if (kind == "auto") return std::make_unique<AutoPredictor>();
  if (kind == "intra") return std::make_unique<IntraOnlyPredictor>();
  if (kind == "bidirectional") return std::make_unique<BidirectionalPredictor>();
  if (kind == "previous") return std::make_unique<PreviousFramePredictor>();
  if (kind == "linear") return std::make_unique<LinearExtrapolationPredictor>();
  if (kind == "motion") return make_motion_predictor();
  throw std::invalid_argument("unknown predictor '" + kind + "' (auto, intra, previous, linear, motion, bidirectional)");
}

}  // namespace tezip
