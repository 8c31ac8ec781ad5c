#include "predictor/prednet_options.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace tezip {

void PredNetOptions::validate() const {
  if (a_channels.size() < 1 || a_channels.size() > 6) throw std::invalid_argument("PredNet needs 1 to 6 layers");
  if (a_channels[0] != 1 && a_channels[0] != 3) throw std::invalid_argument("PredNet input must have 1 or 3 channels");
  for (int c : a_channels)
    if (c < 1 || c > 1024) throw std::invalid_argument("PredNet layer channels must be 1..1024");
  if (!r_channels.empty()) {
    if (r_channels.size() != a_channels.size()) throw std::invalid_argument("the R stack must have one entry per layer");
    for (int c : r_channels)
      if (c < 1 || c > 1024) throw std::invalid_argument("PredNet R channels must be 1..1024");
  }
  if (kernel < 1 || kernel > 7 || kernel % 2 == 0) throw std::invalid_argument("PredNet kernel must be odd, 1..7");
  for (double w : layer_loss)
    if (!(w >= 0 && w <= 1e6)) throw std::invalid_argument("PredNet layer loss weights must be >= 0");
}

std::vector<PredNetOptions::Parameter> PredNetOptions::parameters() const {
  std::vector<Parameter> list;
  auto conv = [&](const std::string& name, int in, int out) {
    list.push_back({name + ".weight", {out, in, kernel, kernel}});
    list.push_back({name + ".bias", {out}});
  };
  for (int l = 0; l < layers(); ++l) {
    const int up = l + 1 < layers() ? r(l + 1) : 0;
    conv("lstm" + std::to_string(l), 2 * a_channels[l] + r(l) + up, 4 * r(l));
    conv("ahat" + std::to_string(l), r(l), a_channels[l]);
    if (l > 0) conv("a" + std::to_string(l), 2 * a_channels[l - 1], a_channels[l]);
  }
  return list;
}

std::string PredNetOptions::to_json() const {
  nlohmann::json j;
  j["a_channels"] = a_channels;
  j["r_channels"] = r_channels;
  j["kernel"] = kernel;
  j["layer_loss"] = layer_loss;
  if (residual) j["forecast"] = "residual";
  return j.dump();
}

PredNetOptions PredNetOptions::from_json(const std::string& text) {
  PredNetOptions o;
  try {
    const auto j = nlohmann::json::parse(text);
    o.a_channels = j.at("a_channels").get<std::vector<int>>();
    o.r_channels = j.value("r_channels", std::vector<int>{});
    o.kernel = j.at("kernel").get<int>();
    o.layer_loss = j.value("layer_loss", std::vector<double>{1.0});
    const auto forecast = j.value("forecast", std::string("frame"));
    if (forecast != "frame" && forecast != "residual")
      throw std::invalid_argument("PredNet options: forecast must be \"frame\" or \"residual\", not \"" + forecast + "\"");
    o.residual = forecast == "residual";
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("PredNet options: ") + e.what());
  }
  o.validate();
  return o;
}

}  // namespace tezip
