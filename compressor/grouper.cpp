#include "compressor/grouper.hpp"

#include <algorithm>

#include "compressor/gop_codec.hpp"

namespace tezip {

Grouper::Grouper(const Predictor& predictor, const FrameShape& shape, const GopPolicy& policy, std::size_t max_gop)
    : predictor_(predictor),
      shape_(shape),
      dynamic_(policy.kind == GopKind::Dynamic && !predictor.intra_only()),
      threshold_(policy.mse_threshold),
      max_gop_(std::max<std::size_t>(1, max_gop)) {
  if (dynamic_) forecast_.resize(shape.size());
}

bool Grouper::next(std::span<const std::uint16_t> frame) {
  bool cut = count_ >= max_gop_;
  if (dynamic_ && count_ > 0 && !cut) {
    GopState* states[] = {probe_.get()};
    std::span<std::uint16_t> views[] = {forecast_};
    predictor_.forecast(states, views);
    cut = mean_squared_error(forecast_, frame, shape_.max_value) > threshold_;
  }
  if (cut) count_ = 0;
  if (dynamic_) {
    if (count_ == 0) {
      probe_ = predictor_.begin_gop(shape_, frame);
    } else {
      GopState* states[] = {probe_.get()};
      std::span<const std::uint16_t> views[] = {frame};
      predictor_.observe(states, views);
    }
  }
  ++count_;
  return cut;
}

}  // namespace tezip
