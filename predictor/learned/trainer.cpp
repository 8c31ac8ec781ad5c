#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <system_error>

#include "predictor/learned/prednet.hpp"
#include "predictor/learned/module_api.hpp"
#include "predictor/training.hpp"

namespace tezip {
namespace {

using Clock = std::chrono::steady_clock;

// A clip: frames start..start+nt-1 of sequence `sequence`, channel `channel` (-1: all channels),
// cropped at (y, x).
struct Clip {
  int sequence = 0, channel = -1;
  std::size_t start = 0;
  int y = 0, x = 0;
};

// Frames [begin, end) of a sequence used for training or validation.
struct Range {
  int sequence = 0;
  std::size_t begin = 0, end = 0;
};

struct Split {
  std::vector<Range> train, validation;
};

std::string label(const TrainingSequence& s) { return s.name.empty() ? std::string("(unnamed sequence)") : "'" + s.name + "'"; }

Split split_sequences(const std::vector<TrainingSequence>& sequences, const TrainingOptions& o) {
  Split split;
  const auto n = sequences.size();
  for (std::size_t i = 0; i < n; ++i) {
    const auto frames = sequences[i].frames.size();
    if (frames < std::size_t(o.nt))
      throw TrainingError("sequence " + label(sequences[i]) + " has " + std::to_string(frames) + " frames, fewer than --nt " +
                          std::to_string(o.nt));
  }
  if (o.val_fraction > 0 && n >= std::size_t(o.whole_sequences_from)) {
    const auto held = std::max<std::size_t>(1, std::size_t(std::llround(o.val_fraction * double(n))));
    for (std::size_t i = 0; i < n; ++i)
      (i + held < n ? split.train : split.validation).push_back({int(i), 0, sequences[i].frames.size()});
    return split;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto frames = sequences[i].frames.size();
    std::size_t held = 0;
    if (o.val_fraction > 0) held = std::max<std::size_t>(o.nt, std::size_t(std::ceil(o.val_fraction * double(frames))));
    if (frames < held + o.nt)
      throw TrainingError("sequence " + label(sequences[i]) + " has " + std::to_string(frames) + " frames: too few for clips of --nt " +
                          std::to_string(o.nt) + " frames plus " + std::to_string(held) + " held-out frames for validation");
    split.train.push_back({int(i), 0, frames - held});
    if (held > 0) split.validation.push_back({int(i), frames - held, frames});
  }
  return split;
}

// How many gray samples a frame of `shape` gives a model that takes `model_channels`.
int samples_per_frame(const FrameShape& shape, int model_channels) { return model_channels == 1 ? int(shape.channels) : 1; }

void check_data(const std::vector<TrainingSequence>& sequences, const TrainingOptions& o) {
  if (sequences.empty()) throw TrainingError("no sequences to train on");
  const int c = o.net.a_channels[0];
  for (const auto& s : sequences) {
    if (c != 1 && int(s.shape.channels) != c)
      throw TrainingError("sequence " + label(s) + " has " + std::to_string(s.shape.channels) + " channels; the model takes " +
                          std::to_string(c));
    if (s.shape.height < std::uint32_t(o.crop_height) || s.shape.width < std::uint32_t(o.crop_width))
      throw TrainingError("sequence " + label(s) + ": frames of " + std::to_string(s.shape.width) + "x" + std::to_string(s.shape.height) +
                          " are smaller than the crop " + std::to_string(o.crop_height) + "x" + std::to_string(o.crop_width) + " (HxW)");
    if (s.shape.max_value == 0) throw TrainingError("sequence " + label(s) + " has max_value 0");
    for (const auto& f : s.frames)
      if (f.size() != s.shape.size()) throw TrainingError("sequence " + label(s) + ": a frame does not match its shape");
  }
}

// Clips [clips.size(), nt, C, crop_h, crop_w] in [0, 1].
torch::Tensor gather(const std::vector<TrainingSequence>& sequences, const std::vector<Clip>& clips, const TrainingOptions& o) {
  const int c = o.net.a_channels[0], h = o.crop_height, w = o.crop_width;
  auto out = torch::empty({std::int64_t(clips.size()), o.nt, c, h, w}, torch::kFloat32);
  float* dst = out.data_ptr<float>();
  for (const auto& clip : clips) {
    const auto& s = sequences[clip.sequence];
    const std::size_t plane = std::size_t(s.shape.width) * s.shape.height;
    const float scale = 1.0f / float(s.shape.max_value);
    for (int t = 0; t < o.nt; ++t) {
      const auto& frame = s.frames[clip.start + t];
      for (int k = 0; k < c; ++k) {
        const std::uint16_t* src = frame.data() + plane * std::size_t(clip.channel >= 0 ? clip.channel : k);
        for (int y = 0; y < h; ++y) {
          const std::uint16_t* row = src + std::size_t(clip.y + y) * s.shape.width + clip.x;
          for (int x = 0; x < w; ++x) *dst++ = float(row[x]) * scale;
        }
      }
    }
  }
  return out;
}

class ClipSampler {
 public:
  ClipSampler(const std::vector<TrainingSequence>& sequences, const std::vector<Range>& ranges, const TrainingOptions& o)
      : sequences_(sequences), ranges_(ranges), o_(o) {
    std::vector<double> weights;
    for (const auto& r : ranges) weights.push_back(double(r.end - r.begin - o.nt + 1));
    pick_ = std::discrete_distribution<std::size_t>(weights.begin(), weights.end());
  }

  Clip operator()(std::mt19937_64& rng) {
    const Range& r = ranges_[pick_(rng)];
    const auto& s = sequences_[r.sequence];
    Clip clip;
    clip.sequence = r.sequence;
    clip.start = r.begin + std::uniform_int_distribution<std::size_t>(0, r.end - r.begin - o_.nt)(rng);
    const int samples = samples_per_frame(s.shape, o_.net.a_channels[0]);
    clip.channel = o_.net.a_channels[0] == 1 ? std::uniform_int_distribution<int>(0, samples - 1)(rng) : -1;
    clip.y = std::uniform_int_distribution<int>(0, int(s.shape.height) - o_.crop_height)(rng);
    clip.x = std::uniform_int_distribution<int>(0, int(s.shape.width) - o_.crop_width)(rng);
    return clip;
  }

 private:
  const std::vector<TrainingSequence>& sequences_;
  const std::vector<Range>& ranges_;
  const TrainingOptions& o_;
  std::discrete_distribution<std::size_t> pick_;
};

// Fixed validation clips: consecutive non-overlapping clips of each held-out range (every channel
// of colour data for a gray model), at most o.val_clips of them spread evenly, crops from a seeded RNG.
std::vector<Clip> validation_clips(const std::vector<TrainingSequence>& sequences, const std::vector<Range>& ranges, const TrainingOptions& o) {
  std::vector<Clip> all;
  for (const auto& r : ranges) {
    const auto& s = sequences[r.sequence];
    const int samples = samples_per_frame(s.shape, o.net.a_channels[0]);
    for (std::size_t start = r.begin; start + o.nt <= r.end; start += o.nt)
      for (int k = 0; k < samples; ++k) {
        Clip clip;
        clip.sequence = r.sequence;
        clip.start = start;
        clip.channel = o.net.a_channels[0] == 1 ? k : -1;
        all.push_back(clip);
      }
  }
  std::vector<Clip> chosen;
  const std::size_t n = std::min<std::size_t>(all.size(), std::size_t(std::max(o.val_clips, 1)));
  for (std::size_t i = 0; i < n; ++i) chosen.push_back(all[i * all.size() / n]);
  std::mt19937_64 rng(o.seed ^ 0x5eed0fa11da7aULL);
  for (auto& clip : chosen) {
    const auto& s = sequences[clip.sequence];
    clip.y = std::uniform_int_distribution<int>(0, int(s.shape.height) - o.crop_height)(rng);
    clip.x = std::uniform_int_distribution<int>(0, int(s.shape.width) - o.crop_width)(rng);
  }
  return chosen;
}

struct Baselines {
  double previous = 0, linear = 0;
};

// Squared errors summed over frames 1.. of clips [B, T, C, H, W]; the count is the number of values.
Baselines baseline_sums(const torch::Tensor& clips) {
  const auto T = clips.size(1);
  const auto target = clips.slice(1, 1, T);
  const auto previous = clips.slice(1, 0, T - 1);
  Baselines b;
  b.previous = (target - previous).pow(2).sum().item<double>();
  torch::Tensor linear = previous.clone();
  if (T > 2) linear.slice(1, 1, T - 1).copy_((2 * clips.slice(1, 1, T - 1) - clips.slice(1, 0, T - 2)).clamp(0.0, 1.0));
  b.linear = (target - linear).pow(2).sum().item<double>();
  return b;
}

double prednet_sum(PredNet& net, const torch::Tensor& clips, int chunk, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  double sum = 0;
  for (std::int64_t i = 0; i < clips.size(0); i += chunk) {
    const auto part = clips.slice(0, i, std::min<std::int64_t>(clips.size(0), i + chunk)).to(device);
    const auto f = net->forecasts(part);
    sum += (f.slice(1, 1) - part.slice(1, 1)).pow(2).sum().item<double>();
  }
  return sum;
}

torch::Tensor bytes_tensor(const std::string& s) {
  auto t = torch::empty({std::int64_t(s.size())}, torch::kUInt8);
  if (!s.empty()) std::memcpy(t.data_ptr(), s.data(), s.size());
  return t;
}

std::string tensor_bytes(const torch::Tensor& t) {
  const auto c = t.contiguous().to(torch::kCPU);
  return std::string(static_cast<const char*>(c.data_ptr()), std::size_t(c.numel()));
}

nlohmann::json epoch_json(const EpochReport& r) {
  return {{"epoch", r.epoch},          {"train_loss", r.train_loss}, {"val_mse", r.val_mse}, {"previous_mse", r.previous_mse},
          {"linear_mse", r.linear_mse}, {"lr", r.lr},                 {"seconds", r.seconds}, {"best", r.best}};
}

EpochReport epoch_from_json(const nlohmann::json& j, int epochs) {
  EpochReport r;
  r.epoch = j.at("epoch").get<int>();
  r.epochs = epochs;
  auto number = [&](const char* key) { return j.at(key).is_number() ? j.at(key).get<double>() : std::nan(""); };
  r.train_loss = number("train_loss");
  r.val_mse = number("val_mse");
  r.previous_mse = number("previous_mse");
  r.linear_mse = number("linear_mse");
  r.lr = number("lr");
  r.seconds = number("seconds");
  r.best = j.at("best").get<bool>();
  return r;
}

std::string metadata(const std::vector<TrainingSequence>& sequences, const Split& split, const TrainingOptions& o,
                     const std::vector<EpochReport>& history, int best_epoch, const std::string& device) {
  nlohmann::json m;
  m["trainer"] = "tezip train";
  m["data"] = nlohmann::json::parse(o.data_json);
  auto& seqs = m["sequences"] = nlohmann::json::array();
  for (const auto& s : sequences)
    seqs.push_back({{"name", s.name}, {"frames", s.frames.size()}, {"width", s.shape.width}, {"height", s.shape.height},
                    {"channels", s.shape.channels}, {"max_value", s.shape.max_value}});
  std::size_t held = 0;
  for (const auto& r : split.validation) held += r.end - r.begin;
  m["validation"] = {{"fraction", o.val_fraction}, {"held_out_frames", held}, {"clips", o.val_clips},
                     {"whole_sequences", o.val_fraction > 0 && sequences.size() >= std::size_t(o.whole_sequences_from)}};
  m["training"] = {{"nt", o.nt},           {"batch", o.batch},          {"epochs", o.epochs},   {"steps_per_epoch", o.steps},
                   {"lr", o.lr},           {"lr_drop", o.lr_drop},      {"lr_drop_at", o.lr_drop_at},
                   {"crop", {o.crop_height, o.crop_width}},              {"seed", o.seed},       {"threads", o.threads},
                   {"device", device},     {"optimizer", "adam"}};
  auto& epochs = m["epochs"] = nlohmann::json::array();
  double seconds = 0;
  for (const auto& r : history) {
    epochs.push_back(epoch_json(r));
    seconds += r.seconds;
  }
  m["steps"] = std::int64_t(history.size()) * o.steps;
  m["training_seconds"] = seconds;
  m["best_epoch"] = best_epoch;
  for (const auto& r : history)
    if (r.epoch == best_epoch) {
      m["val_mse"] = r.val_mse;
      m["previous_mse"] = r.previous_mse;
      m["linear_mse"] = r.linear_mse;
    }
  return m.dump();
}

struct Checkpoint {
  int epoch = 0;  // epochs done
  int best_epoch = 0;
  std::vector<EpochReport> history;
  std::vector<std::uint8_t> best_model;  // serialized ModelFile
};

void save_checkpoint(const std::filesystem::path& path, PredNet& net, torch::optim::Adam& optimizer, const Checkpoint& c) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive net_archive, optimizer_archive;
  net->save(net_archive);
  optimizer.save(optimizer_archive);
  archive.write("net", net_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("options", bytes_tensor(net->options().to_json()));
  archive.write("epoch", torch::tensor(std::int64_t(c.epoch)));
  archive.write("best_epoch", torch::tensor(std::int64_t(c.best_epoch)));
  nlohmann::json history = nlohmann::json::array();
  for (const auto& r : c.history) history.push_back(epoch_json(r));
  archive.write("history", bytes_tensor(history.dump()));
  archive.write("best_model", bytes_tensor(std::string(c.best_model.begin(), c.best_model.end())));
  auto temporary = path;
  temporary += ".tmp";
  archive.save_to(temporary.string());
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) throw TrainingError(path.string() + ": cannot write the checkpoint: " + ec.message());
}

Checkpoint load_checkpoint(const std::filesystem::path& path, PredNet& net, torch::optim::Adam& optimizer, const TrainingOptions& o) {
  if (!std::filesystem::exists(path)) throw TrainingError(path.string() + ": no checkpoint to resume from");
  Checkpoint c;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path.string());
    torch::Tensor t;
    archive.read("options", t);
    if (PredNetOptions::from_json(tensor_bytes(t)).to_json() != o.net.to_json())
      throw TrainingError(path.string() + ": the checkpoint is of another network (" + tensor_bytes(t) + ")");
    torch::serialize::InputArchive net_archive, optimizer_archive;
    archive.read("net", net_archive);
    net->load(net_archive);
    archive.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
    archive.read("epoch", t);
    c.epoch = int(t.item<std::int64_t>());
    archive.read("best_epoch", t);
    c.best_epoch = int(t.item<std::int64_t>());
    archive.read("history", t);
    for (const auto& j : nlohmann::json::parse(tensor_bytes(t))) c.history.push_back(epoch_from_json(j, o.epochs));
    archive.read("best_model", t);
    const std::string best = tensor_bytes(t);
    c.best_model.assign(best.begin(), best.end());
  } catch (const c10::Error& e) {
    throw TrainingError(path.string() + ": unreadable checkpoint: " + e.what_without_backtrace());
  } catch (const nlohmann::json::exception& e) {
    throw TrainingError(path.string() + ": unreadable checkpoint: " + e.what());
  } catch (const std::invalid_argument& e) {
    throw TrainingError(path.string() + ": unreadable checkpoint: " + e.what());
  }
  return c;
}

// Planes of frame `t` of `s` as [B, C, H', W'] in [0, 1], padded by edge replication to the model's multiple.
torch::Tensor frame_tensor(const TrainingSequence& s, std::size_t t, int model_channels, int multiple) {
  const std::int64_t h = s.shape.height, w = s.shape.width, c = s.shape.channels;
  auto x = torch::empty({c, h, w}, torch::kFloat32);
  float* dst = x.data_ptr<float>();
  const float scale = 1.0f / float(s.shape.max_value);
  for (std::uint16_t v : s.frames[t]) *dst++ = float(v) * scale;
  x = model_channels == 1 ? x.unsqueeze(1) : x.unsqueeze(0);  // gray model: the channels are the batch
  const std::int64_t ph = (multiple - h % multiple) % multiple, pw = (multiple - w % multiple) % multiple;
  if (ph || pw)
    x = torch::nn::functional::pad(x, torch::nn::functional::PadFuncOptions({0, pw, 0, ph}).mode(torch::kReplicate));
  return x;
}

// PredNet's reference initialization (Keras: Glorot-uniform weights, zero biases), except that the
// frame forecast starts at mid-gray: it is relu(...) clamped to 1, and torch's default random biases
// often start it below zero on every pixel, where no gradient ever reaches the network.
void initialize(PredNet& net) {
  torch::NoGradGuard no_grad;
  for (auto* convs : {&net->lstm, &net->ahat, &net->a})
    for (auto& conv : *convs) {
      if (!conv) continue;
      torch::nn::init::xavier_uniform_(conv->weight);
      torch::nn::init::zeros_(conv->bias);
    }
  if (net->options().residual) {
    // A correction to the last frame: zero, so that training starts at the previous frame's forecast.
    torch::nn::init::zeros_(net->ahat[0]->weight);
    torch::nn::init::zeros_(net->ahat[0]->bias);
  } else {
    torch::nn::init::constant_(net->ahat[0]->bias, 0.5);
  }
}

// Fine-tuning: the weights of `model` into `net`. A frame model that starts a residual one keeps
// everything but its forecast head, which starts at zero (the previous frame).
void load_initial(PredNet& net, const ModelFile& model) {
  PredNet start = load_prednet(model, "the starting model");
  auto parameters = net->named_parameters();
  torch::NoGradGuard no_grad;
  for (const auto& t : start->named_parameters()) {
    if (!parameters.contains(t.key()) || !parameters[t.key()].sizes().equals(t.value().sizes()))
      throw TrainingError("the starting model " + model.options.to_json() + " does not fit the network " + net->options().to_json() +
                          " (parameter '" + t.key() + "')");
    parameters[t.key()].copy_(t.value());
  }
  if (net->options().residual && !model.options.residual) {
    torch::nn::init::zeros_(net->ahat[0]->weight);
    torch::nn::init::zeros_(net->ahat[0]->bias);
  }
}

}  // namespace


namespace learned {

TrainingResult train_prednet(const std::vector<TrainingSequence>& sequences, const TrainingOptions& o, const TrainingCallbacks& callbacks) {
  o.validate();
  check_data(sequences, o);
  const Split split = split_sequences(sequences, o);
  torch::set_num_threads(o.threads);
  const bool cuda = torch::cuda::is_available();
  const torch::Device device = cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  const std::string device_name = cuda ? "cuda" : "cpu";

  torch::manual_seed(o.seed);
  PredNet net(o.net);
  initialize(net);
  if (o.initial) load_initial(net, *o.initial);
  net->to(device);
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(o.lr));

  Checkpoint state;
  if (o.resume) state = load_checkpoint(o.checkpoint, net, optimizer, o);

  // Validation data and its baselines are fixed for the whole run.
  const auto val_clips = validation_clips(sequences, split.validation, o);
  const auto val_data = val_clips.empty() ? torch::Tensor() : gather(sequences, val_clips, o);
  Baselines baselines;
  double val_values = std::numeric_limits<double>::quiet_NaN();
  if (!val_clips.empty()) {
    baselines = baseline_sums(val_data);
    val_values = double(val_data.numel()) * double(o.nt - 1) / double(o.nt);
  }
  ClipSampler sampler(sequences, split.train, o);

  TrainingResult result;
  ModelFile best;
  if (!state.best_model.empty()) best = parse_model(state.best_model, o.checkpoint.string());
  double best_mse = std::numeric_limits<double>::infinity();
  for (const auto& r : state.history)
    if (r.epoch == state.best_epoch) best_mse = r.val_mse;
  const auto run_start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - run_start).count(); };
  if (o.initial && !val_clips.empty()) {
    // Epoch 0: the starting weights, which training must beat to be kept.
    net->eval();
    EpochReport report;
    report.epochs = o.epochs;
    report.train_loss = std::nan("");
    report.val_mse = prednet_sum(net, val_data, std::max(o.batch, 8), device) / val_values;
    report.previous_mse = baselines.previous / val_values;
    report.linear_mse = baselines.linear / val_values;
    report.best = true;
    report.seconds = elapsed();
    best_mse = report.val_mse;
    net->to(torch::kCPU);
    best = make_model_file(net, "{}");
    net->to(device);
    state.history.push_back(report);
    best.metadata_json = metadata(sequences, split, o, state.history, state.best_epoch, device_name);
    state.best_model = best.serialize();
    if (callbacks.on_epoch) callbacks.on_epoch(report);
  }
  bool out_of_time = false;

  for (int epoch = state.epoch + 1; epoch <= o.epochs && !out_of_time; ++epoch) {
    const auto start = Clock::now();
    auto learning_rate = [&] {
      if (o.time_budget > 0) return elapsed() > o.lr_drop_at * o.time_budget ? o.lr * o.lr_drop : o.lr;
      return epoch > int(std::ceil(o.lr_drop_at * o.epochs)) ? o.lr * o.lr_drop : o.lr;
    };
    double lr = learning_rate();
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    // Each epoch draws from its own seed, so a resumed run repeats the clips of an uninterrupted one.
    std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ULL + std::uint64_t(epoch));
    net->train();
    double loss_sum = 0;
    int steps_done = 0;
    for (int step = 1; step <= o.steps; ++step) {
      if (o.time_budget > 0) {
        if (elapsed() >= o.time_budget) {
          out_of_time = true;
          break;
        }
        if (const double now = learning_rate(); now != lr) {
          lr = now;
          for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
        }
      }
      ++steps_done;
      std::vector<Clip> clips;
      for (int b = 0; b < o.batch; ++b) clips.push_back(sampler(rng));
      const auto batch = gather(sequences, clips, o).to(device);
      optimizer.zero_grad();
      const auto loss = net->loss(batch);
      loss.backward();
      optimizer.step();
      const double value = loss.item<double>();
      if (!std::isfinite(value)) throw TrainingError("the training loss diverged at epoch " + std::to_string(epoch) + "; try a lower --lr");
      loss_sum += value;
      if (callbacks.on_step) callbacks.on_step({epoch, o.epochs, step, o.steps, value});
    }
    net->eval();
    EpochReport report;
    report.epoch = epoch;
    report.epochs = o.epochs;
    if (steps_done == 0) break;  // the budget ran out before this epoch began
    report.train_loss = loss_sum / steps_done;
    report.lr = lr;
    report.val_mse = val_clips.empty() ? std::nan("") : prednet_sum(net, val_data, std::max(o.batch, 8), device) / val_values;
    report.previous_mse = baselines.previous / val_values;
    report.linear_mse = baselines.linear / val_values;
    // Without validation the latest epoch is the best.
    report.best = val_clips.empty() || report.val_mse < best_mse;
    report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    state.history.push_back(report);
    state.epoch = epoch;
    if (report.best) {
      best_mse = report.val_mse;
      state.best_epoch = epoch;
      net->to(torch::kCPU);
      best = make_model_file(net, "{}");
      net->to(device);
    }
    best.metadata_json = metadata(sequences, split, o, state.history, state.best_epoch, device_name);
    state.best_model = best.serialize();
    if (!o.checkpoint.empty()) save_checkpoint(o.checkpoint, net, optimizer, state);
    if (callbacks.on_epoch) callbacks.on_epoch(report);
    if (report.best && callbacks.on_best) callbacks.on_best(best);
  }
  if (state.best_model.empty()) throw TrainingError("the checkpoint has already run all " + std::to_string(o.epochs) + " epochs; raise --epochs");
  result.model = parse_model(state.best_model, "trained model");
  result.epochs = state.history;
  result.best_epoch = state.best_epoch;
  result.seconds = std::chrono::duration<double>(Clock::now() - run_start).count();
  return result;
}

std::vector<std::vector<float>> prednet_forecasts(const ModelFile& model, const TrainingSequence& s) {
  torch::NoGradGuard no_grad;
  PredNet net = load_prednet(model, "model");
  const int c = model.options.a_channels[0];
  if (c != 1 && std::uint32_t(c) != s.shape.channels)
    throw TrainingError("sequence " + label(s) + " has " + std::to_string(s.shape.channels) + " channels; the model takes " + std::to_string(c));
  const int multiple = model.options.padding_multiple();
  std::vector<std::vector<float>> out;
  if (s.frames.empty()) return out;
  auto first = frame_tensor(s, 0, c, multiple);
  auto state = net->initial_state(first.size(0), first.size(2), first.size(3), first.options());
  net->predict(state);
  net->correct(state, first);
  for (std::size_t t = 1; t < s.frames.size(); ++t) {
    const auto forecast = net->predict(state)
                              .slice(2, 0, s.shape.height)
                              .slice(3, 0, s.shape.width)
                              .reshape({std::int64_t(s.shape.size())})
                              .contiguous();
    out.emplace_back(forecast.data_ptr<float>(), forecast.data_ptr<float>() + forecast.numel());
    net->correct(state, frame_tensor(s, t, c, multiple));
  }
  return out;
}


ForecastQuality evaluate_forecasts(const ModelFile& model, const std::vector<TrainingSequence>& sequences, double held_out_fraction, int warmup) {
  ForecastQuality q;
  double prednet = 0, previous = 0, linear = 0;
  for (const auto& s : sequences) {
    const std::size_t n = s.frames.size();
    const std::size_t held = std::min(n, std::size_t(std::ceil(held_out_fraction * double(n))));
    const std::size_t first = std::max<std::size_t>(n - held, 1);
    const std::size_t begin = first > std::size_t(warmup) ? first - warmup : 0;
    if (first >= n) continue;
    TrainingSequence part{s.shape, {s.frames.begin() + std::ptrdiff_t(begin), s.frames.end()}, s.name};
    const auto forecasts = learned::prednet_forecasts(model, part);
    const double scale = 1.0 / double(s.shape.max_value);
    for (std::size_t t = first; t < n; ++t) {
      const auto& f = forecasts[t - begin - 1];
      const auto& x = s.frames[t];
      const auto& p = s.frames[t - 1];
      const auto& pp = s.frames[t >= 2 ? t - 2 : t - 1];
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double v = x[i] * scale, a = p[i] * scale;
        const double l = std::clamp(2 * a - pp[i] * scale, 0.0, 1.0);
        prednet += (f[i] - v) * (f[i] - v);
        previous += (a - v) * (a - v);
        linear += (l - v) * (l - v);
      }
      q.frames += 1;
      q.prednet_mse += double(x.size());  // value count, divided below
    }
  }
  const double values = q.prednet_mse;
  q.prednet_mse = values > 0 ? prednet / values : std::nan("");
  q.previous_mse = values > 0 ? previous / values : std::nan("");
  q.linear_mse = values > 0 ? linear / values : std::nan("");
  return q;
}

}  // namespace learned
}  // namespace tezip
