#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "codecs/quantize/linear_quantizer.hpp"

namespace tezip::codecs {

// TEZIP's interval quantizer for inter planes. Each pixel allows its residual r = x - f to be
// replaced by any integer in [r - e, r + e]; along the scan these intervals are intersected, and
// when the intersection would become empty the run so far is closed with one value from it (the
// one nearest zero, which is also what a run of exact zeros gives). Values stay integers, so a
// real bound such as 2.5 is honoured exactly (TEZIP's reference code truncated the chosen value
// and broke non-integer bounds). Reconstruction is clamp(f + value), which only moves towards x.
struct IntervalRuns {
  std::vector<std::int32_t> values;
  std::vector<std::uint32_t> lengths;
};

void interval_quantize(std::span<const std::uint16_t> plane, std::span<const std::uint16_t> forecast,
                       const PlaneBound& bound, IntervalRuns& runs, std::span<std::uint16_t> recon);

// Rebuilds a plane from `count` runs starting at runs.values[first] / runs.lengths[first]; throws
// CodecError unless they cover the plane exactly.
void interval_dequantize(std::span<const std::int32_t> values, std::span<const std::uint32_t> lengths,
                         std::span<const std::uint16_t> forecast, std::uint32_t max_value,
                         std::span<std::uint16_t> recon);

}  // namespace tezip::codecs
