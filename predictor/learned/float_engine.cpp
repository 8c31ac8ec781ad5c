#include "predictor/learned/engine.hpp"

namespace tezip {
namespace {

class FloatEngine final : public PredNetEngine {
 public:
  explicit FloatEngine(PredNet net) : net_(std::move(net)) { net_->eval(); }
  std::string arithmetic() const override { return "float32"; }
  const PredNetOptions& options() const override { return net_->options(); }

  PredNetState initial_state(std::int64_t batch, std::int64_t height, std::int64_t width) const override {
    return net_->initial_state(batch, height, width, torch::TensorOptions().dtype(torch::kFloat32));
  }

  torch::Tensor predict(PredNetState& state, std::uint32_t max_value) const override {
    torch::NoGradGuard no_grad;
    const auto forecast = net_->predict(state);
    return (forecast * double(max_value)).round().clamp(0, double(max_value)).to(torch::kInt32);
  }

  void correct(PredNetState& state, const torch::Tensor& pixels, std::uint32_t max_value) const override {
    torch::NoGradGuard no_grad;
    net_->correct(state, pixels.to(torch::kFloat32) / double(max_value));
  }

 private:
  // Module calls do not modify the module; PredNet's methods are non-const only because torch's are.
  mutable PredNet net_;
};

}  // namespace

std::unique_ptr<PredNetEngine> make_float_engine(PredNet net) { return std::make_unique<FloatEngine>(std::move(net)); }

}  // namespace tezip
