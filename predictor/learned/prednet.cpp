#include "predictor/learned/prednet.hpp"

#include "predictor/learned/module_api.hpp"

#include <sstream>

namespace tezip {
namespace {

torch::nn::Conv2d conv(int in, int out, int kernel) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).padding(kernel / 2).bias(true));
}

}  // namespace

PredNetImpl::PredNetImpl(PredNetOptions options) : options_(std::move(options)) {
  options_.validate();
  const int layers = options_.layers();
  for (int l = 0; l < layers; ++l) {
    const int inputs = 2 * options_.a_channels[l] + options_.r(l) + (l + 1 < layers ? options_.r(l + 1) : 0);
    const std::string n = std::to_string(l);
    lstm.push_back(register_module("lstm" + n, conv(inputs, 4 * options_.r(l), options_.kernel)));
    ahat.push_back(register_module("ahat" + n, conv(options_.r(l), options_.a_channels[l], options_.kernel)));
    if (l > 0)
      a.push_back(register_module("a" + n, conv(2 * options_.a_channels[l - 1], options_.a_channels[l], options_.kernel)));
    else
      a.emplace_back(nullptr);
  }
}

PredNetState PredNetImpl::initial_state(std::int64_t batch, std::int64_t height, std::int64_t width,
                                        const torch::TensorOptions& tensor_options) const {
  PredNetState s;
  for (int l = 0; l < options_.layers(); ++l) {
    const std::int64_t h = height >> l, w = width >> l;
    s.r.push_back(torch::zeros({batch, options_.r(l), h, w}, tensor_options));
    s.c.push_back(torch::zeros({batch, options_.r(l), h, w}, tensor_options));
    s.e.push_back(torch::zeros({batch, 2 * options_.a_channels[l], h, w}, tensor_options));
  }
  s.last = torch::zeros({batch, options_.a_channels[0], height, width}, tensor_options);
  return s;
}

torch::Tensor PredNetImpl::predict(PredNetState& s) {
  namespace F = torch::nn::functional;
  for (int l = options_.layers() - 1; l >= 0; --l) {
    std::vector<torch::Tensor> inputs = {s.e[l], s.r[l]};
    if (l + 1 < options_.layers())
      inputs.push_back(F::interpolate(s.r[l + 1], F::InterpolateFuncOptions().scale_factor(std::vector<double>{2, 2}).mode(torch::kNearest)));
    const auto gates = lstm[l](torch::cat(inputs, 1)).chunk(4, 1);
    const auto i = hard_sigmoid(gates[0]), f = hard_sigmoid(gates[1]), o = hard_sigmoid(gates[2]);
    s.c[l] = f * s.c[l] + i * torch::tanh(gates[3]);
    s.r[l] = o * torch::tanh(s.c[l]);
  }
  s.forecast = options_.residual ? (s.last + ahat[0](s.r[0])).clamp(0.0, 1.0) : torch::relu(ahat[0](s.r[0])).clamp_max(1.0);
  return s.forecast;
}

torch::Tensor PredNetImpl::correct(PredNetState& s, const torch::Tensor& frame) {
  std::vector<torch::Tensor> errors;
  torch::Tensor target = frame;
  for (int l = 0; l < options_.layers(); ++l) {
    const torch::Tensor prediction = l == 0 ? s.forecast : torch::relu(ahat[l](s.r[l]));
    s.e[l] = torch::cat({torch::relu(prediction - target), torch::relu(target - prediction)}, 1);
    errors.push_back(s.e[l].mean({1, 2, 3}));
    if (l + 1 < options_.layers()) target = torch::max_pool2d(torch::relu(a[l + 1](s.e[l])), 2);
  }
  s.last = frame;
  return torch::stack(errors, 1);  // [B, layers]
}

torch::Tensor PredNetImpl::loss(const torch::Tensor& frames) {
  const auto sizes = frames.sizes();
  auto state = initial_state(sizes[0], sizes[3], sizes[4], frames.options());
  std::vector<double> weights;
  for (int l = 0; l < options_.layers(); ++l) weights.push_back(options_.loss_weight(l));
  const auto layer_weights = torch::tensor(weights, frames.options());
  torch::Tensor total = torch::zeros({}, frames.options());
  for (std::int64_t t = 0; t < sizes[1]; ++t) {
    predict(state);
    const auto errors = correct(state, frames.select(1, t));
    if (t > 0) total = total + (errors * layer_weights).sum(1).mean();
  }
  return sizes[1] > 1 ? total / double(sizes[1] - 1) : total;
}

torch::Tensor PredNetImpl::forecasts(const torch::Tensor& frames) {
  const auto sizes = frames.sizes();
  auto state = initial_state(sizes[0], sizes[3], sizes[4], frames.options());
  std::vector<torch::Tensor> out;
  for (std::int64_t t = 0; t < sizes[1]; ++t) {
    out.push_back(t == 0 ? torch::zeros_like(frames.select(1, 0)) : predict(state));
    if (t == 0) predict(state);
    correct(state, frames.select(1, t));
  }
  return torch::stack(out, 1);
}

std::vector<WeightTensor> weight_tensors(PredNet& net) {
  std::vector<WeightTensor> tensors;
  for (const auto& p : net->named_parameters()) {
    const auto values = p.value().detach().to(torch::kCPU, torch::kFloat32).contiguous();
    tensors.push_back({p.key(), values.sizes().vec(),
                       std::vector<float>(values.data_ptr<float>(), values.data_ptr<float>() + values.numel())});
  }
  return tensors;
}

ModelFile make_model_file(PredNet& net, const std::string& metadata_json) {
  ModelFile model;
  model.options = net->options();
  model.metadata_json = metadata_json;
  model.version = 2;
  const auto tensors = weight_tensors(net);
  check_weights(tensors, model.options, "the network");  // the file's order is the options' order
  model.weights = serialize_weights(tensors);
  return model;
}

PredNet load_prednet(const ModelFile& model, const std::string& name) {
  PredNet net(model.options);
  if (model.version >= 2) {
    const auto tensors = tensor_weights(model, name);
    check_weights(tensors, model.options, name);
    auto parameters = net->named_parameters();
    torch::NoGradGuard no_grad;
    for (const auto& t : tensors) {
      auto& p = parameters[t.name];
      p.copy_(torch::from_blob(const_cast<float*>(t.values.data()), p.sizes(), torch::kFloat32));
    }
    net->eval();
    return net;
  }
  // Version 1: a torch::save stream. torch::load replaces each tensor whole, shape included:
  // compare with the shapes the options give.
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> expected;
  for (const auto& p : net->named_parameters()) expected.emplace_back(p.key(), p.value().sizes().vec());
  try {
    std::istringstream in(std::string(model.weights.begin(), model.weights.end()));
    torch::load(net, in);
  } catch (const c10::Error& e) {
    throw ModelError(name + ": the weights do not fit the model's options: " + e.what_without_backtrace());
  }
  const auto loaded = net->named_parameters();
  for (const auto& [key, sizes] : expected)
    if (!loaded.contains(key) || loaded[key].sizes().vec() != sizes)
      throw ModelError(name + ": the weights do not fit the model's options (parameter '" + key + "' has another shape)");
  net->eval();
  return net;
}

namespace learned {

std::vector<WeightTensor> torch_weights(const ModelFile& model, const std::string& name) {
  PredNet net = load_prednet(model, name);
  return weight_tensors(net);
}

}  // namespace learned
}  // namespace tezip
