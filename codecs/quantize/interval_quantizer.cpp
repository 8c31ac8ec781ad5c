#include "codecs/quantize/interval_quantizer.hpp"

#include <algorithm>
#include <limits>

#include "codecs/codec_error.hpp"
#include "codecs/quantize/error_bound.hpp"

namespace tezip::codecs {
namespace {

inline std::uint16_t clamp_pixel(std::int64_t y, std::uint32_t max_value) {
  return std::uint16_t(std::clamp<std::int64_t>(y, 0, max_value));
}

}  // namespace

void interval_quantize(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> forecast,
                       const PlaneBound& bound, IntervalRuns& runs, std::span<std::uint16_t> recon) {
  if (plane.size() != forecast.size() || plane.size() != recon.size())
    throw CodecError("plane buffers differ in size");
  const bool pointwise = bound.pointwise_rel > 0;
  std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
  std::size_t run_start = 0;
  auto close_run = [&](std::size_t end) {
    const std::int64_t value = std::clamp<std::int64_t>(0, lo, hi);
    runs.values.push_back(std::int32_t(value));
    runs.lengths.push_back(std::uint32_t(end - run_start));
    for (std::size_t j = run_start; j < end; ++j) recon[j] = clamp_pixel(forecast[j] + value, bound.max_value);
    run_start = end;
  };
  for (std::size_t i = 0; i < plane.size(); ++i) {
    const std::int64_t r = std::int64_t(plane[i]) - std::int64_t(forecast[i]);
    const std::int64_t e = pointwise ? pointwise_tolerance(bound.pointwise_rel, plane[i]) : bound.tolerance;
    const std::int64_t new_lo = std::max(lo, r - e), new_hi = std::min(hi, r + e);
    // A run's length is stored as uint32: close it before it could overflow.
    if (new_lo > new_hi || i - run_start == std::numeric_limits<std::uint32_t>::max()) {
      close_run(i);
      lo = r - e;
      hi = r + e;
    } else {
      lo = new_lo;
      hi = new_hi;
    }
  }
  if (run_start < plane.size()) close_run(plane.size());
}

void interval_dequantize(std::span<const std::int32_t> values, std::span<const std::uint32_t> lengths,
                         std::span<const std::uint16_t> forecast, std::uint32_t max_value,
                         std::span<std::uint16_t> recon) {
  if (values.size() != lengths.size() || forecast.size() != recon.size())
    throw CodecError("interval runs are inconsistent");
  std::size_t position = 0;
  for (std::size_t k = 0; k < values.size(); ++k) {
    const std::size_t length = lengths[k];
    if (length == 0 || length > recon.size() - position) throw CodecError("interval runs do not cover the plane");
    for (std::size_t j = position; j < position + length; ++j)
      recon[j] = clamp_pixel(std::int64_t(forecast[j]) + values[k], max_value);
    position += length;
  }
  if (position != recon.size()) throw CodecError("interval runs do not cover the plane");
}

}  // namespace tezip::codecs
