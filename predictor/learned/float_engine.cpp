// The float32 engine (predictor/prednet_engine.hpp): the network as trained, in libtorch. Its
// results may differ between CPU kernels (DESIGN.md §6), which the archive's fingerprint and the
// recorded arithmetic detect.
#include <ATen/Version.h>

#include <cstdlib>
#include <sstream>

#include "predictor/learned/module_api.hpp"
#include "predictor/learned/prednet.hpp"

namespace tezip {
namespace {

struct FloatState final : PredNetEngineState {
  PredNetState state;  // float32 tensors [samples, ...]
};

// libtorch 1.13 trusts ATEN_CPU_CAPABILITY and dies of SIGILL when it names a vector ISA the CPU
// lacks (measured: avx512 on an AVX2 machine). Refuse with a message instead.
void check_cpu_capability() {
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

class FloatEngine final : public PredNetEngine {
 public:
  explicit FloatEngine(PredNet net) : net_(std::move(net)) { net_->eval(); }
  std::string arithmetic() const override { return "float32"; }
  const PredNetOptions& options() const override { return net_->options(); }

  std::string arithmetic_description() const override {
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

  std::unique_ptr<PredNetEngineState> initial_state(int samples, int height, int width) const override {
    const int m = options().padding_multiple();
    if (samples < 1 || height <= 0 || width <= 0 || height % m != 0 || width % m != 0)
      throw std::invalid_argument("float32 PredNet: frame size " + std::to_string(height) + "x" + std::to_string(width) +
                                  " is not a multiple of " + std::to_string(m));
    auto s = std::make_unique<FloatState>();
    s->state = net_->initial_state(samples, height, width, torch::TensorOptions().dtype(torch::kFloat32));
    return s;
  }

  void predict(std::span<PredNetEngineState* const> states, std::uint32_t max_value,
               std::span<const std::span<std::int32_t>> forecasts) const override {
    torch::NoGradGuard no_grad;
    const auto batch = gather(states);
    PredNetState s = concatenate(batch);
    const auto forecast = net_->predict(s);
    const auto pixels = (forecast * double(max_value)).round().clamp(0, double(max_value)).to(torch::kInt32).contiguous();
    split(s, batch);
    std::int64_t at = 0;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const auto part = pixels.narrow(0, at, samples(*batch[i])).contiguous();
      if (std::size_t(part.numel()) != forecasts[i].size())
        throw std::invalid_argument("float32 PredNet: the forecast's size does not fit the state");
      std::copy(part.data_ptr<std::int32_t>(), part.data_ptr<std::int32_t>() + part.numel(), forecasts[i].begin());
      at += samples(*batch[i]);
    }
  }

  void correct(std::span<PredNetEngineState* const> states, std::span<const std::span<const std::int32_t>> frames,
               std::uint32_t max_value) const override {
    torch::NoGradGuard no_grad;
    const auto batch = gather(states);
    std::vector<torch::Tensor> inputs;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      auto shape = batch[i]->state.e[0].sizes().vec();  // [samples, 2 C, H, W]
      shape[1] = options().a_channels[0];
      std::int64_t count = 1;
      for (auto d : shape) count *= d;
      if (std::size_t(count) != frames[i].size()) throw std::invalid_argument("float32 PredNet: the frame's shape does not fit the state");
      inputs.push_back(torch::from_blob(const_cast<std::int32_t*>(frames[i].data()), shape, torch::kInt32));
    }
    PredNetState s = concatenate(batch);
    net_->correct(s, torch::cat(inputs, 0).to(torch::kFloat32) / double(max_value));
    split(s, batch);
  }

 private:
  static std::vector<FloatState*> gather(std::span<PredNetEngineState* const> states) {
    std::vector<FloatState*> out;
    for (auto* state : states) {
      auto* s = dynamic_cast<FloatState*>(state);
      if (s == nullptr) throw std::invalid_argument("float32 PredNet: the state was not made by this engine");
      out.push_back(s);
    }
    return out;
  }
  static std::int64_t samples(const FloatState& s) { return s.state.r.front().size(0); }

  // Several GOPs as one batch along dimension 0, and back (views into the batch's tensors).
  static PredNetState concatenate(const std::vector<FloatState*>& states) {
    if (states.size() == 1) return states.front()->state;
    PredNetState s;
    const std::size_t layers = states.front()->state.r.size();
    auto cat = [&](auto member, std::size_t l) {
      std::vector<torch::Tensor> parts;
      for (auto* g : states) parts.push_back((g->state.*member)[l]);
      return torch::cat(parts, 0);
    };
    for (std::size_t l = 0; l < layers; ++l) {
      s.r.push_back(cat(&PredNetState::r, l));
      s.c.push_back(cat(&PredNetState::c, l));
      s.e.push_back(cat(&PredNetState::e, l));
    }
    if (states.front()->state.forecast.defined()) {
      std::vector<torch::Tensor> parts;
      for (auto* g : states) parts.push_back(g->state.forecast);
      s.forecast = torch::cat(parts, 0);
    }
    std::vector<torch::Tensor> last;
    for (auto* g : states) last.push_back(g->state.last);
    s.last = torch::cat(last, 0);
    return s;
  }

  static void split(const PredNetState& batch, const std::vector<FloatState*>& states) {
    if (states.size() == 1) {
      states.front()->state = batch;
      return;
    }
    std::int64_t at = 0;
    for (auto* g : states) {
      const std::int64_t n = samples(*g);
      for (std::size_t l = 0; l < batch.r.size(); ++l) {
        g->state.r[l] = batch.r[l].narrow(0, at, n);
        g->state.c[l] = batch.c[l].narrow(0, at, n);
        g->state.e[l] = batch.e[l].narrow(0, at, n);
      }
      if (batch.forecast.defined()) g->state.forecast = batch.forecast.narrow(0, at, n);
      g->state.last = batch.last.narrow(0, at, n);
      at += n;
    }
  }

  // Module calls do not modify the module; PredNet's methods are non-const only because torch's are.
  mutable PredNet net_;
};

}  // namespace

namespace learned {

std::unique_ptr<PredNetEngine> make_float_engine(const ModelFile& model, const std::string& name) {
  check_cpu_capability();
  return std::make_unique<FloatEngine>(load_prednet(model, name));
}

}  // namespace learned
}  // namespace tezip
