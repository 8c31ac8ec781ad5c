#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tezip {

// The options that rebuild a PredNet (Lotter, Kreiman & Cox 2016). Written into every model file,
// so a model file alone says how to rebuild its network. Torch-free on purpose.
struct PredNetOptions {
  // A stack: a_channels[0] is the frame's channel count (1: a gray model, run per channel on colour);
  // a_channels[l] the channels of layer l's target A_l. The KITTI model is {3, 48, 96, 192}.
  std::vector<int> a_channels = {1, 16, 32, 64};
  // R stack: channels of each layer's ConvLSTM state; empty means the same as a_channels.
  std::vector<int> r_channels;
  int kernel = 3;  // every convolution is kernel x kernel, 'same' padding
  // Weights of each layer's mean error in the training loss; layers past the end weigh 0 (PredNet's
  // L_0 is {1}, its L_all {1, 0.1, 0.1, 0.1}).
  std::vector<double> layer_loss = {1.0};
  // The frame forecast: false, PredNet's min(relu(ahat0(R_0)), 1); true, a correction to the last
  // frame seen, clamp(A_0[t-1] + ahat0(R_0), 0, 1), so that a network whose ahat0 is zero forecasts
  // exactly the previous frame and training starts at that baseline. JSON "forecast": "residual"
  // (the key is absent for PredNet's own forecast, so older model files and archives are unchanged).
  bool residual = false;

  int layers() const { return int(a_channels.size()); }
  int r(int layer) const { return r_channels.empty() ? a_channels[layer] : r_channels[layer]; }
  double loss_weight(int layer) const { return layer < int(layer_loss.size()) ? layer_loss[layer] : 0.0; }
  // Frames are padded to a multiple of this so that every pooling halves exactly.
  int padding_multiple() const { return 1 << (layers() - 1); }
  // The network's parameters in order, as its model file lists them: per layer l, "lstm<l>"
  // ([E_l, R_l, up(R_{l+1})] -> the 4 gates i, f, o, g of R_l), "ahat<l>" (R_l -> A_l) and for
  // l >= 1 "a<l>" (E_{l-1} -> A_l before pooling), each a ".weight" [out, in, kernel, kernel] and
  // a ".bias" [out] (torch's Conv2d and its named_parameters() order).
  struct Parameter {
    std::string name;
    std::vector<std::int64_t> shape;
  };
  std::vector<Parameter> parameters() const;
  // Throws std::invalid_argument naming the bad option.
  void validate() const;
  std::string to_json() const;
  // Throws std::invalid_argument on malformed text or invalid options.
  static PredNetOptions from_json(const std::string& text);
};

}  // namespace tezip
