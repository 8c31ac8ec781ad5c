#pragma once
// The boundary between tezip's torch-free core and its libtorch part (DESIGN.md §3): PredNet's
// network, its training, its float32 arithmetic and the reading of version-1 model files
// (torch::save) live in a separate shared library, libtezip_learned.so, which the core loads with
// dlopen() the first time one of them is needed. The exact engine and the PredNet predictor are in
// the core, so a process that compresses or decodes with --arithmetic exact (the CLI, a training
// loader, the Python module) never maps libtorch. Internal and torch-free: not installed (the
// install rules leave predictor/learned/ out); users call learned_predictor.hpp and training.hpp.
#include <memory>
#include <string>
#include <vector>

#include "predictor/learned_predictor.hpp"
#include "predictor/model_file.hpp"
#include "predictor/prednet_engine.hpp"
#include "predictor/training.hpp"

namespace tezip {

// What the learned module exports, as one table: the core and the module are built together, and
// `abi` (compiler and tezip version) refuses a module from another build.
struct LearnedModule {
  const char* abi;
  // libtorch float32 on the CPU: the network as trained (predictor/learned/float_engine.cpp).
  std::unique_ptr<PredNetEngine> (*make_float_engine)(const ModelFile& model, const std::string& name);
  // The tensors of a version-1 model file (torch::load), in the network's order.
  std::vector<WeightTensor> (*torch_weights)(const ModelFile& model, const std::string& name);
  void (*use_single_threaded_torch)();
  TrainingResult (*train_prednet)(const std::vector<TrainingSequence>&, const TrainingOptions&, const TrainingCallbacks&);
  std::vector<std::vector<float>> (*prednet_forecasts)(const ModelFile&, const TrainingSequence&);
  ForecastQuality (*evaluate_forecasts)(const ModelFile&, const std::vector<TrainingSequence>&, double, int);
};

// The string both sides compile in; they must match exactly.
#define TEZIP_LEARNED_MODULE_ABI "tezip " TEZIP_VERSION_STRING "; " __VERSION__
// The module's one exported symbol (v2: the table above, with make_float_engine and torch_weights).
#define TEZIP_LEARNED_MODULE_ENTRY "tezip_learned_module_v2"

// Loads the module on first use (thread-safe) from $TEZIP_LEARNED_MODULE, else from the folder of
// libtezip itself. Throws LearnedModuleError, saying that `purpose` (e.g. "tezip train") needs
// libtorch and what was tried, when the module is absent or unusable.
const LearnedModule& learned_module(const std::string& purpose);

}  // namespace tezip
