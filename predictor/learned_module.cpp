// The core's side of the learned module (predictor/learned_module.hpp): finds and loads
// libtezip_learned.so, and forwards the public PredNet functions to it. Also the model search path,
// which needs no torch.
#include "predictor/learned_module.hpp"

#include "predictor/shared_module.hpp"

#include <atomic>
#include <cstdlib>
#include <sstream>
#include <string>

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
      "PredNet (libtorch; this build may have -DTEZIP_TORCH=OFF)", result.error));
  if (result.module != nullptr && single_threaded_torch) result.module->use_single_threaded_torch();
  return result;
}

const LoadResult& loaded() {
  static const LoadResult result = load();  // once, thread-safe
  return result;
}

}  // namespace

const LearnedModule& learned_module() {
  const auto& r = loaded();
  if (r.module == nullptr) throw LearnedModuleError(r.error);
  return *r.module;
}

void use_single_threaded_torch() { single_threaded_torch = true; }

std::unique_ptr<Predictor> make_prednet_predictor(const LearnedPredictorOptions& options) {
  return learned_module().make_prednet_predictor(options);
}

std::unique_ptr<Predictor> prednet_predictor_for(const PredictorIdentity& identity, const std::filesystem::path& model) {
  return learned_module().prednet_predictor_for(identity, model);
}

TrainingResult train_prednet(const std::vector<TrainingSequence>& sequences, const TrainingOptions& options,
                             const TrainingCallbacks& callbacks) {
  return learned_module().train_prednet(sequences, options, callbacks);
}

std::vector<std::vector<float>> prednet_forecasts(const ModelFile& model, const TrainingSequence& sequence) {
  return learned_module().prednet_forecasts(model, sequence);
}

ForecastQuality evaluate_forecasts(const ModelFile& model, const std::vector<TrainingSequence>& sequences,
                                   double held_out_fraction, int warmup) {
  return learned_module().evaluate_forecasts(model, sequences, held_out_fraction, warmup);
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
