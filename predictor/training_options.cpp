// TrainingOptions' checks: torch-free, so that `tezip train` refuses bad options even in a build
// without the learned module.
#include <cmath>
#include <stdexcept>
#include <string>

#include "predictor/training.hpp"

namespace tezip {

void TrainingOptions::validate() const {
  net.validate();
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(what);
  };
  need(nt >= 2, "--nt must be at least 2");
  need(batch >= 1, "--batch must be at least 1");
  need(epochs >= 1, "--epochs must be at least 1");
  need(steps >= 1, "--steps must be at least 1");
  need(lr > 0 && std::isfinite(lr), "--lr must be > 0");
  need(lr_drop > 0 && lr_drop <= 1, "the learning-rate drop must be in (0, 1]");
  need(lr_drop_at >= 0 && lr_drop_at <= 1, "the learning-rate drop point must be in [0, 1]");
  need(val_fraction >= 0 && val_fraction < 1, "--val must be in [0, 1)");
  need(val_clips >= 1, "validation needs at least one clip");
  const int m = net.padding_multiple();
  need(crop_height >= m && crop_width >= m && crop_height % m == 0 && crop_width % m == 0,
       "--crop: both sizes must be positive multiples of " + std::to_string(m) + " (2^(layers-1))");
  need(threads >= 1, "--threads must be at least 1");
  need(!resume || !checkpoint.empty(), "resuming needs a checkpoint path");
  need(time_budget >= 0 && std::isfinite(time_budget), "the time budget must be >= 0 seconds");
  need(!(resume && initial), "resume from a checkpoint or start from a model, not both");
}

}  // namespace tezip
