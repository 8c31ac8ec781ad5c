// The PredNet predictor (learned_predictor.hpp), in the core: GOP states, padding, batching, the
// archive's identity and fingerprint, over an engine: the exact one here (predictor/prednet_exact.hpp),
// the float32 one from the learned module (libtorch). Decoding an exact archive needs no libtorch.
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "predictor/learned/module_table.hpp"
#include "predictor/learned_predictor.hpp"
#include "predictor/model_file.hpp"
#include "predictor/prednet_engine.hpp"
#include "predictor/prednet_exact.hpp"

namespace tezip {
namespace {

// The shape the network sees for frames of `shape`: padded to the pooling multiple. A gray model
// runs each channel of a colour frame as its own sequence (sample).
struct NetShape {
  std::int64_t samples, channels, height, width;
  std::size_t size() const { return std::size_t(samples * channels * height * width); }
};

// One GOP's network state.
struct PredNetGop final : GopState {
  FrameShape shape;
  NetShape net;
  std::unique_ptr<PredNetEngineState> state;
  std::vector<std::int32_t> forecast;  // [samples][channels][H][W], padded: the last forecast
  bool predicted = false;              // predict() ran for the step that observe() will complete
  std::size_t observed = 0;
};

std::unique_ptr<PredNetEngine> make_engine(const ModelFile& model, const std::string& name, const std::string& arithmetic) {
  if (arithmetic == "exact") return make_exact_engine(model.options, prednet_weights(model, name));
  if (arithmetic == "float32" || arithmetic == "float")
    return learned_module("PredNet with --arithmetic float32").make_float_engine(model, name);
  throw std::invalid_argument("unknown arithmetic '" + arithmetic + "' (exact or float32)");
}

class PredNetPredictor final : public Predictor {
 public:
  // `model_name` is what the identity records, `path` the file (for messages); `weights_sha256` is
  // the identity's too (an archive's may be the model's version-1 alias).
  PredNetPredictor(const ModelFile& model, const std::string& model_name, const std::filesystem::path& path,
                   const LearnedPredictorOptions& options, const std::string& weights_sha256)
      : options_(options), model_name_(model_name), weights_sha256_(weights_sha256) {
    if (options_.warmup < 1) throw std::invalid_argument("--warmup must be at least 1");
    if (options_.batch < 1) options_.batch = 1;
    engine_ = make_engine(model, path.string(), options_.arithmetic);
    options_.arithmetic = engine_->arithmetic();
    arithmetic_ = engine_->arithmetic_description();
    fingerprint_ = compute_fingerprint();
  }

  PredictorIdentity identity() const override {
    nlohmann::json config;
    config["model"] = model_name_;
    config["options"] = nlohmann::json::parse(engine_->options().to_json());
    config["arithmetic"] = options_.arithmetic;
    config["loop"] = options_.open_loop ? "open" : "closed";
    config["warmup"] = options_.warmup;
    return {"prednet", config.dump(), weights_sha256_, arithmetic_, fingerprint_};
  }

  std::size_t key_frames() const override { return options_.warmup; }
  // float32 forecasts depend on the batch (measured: oneDNN blocks a batch of 8 GOPs differently from
  // one GOP, and 8 of 501 frames of a 160x128 sequence then failed to decode), so float32 codes
  // every GOP on its own, the way every decoder (random access included) will run it.
  std::size_t preferred_batch() const override { return options_.arithmetic == "exact" ? options_.batch : 1; }
  bool block_fallback() const override { return true; }

  std::unique_ptr<GopState> begin_gop(const FrameShape& shape, std::span<const std::uint16_t> key_frame) const override {
    if (key_frame.size() != shape.size()) throw std::invalid_argument("PredNet predictor: key frame size differs from its shape");
    auto gop = std::make_unique<PredNetGop>();
    gop->shape = shape;
    gop->net = net_shape(shape);
    gop->state = engine_->initial_state(int(gop->net.samples), int(gop->net.height), int(gop->net.width));
    gop->forecast.assign(gop->net.size(), 0);
    GopState* gops[] = {gop.get()};
    std::span<const std::uint16_t> frames[] = {key_frame};
    observe(gops, frames);
    return gop;
  }

  void forecast(std::span<GopState* const> gops, std::span<const std::span<std::uint16_t>> forecasts) const override {
    predict(gops);
    for (std::size_t g = 0; g < gops.size(); ++g) {
      const auto* gop = static_cast<const PredNetGop*>(gops[g]);
      unpad(gop->forecast, gop->shape, gop->net, forecasts[g]);
    }
  }

  void observe(std::span<GopState* const> gops, std::span<const std::span<const std::uint16_t>> frames) const override {
    if (gops.empty()) return;
    predict(gops);
    std::vector<PredNetEngineState*> states;
    std::vector<std::vector<std::int32_t>> padded;
    std::vector<std::span<const std::int32_t>> inputs;
    padded.reserve(gops.size());
    for (std::size_t g = 0; g < gops.size(); ++g) {
      auto* gop = static_cast<PredNetGop*>(gops[g]);
      states.push_back(gop->state.get());
      // Open loop: past the warm-up, the network sees its own forecast, not the frame.
      if (options_.open_loop && gop->observed >= options_.warmup) {
        inputs.emplace_back(gop->forecast);
      } else {
        padded.push_back(pad(frames[g], gop->shape, gop->net));
        inputs.emplace_back(padded.back());
      }
    }
    engine_->correct(states, inputs, static_cast<PredNetGop*>(gops[0])->shape.max_value);
    for (auto* g : gops) {
      auto* gop = static_cast<PredNetGop*>(g);
      gop->predicted = false;
      ++gop->observed;
    }
  }

 private:
  NetShape net_shape(const FrameShape& shape) const {
    const int in = engine_->options().a_channels[0];
    if (in != 1 && std::uint32_t(in) != shape.channels)
      throw std::invalid_argument("the PredNet model takes " + std::to_string(in) + "-channel frames, these have " +
                                  std::to_string(shape.channels));
    const std::int64_t m = engine_->options().padding_multiple();
    const std::int64_t samples = in == 1 ? shape.channels : 1;
    return {samples, in, (shape.height + m - 1) / m * m, (shape.width + m - 1) / m * m};
  }

  // Runs predict() for every GOP in `gops` that has not predicted its current step, as one batch.
  void predict(std::span<GopState* const> gops) const {
    std::vector<PredNetGop*> todo;
    for (auto* g : gops)
      if (!static_cast<PredNetGop*>(g)->predicted) todo.push_back(static_cast<PredNetGop*>(g));
    if (todo.empty()) return;
    std::vector<PredNetEngineState*> states;
    std::vector<std::span<std::int32_t>> forecasts;
    for (auto* g : todo) {
      states.push_back(g->state.get());
      forecasts.emplace_back(g->forecast);
    }
    engine_->predict(states, todo.front()->shape.max_value, forecasts);
    for (auto* g : todo) g->predicted = true;
  }

  // Planar pixels -> int32 [samples][channels][H][W], edge-replicated to the padded size.
  static std::vector<std::int32_t> pad(std::span<const std::uint16_t> pixels, const FrameShape& shape, const NetShape& net) {
    std::vector<std::int32_t> out(net.size());
    for (std::size_t p = 0; p < shape.channels; ++p) {
      const std::uint16_t* src = pixels.data() + p * shape.width * shape.height;
      std::int32_t* plane = out.data() + p * net.height * net.width;
      for (std::int64_t y = 0; y < net.height; ++y) {
        const std::uint16_t* row = src + std::min<std::int64_t>(y, shape.height - 1) * shape.width;
        std::int32_t* o = plane + y * net.width;
        for (std::int64_t x = 0; x < net.width; ++x) o[x] = row[std::min<std::int64_t>(x, shape.width - 1)];
      }
    }
    return out;
  }

  static void unpad(const std::vector<std::int32_t>& forecast, const FrameShape& shape, const NetShape& net,
                    std::span<std::uint16_t> out) {
    for (std::size_t p = 0; p < shape.channels; ++p)
      for (std::uint32_t y = 0; y < shape.height; ++y) {
        const std::int32_t* row = forecast.data() + (p * net.height + y) * net.width;
        std::uint16_t* o = out.data() + (p * shape.height + y) * shape.width;
        for (std::uint32_t x = 0; x < shape.width; ++x) o[x] = std::uint16_t(row[x]);
      }
  }

  // SHA-256 of the forecasts on a fixed probe: two GOPs of five 160x120 frames with moving
  // gradients and texture, run closed loop through this predictor's own calls, batched. Measured:
  // a 56x40 probe missed float32 differences that whole 160x120 frames showed (vector loop tails).
  std::string compute_fingerprint() const {
    FrameShape shape{160, 120, std::uint32_t(engine_->options().a_channels[0]), 255};
    auto frame = [&](int sequence, int t) {
      std::vector<std::uint16_t> pixels(shape.size());
      std::uint32_t seed = 0x9e3779b9u * std::uint32_t(sequence + 1);
      for (std::size_t i = 0; i < pixels.size(); ++i) {
        const std::uint32_t x = i % shape.width, y = (i / shape.width) % shape.height, c = i / (shape.width * shape.height);
        seed = seed * 1664525u + 1013904223u;
        pixels[i] = std::uint16_t((x * 4 + y * 3 + t * (5 + 2 * sequence) + c * 40 + ((x / 7 + y / 5) % 2) * 60 + (seed >> 29)) % 256);
      }
      return pixels;
    };
    std::vector<std::unique_ptr<GopState>> states;
    for (int s = 0; s < 2; ++s) {
      const auto key = frame(s, 0);
      states.push_back(begin_gop(shape, key));
    }
    // The arithmetic's name is hashed too: an exact and a float32 run that happen to agree on the
    // probe are still different predictors.
    std::vector<std::uint8_t> bytes(options_.arithmetic.begin(), options_.arithmetic.end());
    std::vector<std::vector<std::uint16_t>> forecasts(2, std::vector<std::uint16_t>(shape.size()));
    for (int t = 1; t < 5; ++t) {
      GopState* gops[] = {states[0].get(), states[1].get()};
      std::span<std::uint16_t> views[] = {forecasts[0], forecasts[1]};
      forecast(gops, views);
      for (const auto& f : forecasts)
        for (auto v : f) bytes.push_back(std::uint8_t(v)), bytes.push_back(std::uint8_t(v >> 8));
      const auto a = frame(0, t), b = frame(1, t);
      std::span<const std::uint16_t> frames[] = {a, b};
      observe(gops, frames);
    }
    return sha256_hex(bytes);
  }

  LearnedPredictorOptions options_;
  std::string model_name_, weights_sha256_, arithmetic_, fingerprint_;
  std::unique_ptr<PredNetEngine> engine_;
};

std::vector<std::filesystem::path> model_files_in(const std::filesystem::path& entry) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  if (std::filesystem::is_directory(entry, ec)) {
    for (const auto& f : std::filesystem::directory_iterator(entry, ec))
      if (f.path().extension() == ".tzm") files.push_back(f.path());
    std::sort(files.begin(), files.end());
  } else if (std::filesystem::is_regular_file(entry, ec)) {
    files.push_back(entry);
  }
  return files;
}

}  // namespace

std::unique_ptr<Predictor> make_prednet_predictor(const LearnedPredictorOptions& options) {
  if (options.model_data)
    return std::make_unique<PredNetPredictor>(*options.model_data, options.model_name, options.model_name, options,
                                              options.model_data->weights_sha256);
  const auto path = options.model.empty() ? default_model_path() : options.model;
  const ModelFile model = load_model_file(path);
  return std::make_unique<PredNetPredictor>(model, path.filename().string(), path, options, model.weights_sha256);
}

std::vector<std::uint8_t> prednet_model_bytes(const LearnedPredictorOptions& options) {
  if (options.model_data) {
    ModelFile model = upgrade_model(*options.model_data, options.model_name);
    return model.serialize();
  }
  const auto path = options.model.empty() ? default_model_path() : options.model;
  ModelFile model = upgrade_model(load_model_file(path), path.string());
  return model.serialize();
}

std::unique_ptr<Predictor> prednet_predictor_for(const PredictorIdentity& identity, const std::filesystem::path& model_path,
                                                 std::span<const std::uint8_t> embedded) {
  LearnedPredictorOptions options;
  std::string name;
  try {
    const auto config = nlohmann::json::parse(identity.configuration);
    name = config.at("model").get<std::string>();
    options.arithmetic = config.at("arithmetic").get<std::string>();
    options.open_loop = config.at("loop").get<std::string>() == "open";
    options.warmup = config.at("warmup").get<std::size_t>();
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(std::string("the archive's PredNet configuration is damaged: ") + e.what());
  }
  std::optional<ModelFile> model;
  std::filesystem::path found;
  if (model_path.empty() && !embedded.empty()) {
    // The model travels with the data: it must be the one the identity names.
    const std::string what = "the archive's embedded PredNet model";
    model = parse_model(embedded, what);
    if (model->version < 2) throw ModelError(what + " is model format " + std::to_string(model->version) + "; only format 2 is embedded");
    if (!model->has_weights(identity.weights_sha256))
      throw ModelError(what + " is another model (weights SHA-256 " + model->weights_sha256.substr(0, 16) +
                       "..., the archive was written with " + identity.weights_sha256.substr(0, 16) + "...)");
    found = what;
  }
  const auto candidates = !model_path.empty() ? std::vector<std::filesystem::path>{model_path}
                          : model ? std::vector<std::filesystem::path>{}
                                  : model_search_path();
  for (const auto& entry : candidates) {
    for (const auto& file : model_files_in(entry)) {
      try {
        ModelFile m = load_model_file(file);
        if (m.has_weights(identity.weights_sha256)) {
          model = std::move(m);
          found = file;
          break;
        }
      } catch (const ModelError&) {
        if (!model_path.empty()) throw;  // the file the user named is broken: say so
      }
    }
    if (model) break;
  }
  if (!model)
    throw ModelError("the archive was written with the PredNet model '" + name + "' (weights SHA-256 " +
                     identity.weights_sha256.substr(0, 16) + "...), " +
                     (model_path.empty() ? "which is not in the model search path ($TEZIP_MODEL_PATH, then " + std::string(TEZIP_MODELS_DIR) + ")"
                                         : "and " + model_path.string() + " is a different model") +
                     "; give the right model with --model FILE");
  auto predictor = std::make_unique<PredNetPredictor>(*model, name, found, options, identity.weights_sha256);
  const auto mine = predictor->identity();
  // The probe does not exercise every kernel (measured: ATEN_CPU_CAPABILITY=default passes the probe
  // yet changes whole frames), so float32 also needs the same libtorch, CPU capability and oneDNN
  // switch; the DNNL_MAX_CPU_ISA and other variables are left to the probe.
  const auto kernels = [](const std::string& arithmetic) {
    std::size_t end = 0;
    for (int field = 0; field < 4 && end != std::string::npos; ++field) end = arithmetic.find(';', end + (field ? 1 : 0));
    return arithmetic.substr(0, end);
  };
  if (mine.fingerprint != identity.fingerprint || kernels(mine.arithmetic) != kernels(identity.arithmetic))
    throw DeterminismError("this machine cannot reproduce the archive's PredNet forecasts bit for bit: the archive's "
                           "predictor fingerprint is " + identity.fingerprint.substr(0, 16) + " (arithmetic: " +
                           identity.arithmetic + "), this machine's is " + mine.fingerprint.substr(0, 16) +
                           " (arithmetic: " + mine.arithmetic + "). " +
                           (identity.arithmetic == "exact"
                                ? std::string("The exact engine is identical on every machine, so this tezip's differs from the writer's: decode with the version that wrote it")
                                : std::string("Decode where the arithmetic matches, or encode with --arithmetic exact, which is identical on every machine")));
  return predictor;
}

}  // namespace tezip
