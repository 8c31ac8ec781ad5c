#pragma once
// A GOP's pixels as they are, through zstd: the chunk mode for frames that are mostly exact
// repeats, moved copies or zeros (Moving MNIST, masks, sparse detector frames). There an LZ coder's
// matches at the distance of one frame, give or take the motion, remove far more than a forecast
// residual does, whose median transform and rank mapping break the repeats up (measured on Moving
// MNIST: zstd -19 on each 20-frame sequence's pixels 91.4, tezip's predictive chunks 51.7).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tezip::codecs {

// Moves every value of `plane` to the centre of its bin of width 2 tolerance + 1 (the centres are
// the multiples of the width, so 0 stays 0: an empty background stays empty), clamped to
// max_value: each value moves by at most `tolerance`, and equal neighbourhoods become exact
// repeats for the LZ coder. tolerance 0 leaves the plane as it is.
void snap_to_bins(std::span<std::uint16_t> plane, std::uint32_t tolerance, std::uint32_t max_value);

// PwRel's bins: for every value x in [0, max_value] the value it is stored as, within
// pointwise_tolerance(rel, x) of it (codecs/quantize/error_bound.hpp), so that runs of neighbouring values
// share one (0 stays 0). Greedy from 0 up: a bin starting at v takes the largest representative r
// that v allows (r - v <= tol(v), and tol never falls, so every x in [v, r] allows it too), then
// every larger x with x - r <= tol(x). Non-decreasing.
std::vector<std::uint16_t> pointwise_bins(double rel, std::uint32_t max_value);

// Bytes a sample takes in a pixel chunk: one when max_value <= 255, else two.
inline std::size_t sample_bytes(std::uint32_t max_value) { return max_value <= 255 ? 1 : 2; }

// Appends the samples to `out` as bytes, sample_bytes(max_value) each, little-endian.
void pack_samples(std::span<const std::uint16_t> samples, std::uint32_t max_value, std::vector<std::uint8_t>& out);
// The inverse of pack_samples into `out` (whose size gives the count). Throws CodecError when the
// byte count does not match or a sample exceeds max_value.
void unpack_samples(std::span<const std::uint8_t> bytes, std::uint32_t max_value, std::span<std::uint16_t> out);

}  // namespace tezip::codecs
