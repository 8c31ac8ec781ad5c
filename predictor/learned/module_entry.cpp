// The learned module's one exported entry (predictor/learned/module_table.hpp): the table the core
// forwards PredNet calls to.
#include <torch/torch.h>

#include "predictor/learned/module_api.hpp"

namespace {

void single_threaded() { torch::set_num_threads(1); }

const tezip::LearnedModule kModule = {
    TEZIP_LEARNED_MODULE_ABI,
    &tezip::learned::make_float_engine,
    &tezip::learned::torch_weights,
    &single_threaded,
    &tezip::learned::train_prednet,
    &tezip::learned::prednet_forecasts,
    &tezip::learned::evaluate_forecasts,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const tezip::LearnedModule* tezip_learned_module_v2() { return &kModule; }
