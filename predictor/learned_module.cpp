// The core's side of the learned module (predictor/learned/module_table.hpp): finds and loads
// libtezip_learned.so, and forwards to it what needs libtorch: training, the float32 engine and the
// weights of version-1 model files. Also the model search path, which needs no torch.
#include "predictor/learned/module_table.hpp"

#include <atomic>
#include <cstdlib>
#include <sstream>
#include <string>

#include "predictor/shared_module.hpp"

namespace tezip {
namespace {

constexpr const char* kModuleFile = "libtezip_learned.so";
constexpr const char* kDefaultModel = "prednet-small.tzm";

std::atomic<bool> single_threaded_torch = false;

struct LoadResult {
  const LearnedModule* module = nullptr;
  std::string error;
};

LoadResult load() {
  LoadResult result;
  result.module = static_cast<const LearnedModule*>(load_shared_module(
      kModuleFile, "TEZIP_LEARNED_MODULE", TEZIP_LEARNED_MODULE_ENTRY, TEZIP_LEARNED_MODULE_ABI,
      "libtorch (training, --arithmetic float32, version-1 model files; a build with -DTEZIP_TORCH=OFF has none)",
      result.error));
  if (result.module != nullptr && single_threaded_torch) result.module->use_single_threaded_torch();
  return result;
}

const LoadResult& loaded() {
  static const LoadResult result = load();  // once, thread-safe
  return result;
}

}  // namespace

const LearnedModule& learned_module(const std::string& purpose) {
  const auto& r = loaded();
  if (r.module == nullptr) throw LearnedModuleError(purpose + " needs libtorch: " + r.error);
  return *r.module;
}

void use_single_threaded_torch() { single_threaded_torch = true; }

void check_training_available(const std::string& purpose) { learned_module(purpose); }

TrainingResult train_prednet(const std::vector<TrainingSequence>& sequences, const TrainingOptions& options,
                             const TrainingCallbacks& callbacks) {
  return learned_module("training a PredNet").train_prednet(sequences, options, callbacks);
}

std::vector<std::vector<float>> prednet_forecasts(const ModelFile& model, const TrainingSequence& sequence) {
  return learned_module("float32 PredNet forecasts").prednet_forecasts(model, sequence);
}

ForecastQuality evaluate_forecasts(const ModelFile& model, const std::vector<TrainingSequence>& sequences,
                                   double held_out_fraction, int warmup) {
  return learned_module("evaluating a PredNet").evaluate_forecasts(model, sequences, held_out_fraction, warmup);
}

std::vector<WeightTensor> prednet_weights(const ModelFile& model, const std::string& name) {
  std::vector<WeightTensor> tensors;
  if (model.version >= 2) {
    tensors = tensor_weights(model, name);
  } else {
    try {
      tensors = learned_module(name + " (model format 1)").torch_weights(model, name);
    } catch (const LearnedModuleError& e) {
      throw LearnedModuleError(std::string(e.what()) +
                               ". Format 1 stores the weights as a torch::save stream; convert the file once, where "
                               "tezip has libtorch, with: tezip convert-model OLD.tzm -o NEW.tzm");
    }
  }
  check_weights(tensors, model.options, name);
  return tensors;
}

ModelFile upgrade_model(const ModelFile& model, const std::string& name) {
  if (model.version >= 2) return model;
  ModelFile upgraded = model;
  upgraded.version = 2;
  upgraded.weights = serialize_weights(prednet_weights(model, name));
  upgraded.weights_sha256_v1 = model.weights_sha256;
  upgraded.serialize();  // sets weights_sha256
  return upgraded;
}

std::vector<std::filesystem::path> model_search_path() {
  std::vector<std::filesystem::path> path;
  if (const char* env = std::getenv("TEZIP_MODEL_PATH")) {
    std::stringstream in(env);
    for (std::string item; std::getline(in, item, ':');)
      if (!item.empty()) path.emplace_back(item);
  }
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) path.push_back(exe.parent_path().parent_path() / "share" / "tezip" / "models");
  // Installed: <libdir>/../share/tezip/models beside libtezip itself, for a program or Python
  // module whose executable lies elsewhere (CMakeLists.txt sets TEZIP_LIB_TO_MODELS).
  if (const auto lib = core_library_folder(); !lib.empty()) path.push_back((lib / TEZIP_LIB_TO_MODELS).lexically_normal());
  path.emplace_back(TEZIP_MODELS_DIR);
  return path;
}

std::filesystem::path default_model_path() {
  for (const auto& entry : model_search_path()) {
    std::error_code ec;
    if (std::filesystem::is_directory(entry, ec) && std::filesystem::exists(entry / kDefaultModel, ec)) return entry / kDefaultModel;
  }
  throw ModelError(std::string("the default PredNet model ") + kDefaultModel +
                   " is not in the model search path ($TEZIP_MODEL_PATH, then " + TEZIP_MODELS_DIR + "); use --model FILE");
}

}  // namespace tezip
