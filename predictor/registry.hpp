#pragma once
// Every predictor tezip has, by name: the one place that maps a name (compress) or an archive's
// recorded identity (decoding) to a Predictor. A new predictor is its own file, one entry in
// registry.cpp and its test.
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "predictor/learned_predictor.hpp"
#include "predictor/predictor.hpp"

namespace tezip {

struct PredictorInfo {
  const char* name;
  bool learned;  // takes a model file and LearnedPredictorOptions
};

// In the order `tezip --help` lists them.
const std::vector<PredictorInfo>& predictors();
// "intra, previous, ...": the names, for messages.
std::string predictor_names();
// nullptr for a name tezip does not have.
const PredictorInfo* find_predictor(const std::string& name);

// For compress. Throws std::invalid_argument (unknown name, bad options) or ModelError (a learned
// predictor whose model cannot be used, or whose module is missing).
std::unique_ptr<Predictor> make_predictor(const std::string& name, const LearnedPredictorOptions& learned = {});

// For decoding: the predictor an archive's identity names, rebuilt as the encoder had it (for a
// learned one: the model with the recorded weights, from `model`, the archive's `embedded` model
// file or the model search path: prednet_predictor_for). Throws std::invalid_argument (unknown or
// unusable), ModelError or DeterminismError.
std::unique_ptr<Predictor> predictor_for(const PredictorIdentity& identity, const std::filesystem::path& model = {},
                                         std::span<const std::uint8_t> embedded = {});

}  // namespace tezip
