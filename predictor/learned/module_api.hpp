#pragma once
// The implementations behind the learned module's table (module_entry.cpp). Their own namespace:
// the core defines the public names (learned_predictor.hpp, training.hpp) as forwarders, and a
// call inside the module must never bind to those.
#include "predictor/learned/module_table.hpp"

namespace tezip::learned {

std::unique_ptr<PredNetEngine> make_float_engine(const ModelFile& model, const std::string& name);
std::vector<WeightTensor> torch_weights(const ModelFile& model, const std::string& name);
TrainingResult train_prednet(const std::vector<TrainingSequence>& sequences, const TrainingOptions& options,
                             const TrainingCallbacks& callbacks);
std::vector<std::vector<float>> prednet_forecasts(const ModelFile& model, const TrainingSequence& sequence);
ForecastQuality evaluate_forecasts(const ModelFile& model, const std::vector<TrainingSequence>& sequences,
                                   double held_out_fraction, int warmup);

}  // namespace tezip::learned
