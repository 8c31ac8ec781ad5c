#pragma once
// PredNet (Lotter, Kreiman & Cox 2016) as a torch::nn::Module. Torch TUs only.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "predictor/model_file.hpp"
#include "predictor/prednet_options.hpp"

namespace tezip {

// The recurrent state of a batch of sequences: per layer, the ConvLSTM output R and cell c, the
// error units E, and the latest prediction Ahat of layer 0 (the frame forecast).
struct PredNetState {
  std::vector<torch::Tensor> r, c, e;
  torch::Tensor forecast;
  torch::Tensor last;  // the last frame seen (zeros before the first): the residual forecast's base
};

// One time step is `predict` (top-down: R from the previous errors, then the forecast of the next
// frame) followed by `correct` (bottom-up: error units against the frame that actually came).
// Frames are [B, C, H, W] in [0, 1] with H and W multiples of options.padding_multiple().
class PredNetImpl : public torch::nn::Module {
 public:
  explicit PredNetImpl(PredNetOptions options);
  const PredNetOptions& options() const { return options_; }

  PredNetState initial_state(std::int64_t batch, std::int64_t height, std::int64_t width,
                             const torch::TensorOptions& tensor_options) const;
  torch::Tensor predict(PredNetState& state);
  // Returns each layer's mean error (for the training loss), [layers].
  torch::Tensor correct(PredNetState& state, const torch::Tensor& frame);

  // Training: frames [B, T, C, H, W] in [0, 1]. The loss weighs each layer's mean error by
  // options.layer_loss and each time step after the first equally (t = 0 predicts from nothing).
  torch::Tensor loss(const torch::Tensor& frames);
  // Forecasts of every frame given the frames before it: [B, T, C, H, W] (t = 0 is all zeros).
  torch::Tensor forecasts(const torch::Tensor& frames);

  // The convolutions, exposed for the exact (integer) inference path:
  // lstm[l]: [E_l, R_l, up(R_{l+1})] -> 4 R_l gates (i, f, o, g); ahat[l]: R_l -> A_l;
  // a[l] (l >= 1): E_{l-1} -> A_l before pooling.
  std::vector<torch::nn::Conv2d> lstm, ahat, a;

 private:
  PredNetOptions options_;
};
TORCH_MODULE(PredNet);

// Keras's hard sigmoid, PredNet's gate activation.
inline torch::Tensor hard_sigmoid(const torch::Tensor& x) { return (0.2 * x + 0.5).clamp(0.0, 1.0); }

// Model files <-> modules. make_model_file writes version 2 (the tensor list); load_prednet reads
// version 2 and version 1 (torch::save) and throws ModelError when the weights do not fit the options.
ModelFile make_model_file(PredNet& net, const std::string& metadata_json);
PredNet load_prednet(const ModelFile& model, const std::string& name);
// The parameters as the tensor list of a version-2 file, in the network's order (bit for bit).
std::vector<WeightTensor> weight_tensors(PredNet& net);

}  // namespace tezip
