#pragma once
// How a PredNet's arithmetic is carried out at coding time. Torch TUs only.
#include <torch/torch.h>

#include <memory>
#include <string>

#include "predictor/learned/prednet.hpp"

namespace tezip {

// Runs a trained PredNet on integer pixels, one time step at a time, for a batch of sequences.
// Frames are int32 tensors [B, C, H, W] of pixel values 0..max_value, with H and W multiples of
// options().padding_multiple() and C = options().a_channels[0]. Implementations are const and
// thread-safe: all per-sequence memory is in the PredNetState (whose tensors each engine lays out as
// it likes, batch first, so that states of several sequences concatenate along dimension 0).
class PredNetEngine {
 public:
  virtual ~PredNetEngine() = default;
  // "float32" (libtorch, machine dependent) or "exact" (integer, identical everywhere).
  virtual std::string arithmetic() const = 0;
  virtual const PredNetOptions& options() const = 0;
  virtual PredNetState initial_state(std::int64_t batch, std::int64_t height, std::int64_t width) const = 0;
  // The forecast of the next frame: int32 [B, C, H, W] in 0..max_value.
  virtual torch::Tensor predict(PredNetState& state, std::uint32_t max_value) const = 0;
  // Feeds the frame that came (int32 pixels, as above).
  virtual void correct(PredNetState& state, const torch::Tensor& pixels, std::uint32_t max_value) const = 0;
};

// libtorch float32 on the CPU: the network as trained. Its results may differ between CPU kernels
// (DESIGN.md §6), which the archive's fingerprint detects.
std::unique_ptr<PredNetEngine> make_float_engine(PredNet net);
// Integer inference (predictor/learned/prednet_exact.cpp): bit-identical on every machine.
std::unique_ptr<PredNetEngine> make_exact_engine(PredNet net);

}  // namespace tezip
