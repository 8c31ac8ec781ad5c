#include "predictor/registry.hpp"

#include <stdexcept>

namespace tezip {

const std::vector<PredictorInfo>& predictors() {
  static const std::vector<PredictorInfo> list = {
      {"auto", false}, {"intra", false}, {"previous", false}, {"linear", false}, {"motion", false}, {"bidirectional", false}, {"prednet", true},
  };
  return list;
}

const PredictorInfo* find_predictor(const std::string& name) {
  for (const auto& p : predictors())
    if (name == p.name) return &p;
  return nullptr;
}

std::string predictor_names() {
  std::string names;
  for (const auto& p : predictors()) names += (names.empty() ? "" : ", ") + std::string(p.name);
  return names;
}

namespace {

const PredictorInfo& need(const std::string& name) {
  const PredictorInfo* p = find_predictor(name);
  if (p == nullptr) throw std::invalid_argument("unknown predictor '" + name + "' (" + predictor_names() + ")");
  return *p;
}

}  // namespace

std::unique_ptr<Predictor> make_predictor(const std::string& name, const LearnedPredictorOptions& learned) {
  return need(name).learned ? make_prednet_predictor(learned) : make_classical_predictor(name);
}

std::unique_ptr<Predictor> predictor_for(const PredictorIdentity& identity, const std::filesystem::path& model,
                                         std::span<const std::uint8_t> embedded) {
  return need(identity.kind).learned ? prednet_predictor_for(identity, model, embedded) : make_classical_predictor(identity.kind);
}

}  // namespace tezip
