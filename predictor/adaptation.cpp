#include "predictor/adaptation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace tezip {

std::vector<std::vector<FrameWindow>> adapt_sample(const std::vector<std::size_t>& frames, const std::vector<std::size_t>& frame_values,
                                                   std::uint64_t max_values) {
  constexpr std::size_t kWindow = 20;  // frames: two clips of 10
  std::uint64_t total = 0;
  for (std::size_t s = 0; s < frames.size(); ++s) total += std::uint64_t(frames[s]) * frame_values[s];
  std::vector<std::vector<FrameWindow>> out(frames.size());
  const double keep = total <= max_values ? 1.0 : double(max_values) / double(total);
  for (std::size_t s = 0; s < frames.size(); ++s) {
    const std::size_t n = frames[s];
    if (n == 0) continue;
    if (keep >= 1.0 || n <= kWindow) {
      out[s].push_back({0, n});
      continue;
    }
    const std::size_t windows = std::max<std::size_t>(1, std::size_t(std::floor(keep * double(n) / double(kWindow))));
    for (std::size_t k = 0; k < windows; ++k) {
      const std::size_t first = windows == 1 ? (n - kWindow) / 2 : k * (n - kWindow) / (windows - 1);
      out[s].push_back({first, kWindow});
    }
  }
  return out;
}

double auto_adapt_seconds(std::uint64_t values, unsigned threads) {
  // Measured (docs/training.md, "Adapting to the input"): `tezip compress --predictor prednet -T 1`
  // codes 3.8 million values a second on castle (640x480) and 2.0 million on Moving MNIST (64x64)
  // on the 2-core build machine; 3 million is between. Below 5 s a training run learns nothing.
  constexpr double kValuesPerSecond = 3e6;
  const double seconds = double(values) / (kValuesPerSecond * std::max(1u, threads));
  return std::clamp(seconds, 5.0, 600.0);
}

AdaptResult adapt_prednet(const std::vector<TrainingSequence>& sequences, const AdaptOptions& options) {
  if (!(options.seconds > 0)) throw std::invalid_argument("adapt_prednet: the time budget must be positive");
  TrainingOptions t;
  t.net = options.start ? options.start->options : options.net;
  t.net.residual = options.residual;
  t.initial = options.start;
  std::size_t shortest = std::numeric_limits<std::size_t>::max();
  std::uint32_t height = std::numeric_limits<std::uint32_t>::max(), width = height;
  for (const auto& s : sequences) {
    shortest = std::min(shortest, s.frames.size());
    height = std::min(height, s.shape.height);
    width = std::min(width, s.shape.width);
  }
  if (sequences.empty() || shortest < 3)
    throw TrainingError("adapting PredNet needs sequences of at least 3 frames");
  const std::uint32_t m = std::uint32_t(t.net.padding_multiple());
  t.nt = int(std::min<std::size_t>(10, shortest));
  // Fewer than 16 sequences hold out their last frames (at least nt): with short sequences, less.
  if (sequences.size() < 16 && shortest < 2 * std::size_t(t.nt)) t.nt = int(std::max<std::size_t>(3, shortest / 2));
  t.crop_height = int(std::min<std::uint32_t>(64, height / m * m));
  t.crop_width = int(std::min<std::uint32_t>(64, width / m * m));
  if (t.crop_height < int(m) || t.crop_width < int(m))
    throw TrainingError("adapting PredNet needs frames of at least " + std::to_string(m) + "x" + std::to_string(m) + " pixels");
  t.batch = 4;
  t.steps = 25;        // a validation every 25 steps: the best of them is kept
  t.epochs = 1 << 20;  // the budget ends training
  t.time_budget = options.seconds;
  t.lr = options.start ? 1e-3 : 2e-3;
  t.lr_drop_at = 0.75;
  t.val_clips = 16;
  t.seed = options.seed;
  t.threads = std::max(1, options.threads);
  t.data_json = nlohmann::json{{"adapted", true}, {"budget_seconds", options.seconds},
                               {"start", options.start ? options.start->weights_sha256 : std::string("random")}}
                    .dump();
  TrainingCallbacks callbacks;
  callbacks.on_epoch = options.on_epoch;
  TrainingResult trained = train_prednet(sequences, t, callbacks);
  AdaptResult result;
  result.model = std::move(trained.model);
  result.epochs = std::move(trained.epochs);
  result.seconds = trained.seconds;
  for (const auto& e : result.epochs)
    if (e.epoch == trained.best_epoch) result.val_mse = e.val_mse, result.previous_mse = e.previous_mse;
  // The model travels in every archive: a summary, not the per-epoch history train writes.
  result.model.metadata_json = nlohmann::json{{"trainer", "tezip compress --adapt"},
                                              {"start", options.start ? options.start->weights_sha256 : std::string("random")},
                                              {"budget_seconds", options.seconds},
                                              {"training_seconds", result.seconds},
                                              {"epochs", int(result.epochs.size())},
                                              {"best_epoch", trained.best_epoch},
                                              {"val_mse", result.val_mse},
                                              {"previous_mse", result.previous_mse},
                                              {"seed", options.seed},
                                              {"weight_bits", options.weight_bits}}
                                   .dump();
  // It travels as version 3, its weights rounded (docs/training.md, "The embedded model's size"):
  // the encoder codes with these weights, as the decoder will.
  result.model = compact_model(result.model, options.weight_bits, "the adapted PredNet");
  return result;
}

}  // namespace tezip
