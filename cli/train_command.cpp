// `tezip train`: reads sequences through the compressor's sources, trains a PredNet on them
// (predictor/training.hpp) and writes the model file atomically.
#include "cli/train_command.hpp"

#include <unistd.h>

#include <cxxopts.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "io/atomic_file.hpp"
#include "compressor/encoder.hpp"
#include "format/errors.hpp"
#include "io/output_path.hpp"
#include "io/source.hpp"
#include "predictor/training.hpp"

namespace tezip::cli {
namespace {

constexpr int kOk = 0, kUsage = 1, kFailure = 2;

struct TrainUsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<int> parse_stack(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 1) throw TrainUsageError("--stack: '" + text + "' is not a list of positive channel counts");
    out.push_back(v);
  }
  return out;
}

// "HxW" or "N" (square).
std::pair<int, int> parse_crop(const std::string& text) {
  const auto x = text.find_first_of("xX");
  try {
    std::size_t used = 0;
    if (x == std::string::npos) {
      const int n = std::stoi(text, &used);
      if (used == text.size()) return {n, n};
    } else {
      const std::string h = text.substr(0, x), w = text.substr(x + 1);
      std::size_t used_w = 0;
      const int hh = std::stoi(h, &used), ww = std::stoi(w, &used_w);
      if (used == h.size() && used_w == w.size()) return {hh, ww};
    }
  } catch (const std::exception&) {
  }
  throw TrainUsageError("--crop: '" + text + "' is not HxW (e.g. 64x96) or a single size");
}

// A one-line step counter on stderr, only on a terminal.
class StepLine {
 public:
  explicit StepLine(bool enabled) : enabled_(enabled && ::isatty(STDERR_FILENO)) {}
  ~StepLine() { clear(); }
  void update(const TrainingStep& s) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (s.step < s.steps && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 30;
    std::string bar(std::size_t(kWidth * s.step / s.steps), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\repoch %d/%d [%s] %d/%d  loss %.5f", s.epoch, s.epochs, bar.c_str(), s.step, s.steps, s.loss);
    std::fflush(stderr);
    drawn_ = true;
  }
  void clear() {
    if (drawn_) std::fprintf(stderr, "\r\033[K");
    drawn_ = false;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_;
};

std::vector<TrainingSequence> load_sequences(const std::vector<std::string>& inputs, bool verbose) {
  std::vector<TrainingSequence> sequences;
  for (const auto& input : inputs) {
    for (auto& source : open_sources(input)) {
      TrainingSequence s;
      const Geometry& g = source->geometry();
      s.shape = FrameShape{g.width, g.height, g.channels, g.max_value()};
      s.name = source->name().empty() ? input : input + "/" + source->name();
      for (std::size_t i = 0; i < source->frame_count(); ++i) {
        const Frame frame = source->read(i);
        s.frames.emplace_back(frame.pixels.begin(), frame.pixels.end());
      }
      if (verbose)
        std::printf("%s: %zu frames of %ux%u, %u channel(s), max %u\n", s.name.c_str(), s.frames.size(), g.width, g.height,
                    g.channels, g.max_value());
      sequences.push_back(std::move(s));
    }
  }
  return sequences;
}

void print_epoch(const EpochReport& r) {
  std::printf("epoch %d/%d  loss %.5f  val mse %.6f (previous frame %.6f, x%.2f; linear %.6f)  lr %.0e  %.1f s%s\n", r.epoch,
              r.epochs, r.train_loss, r.val_mse, r.previous_mse, r.val_mse / r.previous_mse, r.linear_mse, r.lr, r.seconds,
              r.best ? "  *" : "");
  std::fflush(stdout);
}

int train(int argc, char** argv) {
  cxxopts::Options options("tezip train", "Train a PredNet predictor on sequences of frames.");
  const PredNetOptions net_defaults;
  const TrainingOptions defaults;
  std::string default_stack;
  for (int c : net_defaults.a_channels) default_stack += (default_stack.empty() ? "" : ",") + std::to_string(c);
  options.add_options()("h,help", "show this help")("q,quiet", "no progress and no per-epoch lines")("v,verbose", "more detail")(
      "T,threads", "torch threads (default: all cores)", cxxopts::value<unsigned>()->default_value("0"))(
      "inputs", "folders of frames, dataset folders, videos or .npy arrays", cxxopts::value<std::vector<std::string>>())(
      "o,output", "model file to write (.tzm)", cxxopts::value<std::string>())("f,force", "overwrite the output")(
      "layers", "layers (default widths 1,16,32,64,128...)", cxxopts::value<int>())(
      "stack", "channels per layer, the first being the frame's (1: gray model)", cxxopts::value<std::string>()->default_value(default_stack))(
      "nt", "frames per training clip", cxxopts::value<int>()->default_value(std::to_string(defaults.nt)))(
      "batch", "clips per step", cxxopts::value<int>()->default_value(std::to_string(defaults.batch)))(
      "epochs", "epochs", cxxopts::value<int>()->default_value(std::to_string(defaults.epochs)))(
      "steps", "optimizer steps per epoch", cxxopts::value<int>()->default_value(std::to_string(defaults.steps)))(
      "lr", "Adam learning rate (x0.1 after 3/4 of the epochs)", cxxopts::value<double>()->default_value("0.001"))(
      "val", "held out for validation: the last fraction of each sequence", cxxopts::value<double>()->default_value("0.15"))(
      "crop", "training crop HxW, multiples of 2^(layers-1)", cxxopts::value<std::string>()->default_value("64x64"))(
      "seed", "random seed", cxxopts::value<std::uint64_t>()->default_value("1"))(
      "checkpoint", "checkpoint file (default: OUTPUT with extension .ckpt)", cxxopts::value<std::string>())(
      "resume", "continue from the checkpoint (may extend --epochs)");
  options.parse_positional({"inputs"});
  options.positional_help("DATASET... -o MODEL.tzm");
  cxxopts::ParseResult args;
  try {
    args = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw TrainUsageError(e.what());
  }
  if (args.count("help")) {
    std::cout << options.help() << '\n';
    return kOk;
  }
  if (!args.unmatched().empty()) throw TrainUsageError("unexpected argument '" + args.unmatched().front() + "'");
  if (!args.count("inputs") || !args.count("output")) throw TrainUsageError("train needs DATASET and -o MODEL");

  TrainingOptions o;
  o.net.a_channels = parse_stack(args["stack"].as<std::string>());
  if (args.count("layers")) {
    const int layers = args["layers"].as<int>();
    if (layers < 1 || layers > 6) throw TrainUsageError("--layers must be 1-6");
    if (args.count("stack") && int(o.net.a_channels.size()) != layers)
      throw TrainUsageError("--layers " + std::to_string(layers) + " does not match --stack " + args["stack"].as<std::string>());
    if (!args.count("stack")) {
      o.net.a_channels = {1};
      for (int l = 1; l < layers; ++l) o.net.a_channels.push_back(8 << l);
    }
  }
  o.nt = args["nt"].as<int>();
  o.batch = args["batch"].as<int>();
  o.epochs = args["epochs"].as<int>();
  o.steps = args["steps"].as<int>();
  o.lr = args["lr"].as<double>();
  o.val_fraction = args["val"].as<double>();
  std::tie(o.crop_height, o.crop_width) = parse_crop(args["crop"].as<std::string>());
  o.seed = args["seed"].as<std::uint64_t>();
  const unsigned threads = args["threads"].as<unsigned>();
  if (threads > kMaxThreads) throw TrainUsageError("-T " + std::to_string(threads) + ": at most " + std::to_string(kMaxThreads) + " threads");
  o.threads = threads > 0 ? int(threads) : int(std::max(1u, std::thread::hardware_concurrency()));
  o.resume = args.count("resume") > 0;
  const std::filesystem::path output = args["output"].as<std::string>();
  o.checkpoint = args.count("checkpoint") ? std::filesystem::path(args["checkpoint"].as<std::string>())
                                          : std::filesystem::path(output).replace_extension(".ckpt");
  if (o.checkpoint == output) throw TrainUsageError("the checkpoint and the output must be different files");
  try {
    o.validate();
  } catch (const std::invalid_argument& e) {
    throw TrainUsageError(e.what());
  }
  const bool quiet = args.count("quiet") > 0, verbose = args.count("verbose") > 0;
  const auto inputs = args["inputs"].as<std::vector<std::string>>();
  // A resumed run rewrites its own output. Neither the model nor the checkpoint may be, hold or
  // lie inside an input.
  check_file_output(output, args.count("force") || o.resume);
  check_file_output(o.checkpoint, true);
  const std::vector<std::filesystem::path> input_paths(inputs.begin(), inputs.end());
  check_output_apart(output, input_paths);
  check_output_apart(o.checkpoint, input_paths);
  o.data_json = nlohmann::json(inputs).dump();
  check_training_available();  // before reading any data: a build without libtorch says so at once
  const auto sequences = load_sequences(inputs, verbose);
  if (!quiet) {
    std::size_t frames = 0;
    for (const auto& s : sequences) frames += s.frames.size();
    std::printf("training %s on %zu sequence(s), %zu frames: nt %d, batch %d, %d epochs x %d steps, crop %dx%d, %d thread(s)\n",
                o.net.to_json().c_str(), sequences.size(), frames, o.nt, o.batch, o.epochs, o.steps, o.crop_height, o.crop_width,
                o.threads);
    std::fflush(stdout);
  }

  StepLine line(!quiet);
  TrainingCallbacks callbacks;
  callbacks.on_step = [&](const TrainingStep& s) { line.update(s); };
  callbacks.on_epoch = [&](const EpochReport& r) {
    line.clear();
    if (!quiet) print_epoch(r);
  };
  // The best model so far is on disk after every epoch that improved it, so an interrupted run leaves one.
  callbacks.on_best = [&](ModelFile& model) { write_file_atomically(output, model.serialize()); };
  auto result = train_prednet(sequences, o, callbacks);
  const auto bytes = result.model.serialize();
  write_file_atomically(output, bytes);
  if (!quiet) {
    for (const auto& r : result.epochs)
      if (r.epoch == result.best_epoch)
        std::printf("%s: best epoch %d, val mse %.6f (previous frame %.6f, x%.2f), %zu bytes, weights sha256 %s, %.1f s\n",
                    output.string().c_str(), r.epoch, r.val_mse, r.previous_mse, r.val_mse / r.previous_mse, bytes.size(),
                    result.model.weights_sha256.c_str(), result.seconds);
  }
  return kOk;
}

}  // namespace

int run_train(int argc, char** argv) {
  try {
    return train(argc, argv);
  } catch (const TrainUsageError& e) {
    std::fprintf(stderr, "tezip train: %s\nRun 'tezip train --help' for the options.\n", e.what());
    return kUsage;
  } catch (const TrainingError& e) {
    std::fprintf(stderr, "tezip train: %s\n", e.what());
    return kFailure;
  } catch (const ModelError& e) {
    std::fprintf(stderr, "tezip train: %s\n", e.what());
    return kFailure;
  }
  // InputError, OutputError and the rest reach main's handlers (exit 2).
}

}  // namespace tezip::cli
