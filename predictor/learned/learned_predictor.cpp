#include "predictor/learned_predictor.hpp"

#include <ATen/Version.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "predictor/learned/engine.hpp"
#include "predictor/learned/module_api.hpp"
#include "predictor/model_file.hpp"

namespace tezip {
namespace {

// One GOP's network state. A gray model runs each channel of a colour frame as its own sequence,
// so `state` holds `samples` sequences (channels) of `channels` planes each.
// The shape the network sees for frames of `shape`: padded to the pooling multiple.
struct NetShape {
  std::int64_t samples, channels, height, width;
};

struct PredNetGop final : GopState {
  FrameShape shape;
  NetShape net;
  PredNetState state;
  torch::Tensor forecast;  // int32 [samples, channels, H, W], padded: the last forecast
  bool predicted = false;  // predict() ran for the step that observe() will complete
  std::size_t observed = 0;
};

class PredNetPredictor final : public Predictor {
 public:
  PredNetPredictor(const ModelFile& model, const std::string& model_name, const LearnedPredictorOptions& options)
      : options_(options), model_name_(model_name), weights_sha256_(model.weights_sha256) {
    if (options_.warmup < 1) throw std::invalid_argument("--warmup must be at least 1");
    if (options_.batch < 1) options_.batch = 1;
    check_cpu_capability();
    PredNet net = load_prednet(model, model_name);
    if (options_.arithmetic == "exact")
      engine_ = make_exact_engine(net);
    else if (options_.arithmetic == "float32" || options_.arithmetic == "float")
      engine_ = make_float_engine(net), options_.arithmetic = "float32";
    else
      throw std::invalid_argument("unknown arithmetic '" + options_.arithmetic + "' (exact or float32)");
    arithmetic_ = describe_arithmetic();
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
    gop->state = engine_->initial_state(gop->net.samples, gop->net.height, gop->net.width);
    GopState* gops[] = {gop.get()};
    std::span<const std::uint16_t> frames[] = {key_frame};
    observe(gops, frames);
    return gop;
  }

  void forecast(std::span<GopState* const> gops, std::span<const std::span<std::uint16_t>> forecasts) const override {
    predict(gops);
    for (std::size_t g = 0; g < gops.size(); ++g) {
      const auto* gop = static_cast<const PredNetGop*>(gops[g]);
      unpad(gop->forecast, gop->shape, forecasts[g]);
    }
  }

  void observe(std::span<GopState* const> gops, std::span<const std::span<const std::uint16_t>> frames) const override {
    if (gops.empty()) return;
    predict(gops);
    std::vector<PredNetGop*> all;
    std::vector<torch::Tensor> inputs;
    for (std::size_t g = 0; g < gops.size(); ++g) {
      auto* gop = static_cast<PredNetGop*>(gops[g]);
      all.push_back(gop);
      // Open loop: past the warm-up, the network sees its own forecast, not the frame.
      if (options_.open_loop && gop->observed >= options_.warmup)
        inputs.push_back(gop->forecast);
      else
        inputs.push_back(pad(frames[g], gop->shape, gop->net));
    }
    PredNetState batch = concatenate(all);
    engine_->correct(batch, torch::cat(inputs, 0), all.front()->shape.max_value);
    split(batch, all);
    for (auto* g : all) {
      g->predicted = false;
      ++g->observed;
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
    PredNetState batch = concatenate(todo);
    const torch::Tensor forecast = engine_->predict(batch, todo.front()->shape.max_value);
    split(batch, todo);
    std::int64_t at = 0;
    for (auto* g : todo) {
      const std::int64_t n = g->state.r.front().size(0);
      g->forecast = forecast.narrow(0, at, n);
      g->predicted = true;
      at += n;
    }
  }

  static PredNetState concatenate(const std::vector<PredNetGop*>& gops) {
    if (gops.size() == 1) return gops.front()->state;
    PredNetState s;
    const std::size_t layers = gops.front()->state.r.size();
    auto cat = [&](auto member, std::size_t l) {
      std::vector<torch::Tensor> parts;
      for (auto* g : gops) parts.push_back((g->state.*member)[l]);
      return torch::cat(parts, 0);
    };
    for (std::size_t l = 0; l < layers; ++l) {
      s.r.push_back(cat(&PredNetState::r, l));
      s.c.push_back(cat(&PredNetState::c, l));
      s.e.push_back(cat(&PredNetState::e, l));
    }
    if (gops.front()->state.forecast.defined()) {
      std::vector<torch::Tensor> parts;
      for (auto* g : gops) parts.push_back(g->state.forecast);
      s.forecast = torch::cat(parts, 0);
    }
    return s;
  }

  static void split(const PredNetState& batch, const std::vector<PredNetGop*>& gops) {
    if (gops.size() == 1) {
      gops.front()->state = batch;
      return;
    }
    std::int64_t at = 0;
    for (auto* g : gops) {
      const std::int64_t n = g->state.r.front().size(0);
      for (std::size_t l = 0; l < batch.r.size(); ++l) {
        g->state.r[l] = batch.r[l].narrow(0, at, n);
        g->state.c[l] = batch.c[l].narrow(0, at, n);
        g->state.e[l] = batch.e[l].narrow(0, at, n);
      }
      if (batch.forecast.defined()) g->state.forecast = batch.forecast.narrow(0, at, n);
      at += n;
    }
  }

  // Planar pixels -> int32 [samples, channels, H, W], edge-replicated to the padded size.
  static torch::Tensor pad(std::span<const std::uint16_t> pixels, const FrameShape& shape, const NetShape& net) {
    auto out = torch::empty({net.samples, net.channels, net.height, net.width}, torch::kInt32);
    std::int32_t* dst = out.data_ptr<std::int32_t>();
    const std::size_t planes = shape.channels;
    for (std::size_t p = 0; p < planes; ++p) {
      const std::uint16_t* src = pixels.data() + p * shape.width * shape.height;
      std::int32_t* plane = dst + p * net.height * net.width;
      for (std::int64_t y = 0; y < net.height; ++y) {
        const std::uint16_t* row = src + std::min<std::int64_t>(y, shape.height - 1) * shape.width;
        std::int32_t* o = plane + y * net.width;
        for (std::int64_t x = 0; x < net.width; ++x) o[x] = row[std::min<std::int64_t>(x, shape.width - 1)];
      }
    }
    return out;
  }

  static void unpad(const torch::Tensor& forecast, const FrameShape& shape, std::span<std::uint16_t> out) {
    const auto f = forecast.contiguous();
    const std::int32_t* src = f.data_ptr<std::int32_t>();
    const std::int64_t height = f.size(2), width = f.size(3);
    for (std::size_t p = 0; p < shape.channels; ++p)
      for (std::uint32_t y = 0; y < shape.height; ++y) {
        const std::int32_t* row = src + (p * height + y) * width;
        std::uint16_t* o = out.data() + (p * shape.height + y) * shape.width;
        for (std::uint32_t x = 0; x < shape.width; ++x) o[x] = std::uint16_t(row[x]);
      }
  }

  // libtorch 1.13 trusts ATEN_CPU_CAPABILITY and dies of SIGILL when it names a vector ISA the CPU
  // lacks (measured: avx512 on an AVX2 machine). Refuse with a message instead.
  static void check_cpu_capability() {
    const char* requested = std::getenv("ATEN_CPU_CAPABILITY");
    if (!requested) return;
    const std::string value = requested;
    const bool ok = value == "avx512" ? __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
                    : value == "avx2" ? bool(__builtin_cpu_supports("avx2")) && bool(__builtin_cpu_supports("fma"))
                                      : true;
    if (!ok)
      throw std::invalid_argument("ATEN_CPU_CAPABILITY=" + value + " names instructions this CPU does not have; libtorch would crash");
  }

  std::string describe_arithmetic() const {
    if (options_.arithmetic == "exact") return "exact";
    std::string capability = "unknown";
    std::istringstream config(at::show_config());
    for (std::string line; std::getline(config, line);)
      if (auto at = line.find("CPU capability usage: "); at != std::string::npos) capability = line.substr(at + 22);
    std::string text = "float32; libtorch " + std::string(TORCH_VERSION) + "; CPU capability " + capability +
                       "; oneDNN " + (at::globalContext().userEnabledMkldnn() ? "on" : "off");
    for (const char* variable : {"ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA"})
      if (const char* value = std::getenv(variable)) text += std::string("; ") + variable + "=" + value;
    return text;
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

namespace learned {

std::unique_ptr<Predictor> make_prednet_predictor(const LearnedPredictorOptions& options) {
  const auto path = options.model.empty() ? default_model_path() : options.model;
  const ModelFile model = load_model_file(path);
  return std::make_unique<PredNetPredictor>(model, path.filename().string(), options);
}

std::unique_ptr<Predictor> prednet_predictor_for(const PredictorIdentity& identity, const std::filesystem::path& model_path) {
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
  const auto candidates = model_path.empty() ? model_search_path() : std::vector<std::filesystem::path>{model_path};
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
  auto predictor = std::make_unique<PredNetPredictor>(*model, name, options);
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

}  // namespace learned
}  // namespace tezip
