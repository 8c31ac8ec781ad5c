#pragma once
// The implementations behind the learned module's table (module_entry.cpp). Their own namespace:
// the core defines the public names (learned_predictor.hpp, training.hpp) as forwarders, and a
// call inside the module must never bind to those.
#include "predictor/learned_predictor.hpp"
#include "predictor/training.hpp"

namespace tezip::learned {

std::unique_ptr<Predictor> make_prednet_predictor(const LearnedPredictorOptions& options);
std::unique_ptr<Predictor> prednet_predictor_for(const PredictorIdentity& identity, const std::filesystem::path& model);
TrainingResult train_prednet(const std::vector<TrainingSequence>& sequences, const TrainingOptions& options,
                             const TrainingCallbacks& callbacks);
std::vector<std::vector<float>> prednet_forecasts(const ModelFile& model, const TrainingSequence& sequence);
ForecastQuality evaluate_forecasts(const ModelFile& model, const std::vector<TrainingSequence>& sequences,
                                   double held_out_fraction, int warmup);

}  // namespace tezip::learned
