#pragma once
// How a PredNet's arithmetic is carried out at coding time, torch-free: the exact integer engine
// lives in the core (predictor/prednet_exact.hpp), the float32 one in the learned module
// (libtorch). The PredNet predictor (predictor/prednet_predictor.cpp) drives either.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "predictor/prednet_options.hpp"

namespace tezip {

// The recurrent state of `samples` sequences (a GOP: a gray model runs each channel of a colour
// frame as its own sequence), laid out as its engine likes.
class PredNetEngineState {
 public:
  virtual ~PredNetEngineState() = default;
};

// Runs a trained PredNet on integer pixels, one time step at a time, for a batch of states.
// A state's frames are int32 [samples][C][H][W] of pixel values 0..max_value, C =
// options().a_channels[0], H and W multiples of options().padding_multiple(). Implementations are
// const and thread-safe: all per-sequence memory is in the states. A state's results must not
// depend on the other states of the batch, except for float32, where libtorch's kernels may
// (DESIGN.md §6; the predictor then codes one GOP per call).
class PredNetEngine {
 public:
  virtual ~PredNetEngine() = default;
  // "exact" (integer, identical everywhere) or "float32" (libtorch, machine dependent).
  virtual std::string arithmetic() const = 0;
  // What the archive records: "exact", or "float32; libtorch V; CPU capability X; oneDNN on|off...".
  virtual std::string arithmetic_description() const = 0;
  virtual const PredNetOptions& options() const = 0;
  // Throws std::invalid_argument when height or width is not a multiple of padding_multiple().
  virtual std::unique_ptr<PredNetEngineState> initial_state(int samples, int height, int width) const = 0;
  // The forecast of the next frame of each state into forecasts[i] (its frame size, 0..max_value).
  virtual void predict(std::span<PredNetEngineState* const> states, std::uint32_t max_value,
                       std::span<const std::span<std::int32_t>> forecasts) const = 0;
  // Feeds the frame that came (frames[i] for states[i], int32 pixels as above).
  virtual void correct(std::span<PredNetEngineState* const> states, std::span<const std::span<const std::int32_t>> frames,
                       std::uint32_t max_value) const = 0;
};

}  // namespace tezip
