#pragma once
// Training a PredNet on integer frame sequences (docs/training.md). Torch-free: the network lives in
// predictor/learned/trainer.cpp.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "predictor/model_file.hpp"
#include "predictor/predictor.hpp"
#include "predictor/prednet_options.hpp"

namespace tezip {

// The data cannot train the requested model: sequences shorter than a clip, frames smaller than the
// crop, channel counts the model does not take, a checkpoint of another model. Names the sequence.
struct TrainingError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One sequence of planar frames (shape.size() values each, 0..shape.max_value).
struct TrainingSequence {
  FrameShape shape;
  std::vector<std::vector<std::uint16_t>> frames;
  std::string name;
};

struct TrainingOptions {
  PredNetOptions net;
  int nt = 10;       // frames per training clip
  int batch = 4;     // clips per step
  int epochs = 10;
  int steps = 100;   // optimizer steps per epoch
  double lr = 1e-3;  // Adam; multiplied by lr_drop from epoch ceil(lr_drop_at * epochs) + 1 on
  double lr_drop = 0.1;
  double lr_drop_at = 0.75;
  // Held out for validation: the last val_fraction of each sequence's frames (at least nt), or the
  // last val_fraction of the sequences when there are at least `whole_sequences_from` of them.
  double val_fraction = 0.15;
  int whole_sequences_from = 16;
  int val_clips = 48;  // fixed validation clips (spread evenly over the held-out frames)
  int crop_height = 64, crop_width = 64;  // multiples of net.padding_multiple()
  std::uint64_t seed = 1;
  int threads = 1;  // torch intra-op threads
  // Written after every epoch (weights, optimizer, epoch, best so far); empty: none.
  std::filesystem::path checkpoint;
  bool resume = false;  // continue from `checkpoint` (which must exist)
  std::string data_json = "null";  // what the data was (the CLI's paths), kept in the model metadata
  // Fine-tuning: start from these weights (their parameters must have the shapes `net` gives; a
  // frame model may start a residual one) instead of random ones. The starting weights are also
  // the first candidate for the best model, scored on the validation clips before any step.
  std::shared_ptr<const ModelFile> initial;
  // Seconds of training (0: no limit): an epoch ends early once it has passed, and training stops
  // there; the learning rate drops once lr_drop_at of it has passed instead of by epoch.
  double time_budget = 0;

  // Throws std::invalid_argument naming the bad option.
  void validate() const;
};

struct TrainingStep {
  int epoch = 0, epochs = 0;  // 1-based epoch
  int step = 0, steps = 0;    // steps done in this epoch
  double loss = 0;
};

// Mean squared error of next-frame forecasts, pixels in [0, 1], over the validation clips' frames
// 1..nt-1 (frame 0 has nothing to be forecast from).
struct EpochReport {
  int epoch = 0, epochs = 0;
  double train_loss = 0;    // mean PredNet loss over the epoch's steps
  double val_mse = 0;       // PredNet
  double previous_mse = 0;  // y[t-1]
  double linear_mse = 0;    // 2 y[t-1] - y[t-2], clamped (y[t-1] at t = 1)
  double lr = 0;
  double seconds = 0;       // this epoch, validation included
  bool best = false;        // the best validation MSE so far (its weights are kept)
};

struct TrainingCallbacks {
  std::function<void(const TrainingStep&)> on_step;
  std::function<void(const EpochReport&)> on_epoch;
  // The best model so far (after each epoch that improved it), ready to serialize.
  std::function<void(ModelFile&)> on_best;
};

struct TrainingResult {
  ModelFile model;  // the best epoch's weights, metadata with the configuration and every epoch
  std::vector<EpochReport> epochs;  // all epochs, the resumed ones included
  int best_epoch = 0;
  double seconds = 0;  // this run
};

// Training, float32 forecasts and their evaluation need libtorch (the learned module): without it
// they throw LearnedModuleError (learned_predictor.hpp). This throws it up front, before the data
// is read, and does nothing where libtorch is there.
void check_training_available(const std::string& purpose = "tezip train");

// Trains on random clips of nt frames cropped at random; a gray model (net.a_channels[0] == 1) takes
// each channel of colour frames as a gray sample. Reproducible for a seed on one machine and thread
// count. Uses CUDA when available. Throws TrainingError, std::invalid_argument.
TrainingResult train_prednet(const std::vector<TrainingSequence>& sequences, const TrainingOptions& options,
                             const TrainingCallbacks& callbacks = {});

// float32 forecasts of a whole sequence, frame by frame from frame 0 (frames padded to the model's
// multiple, by edge replication): result[t] forecasts frame t + 1 in [0, 1], planar, shape.size() values.
std::vector<std::vector<float>> prednet_forecasts(const ModelFile& model, const TrainingSequence& sequence);

// Next-frame MSE (pixels in [0, 1]) of PredNet, previous frame and linear extrapolation over frames
// first_frame.. of each sequence, the network warmed up on the `warmup` frames before first_frame.
struct ForecastQuality {
  double prednet_mse = 0, previous_mse = 0, linear_mse = 0;
  std::uint64_t frames = 0;
};
ForecastQuality evaluate_forecasts(const ModelFile& model, const std::vector<TrainingSequence>& sequences,
                                   double held_out_fraction, int warmup);

}  // namespace tezip
