// PredNet's entry points for the torch-free core the fuzz targets link (see CMakeLists.txt here):
// clang 14 cannot compile libtorch's headers, and no fuzz target needs a network. Each refuses
// the way a missing model does, so an archive naming PredNet is a clean DataError.
#include "predictor/learned_predictor.hpp"
#include "predictor/model_file.hpp"

namespace tezip {

std::unique_ptr<Predictor> make_prednet_predictor(const LearnedPredictorOptions&) {
  throw ModelError("this build has no PredNet (fuzz core without libtorch)");
}

void use_single_threaded_torch() {}

std::unique_ptr<Predictor> prednet_predictor_for(const PredictorIdentity&, const std::filesystem::path&) {
  throw ModelError("this build has no PredNet (fuzz core without libtorch)");
}

std::vector<std::filesystem::path> model_search_path() { return {}; }
std::filesystem::path default_model_path() { return {}; }

}  // namespace tezip
