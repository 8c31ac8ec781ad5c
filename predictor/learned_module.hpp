#pragma once
// The boundary between tezip's torch-free core and its libtorch part (DESIGN.md §3): PredNet's
// network, its training and its float32 and exact inference live in a separate shared library,
// libtezip_learned.so, which the core loads with dlopen() the first time a PredNet is needed. So a
// process that decodes an archive of a classical predictor (the CLI, a training loader, the Python
// module) never maps libtorch: no second torch beside the user's, and a start in milliseconds.
// Internal: users call the functions of learned_predictor.hpp and training.hpp, which forward here.
#include <filesystem>
#include <memory>
#include <vector>

#include "predictor/learned_predictor.hpp"
#include "predictor/training.hpp"

namespace tezip {

// What the learned module exports, as one table: the core and the module are built together, and
// `abi` (compiler and tezip version) refuses a module from another build.
struct LearnedModule {
  const char* abi;
  std::unique_ptr<Predictor> (*make_prednet_predictor)(const LearnedPredictorOptions&);
  std::unique_ptr<Predictor> (*prednet_predictor_for)(const PredictorIdentity&, const std::filesystem::path&);
  void (*use_single_threaded_torch)();
  TrainingResult (*train_prednet)(const std::vector<TrainingSequence>&, const TrainingOptions&, const TrainingCallbacks&);
  std::vector<std::vector<float>> (*prednet_forecasts)(const ModelFile&, const TrainingSequence&);
  ForecastQuality (*evaluate_forecasts)(const ModelFile&, const std::vector<TrainingSequence>&, double, int);
};

// The string both sides compile in; they must match exactly.
#define TEZIP_LEARNED_MODULE_ABI "tezip " TEZIP_VERSION_STRING "; " __VERSION__
// The module's one exported symbol.
#define TEZIP_LEARNED_MODULE_ENTRY "tezip_learned_module_v1"

// Loads the module on first use (thread-safe) from $TEZIP_LEARNED_MODULE, else from the folder of
// libtezip itself. Throws LearnedModuleError, naming what was tried, when it is absent or unusable.
const LearnedModule& learned_module();

}  // namespace tezip
