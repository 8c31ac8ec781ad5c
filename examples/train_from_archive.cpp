// Trains a small next-frame predictor straight from a tezip archive with libtorch:
// the first T-1 frames of each clip, stacked as channels, predict the last one.
//   train_from_archive DATA.tzp [epochs=2] [clip_len=4] [batch=16]
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "loader/torch/clip_dataset.hpp"

struct NextFrameImpl : torch::nn::Module {
  NextFrameImpl(int in, int out)
      : a(register_module("a", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, 16, 3).padding(1)))),
        b(register_module("b", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, out, 3).padding(1)))) {}
  torch::Tensor forward(torch::Tensor x) { return b(torch::relu(a(x))); }
  torch::nn::Conv2d a, b;
};
TORCH_MODULE(NextFrame);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: train_from_archive DATA.tzp [epochs] [clip_len] [batch]\n");
    return 2;
  }
  const int epochs = argc > 2 ? std::stoi(argv[2]) : 2;
  const std::size_t clip_len = argc > 3 ? std::stoul(argv[3]) : 4, batch = argc > 4 ? std::stoul(argv[4]) : 16;
  tezip::StreamOptions options;
  options.clip_len = clip_len;
  options.stride = clip_len;
  options.shuffle_buffer = 64;
  options.threads = 2;
  tezip::torch_loader::ClipDataset dataset(argv[1], options, torch::kFloat32);
  const tezip::Reader probe(argv[1]);
  const int channels = int(probe.geometry(0).channels);
  NextFrame model(channels * int(clip_len - 1), channels);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  for (int epoch = 0; epoch < epochs; ++epoch) {
    dataset.set_epoch(std::uint64_t(epoch));
    double total = 0;
    int steps = 0;
    for (;;) {
      auto clips = dataset.get_batch(batch);  // (B, T, C, H, W)
      if (!clips.defined()) break;
      const auto n = clips.size(0), h = clips.size(3), w = clips.size(4);
      auto input = clips.narrow(1, 0, std::int64_t(clip_len) - 1).reshape({n, -1, h, w});
      auto target = clips.select(1, std::int64_t(clip_len) - 1);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(input), target);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      ++steps;
    }
    std::printf("epoch %d: %d steps, mean loss %.5f\n", epoch, steps, steps ? total / steps : 0.0);
  }
  return 0;
}
