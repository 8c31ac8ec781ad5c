#pragma once
#include <memory>

#include "predictor/predictor.hpp"

namespace tezip {

// "motion": y[t-1] moved on by the block motion measured between y[t-2] and y[t-1].
std::unique_ptr<Predictor> make_motion_predictor();

}  // namespace tezip
