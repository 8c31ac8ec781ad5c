// Next-frame MSE of a trained PredNet on whole frames of held-out data, next to the previous frame
// and linear extrapolation (the model card's figures; models/*.md).
// Usage: prednet_eval MODEL HELD_OUT_FRACTION WARMUP INPUT... (threads: OMP_NUM_THREADS)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "io/source.hpp"
#include "predictor/model_file.hpp"
#include "predictor/training.hpp"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: prednet_eval MODEL HELD_OUT_FRACTION WARMUP INPUT...\n");
    return 1;
  }
  const auto model = tezip::load_model_file(argv[1]);
  const double held_out = std::atof(argv[2]);
  const int warmup = std::atoi(argv[3]);
  std::printf("model %s, weights sha256 %s\n", argv[1], model.weights_sha256.c_str());
  std::printf("| data | frames | prednet | previous frame | linear | prednet / previous |\n|---|---|---|---|---|---|\n");
  for (int i = 4; i < argc; ++i) {
    for (auto& source : tezip::open_sources(argv[i])) {
      tezip::TrainingSequence s;
      const auto& g = source->geometry();
      s.shape = {g.width, g.height, g.channels, g.max_value()};
      s.name = argv[i];
      for (std::size_t f = 0; f < source->frame_count(); ++f) {
        const tezip::Frame frame = source->read(f);
        s.frames.emplace_back(frame.pixels.begin(), frame.pixels.end());
      }
      const auto q = tezip::evaluate_forecasts(model, {s}, held_out, warmup);
      std::printf("| %s (%ux%u, %u ch) | %llu | %.6f | %.6f | %.6f | %.3f |\n", argv[i], g.width, g.height, g.channels,
                  (unsigned long long)q.frames, q.prednet_mse, q.previous_mse, q.linear_mse, q.prednet_mse / q.previous_mse);
      std::fflush(stdout);
    }
  }
}
