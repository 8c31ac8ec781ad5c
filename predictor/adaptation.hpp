#pragma once
// Adapting a PredNet to the data it is about to code (`tezip compress --adapt`): a short training
// run, within a time budget, on clips of the input's own frames, starting from a shipped model
// (fine-tuning) or from random weights. Torch-free: the training runs in the learned module, so in a
// build without libtorch this throws LearnedModuleError.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "predictor/model_file.hpp"
#include "predictor/prednet_options.hpp"
#include "predictor/training.hpp"

namespace tezip {

struct AdaptOptions {
  double seconds = 0;  // training time budget; <= 0: no adaptation
  // Fine-tune these weights; null: train `net` from random weights.
  std::shared_ptr<const ModelFile> start;
  PredNetOptions net;     // the network when `start` is null
  bool residual = true;   // forecast a correction to the last frame (PredNetOptions::residual)
  std::uint64_t seed = 1;  // clips, crops and (from scratch) weights
  int threads = 1;         // torch threads
  // The kept model's weights are rounded to this many bits per output channel's scale and stored
  // compact (model format 3; compact_model); 0: exact, still compact.
  int weight_bits = 8;
  std::function<void(const EpochReport&)> on_epoch;
};

struct AdaptResult {
  ModelFile model;  // the best of the starting weights and every epoch, on the held-out clips
  std::vector<EpochReport> epochs;  // epoch 0: the starting weights (fine-tuning)
  double seconds = 0;
  double val_mse = 0, previous_mse = 0;  // of `model`, on the held-out clips (pixels in [0, 1])
};

// Trains on `sequences` (a sample of the input: adapt_sample) for about options.seconds. Throws
// TrainingError when the frames are too few or too small, LearnedModuleError without libtorch.
AdaptResult adapt_prednet(const std::vector<TrainingSequence>& sequences, const AdaptOptions& options);

// Which frames of sequences of these lengths to train on, at most `max_values` values (frames x
// values a frame) in all: every frame when they fit, else evenly spaced windows of consecutive frames
// of each sequence. Each window (first, count) of sequence s is windows[s][k].
struct FrameWindow {
  std::size_t first = 0, count = 0;
};
std::vector<std::vector<FrameWindow>> adapt_sample(const std::vector<std::size_t>& frames, const std::vector<std::size_t>& frame_values,
                                                   std::uint64_t max_values);

// The --adapt auto budget for coding `values` pixel values on `threads` threads: about the time
// coding them once with the shipped model takes, at least 5 s and at most 600 s (docs/training.md,
// "Adapting to the input").
double auto_adapt_seconds(std::uint64_t values, unsigned threads);

}  // namespace tezip
