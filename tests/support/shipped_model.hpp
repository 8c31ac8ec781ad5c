#pragma once
// The shipped PredNet model, and models that no search path holds made from it (tests of
// embedded, referenced and adapted models that need no libtorch).
#include <filesystem>
#include <string>

#include "predictor/model_file.hpp"

namespace tezip::test {

inline const std::filesystem::path kShippedModel = std::filesystem::path(TEZIP_SOURCE_DIR) / "models/prednet-small.tzm";

// The shipped model with its forecast bias moved by `delta`, carrying `metadata_json`.
inline ModelFile perturbed_model(float delta, const std::string& metadata_json = "{\"test\": \"perturbed\"}") {
  ModelFile model = load_model_file(kShippedModel);
  auto tensors = parse_weights(model.weights, "shipped");
  for (auto& t : tensors)
    if (t.name == "ahat0.bias") t.values[0] += delta;
  model.weights = serialize_weights(tensors);
  model.weights_sha256_v1.clear();
  model.metadata_json = metadata_json;
  model.serialize();  // sets weights_sha256
  return model;
}

}  // namespace tezip::test
