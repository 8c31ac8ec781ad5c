#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "codecs/quantize/linear_quantizer.hpp"
#include "codecs/transform/plane_transform.hpp"
#include "codecs/simd.hpp"

namespace tezip::codecs {

// A reversible colour transform on the three symbol planes of a colour frame (residual bins or
// exact residuals), recorded per frame in one byte and chosen from the data (the encoder takes one
// order per GOP and each frame's best references in it: docs/colour.md): the planes are coded
// in `order`; the second as it is or minus the first; the third as it is, minus the first, minus the
// second, or minus the floor of their mean. Integer and exact, so lossless on bin indices: the
// error bound still holds per channel as quantized. This family holds FFV1's and JPEG XL's simple
// RCTs ("subtract green" is order G first, the others minus it); YCoCg-R, which needs all three
// planes before any channel, lost to it on every colour sequence measured (docs/colour.md).
enum class ChannelRef : std::uint8_t { None = 0, First = 1, Second = 2, Mean = 3 };

struct ChannelPlan {
  std::array<std::uint8_t, 3> order{0, 1, 2};  // the storage channel at each coding position
  ChannelRef second = ChannelRef::None;        // None or First
  ChannelRef third = ChannelRef::None;         // any

  // Bits 0-2: the permutation's index (0 = 0,1,2 ... 5 = 2,1,0, lexicographic); bit 3: `second`;
  // bits 4-5: `third`; bits 6-7: zero.
  std::uint8_t byte() const;
  static ChannelPlan from_byte(std::uint8_t b);  // throws CodecError on bits no plan has
  // Channel deltas of chunk versions 3-5: channel c coded minus channel c - 1, storage order.
  static ChannelPlan from_legacy_deltas(bool second_minus_first, bool third_minus_second);

  ChannelRef ref(std::size_t position) const { return position == 0 ? ChannelRef::None : position == 1 ? second : third; }
  // Whether a plane coded after `position` is coded against the plane there.
  bool referenced(std::size_t position) const;
  std::size_t position(std::size_t channel) const;
  // Any plane coded against another, or out of storage order.
  bool relates_planes() const { return order != std::array<std::uint8_t, 3>{0, 1, 2} || second != ChannelRef::None || third != ChannelRef::None; }
  bool operator==(const ChannelPlan&) const = default;
};

// out[i] = plane[i] - reference(i) (forward) or plane[i] + reference(i) (inverse), wrapping, where
// reference is the plane at the first or second coding position, or the floor of their mean, as
// `ref` says (the first and second as coded before any reference: storage values). `first` and
// `second` are read only where `ref` needs them; `out` may be `plane`.
void apply_channel_ref(ChannelRef ref, std::span<const std::int32_t> plane, std::span<const std::int32_t> first,
                       std::span<const std::int32_t> second, std::span<std::int32_t> out);
void undo_channel_ref(ChannelRef ref, std::span<const std::int32_t> plane, std::span<const std::int32_t> first,
                      std::span<const std::int32_t> second, std::span<std::int32_t> out);
// undo_channel_ref, and in the same pass each sum dequantized against its forecast as
// dequantize_plane does, for bounds where fused_dequantization holds (lossless, or uniform bins in
// 32 bits): `out` receives the sums (empty: no plane coded later needs them, and they are not
// stored), `pixels` the pixels. True when a lossless pixel left [0, max_value] (a damaged stream;
// the caller refuses the plane, and `pixels` then hold values that may differ between paths).
// `ref` is not None.
bool fused_dequantization(const PlaneBound& bound);
bool undo_channel_ref_dequantize(ChannelRef ref, std::span<const std::int32_t> plane, std::span<const std::int32_t> first,
                                 std::span<const std::int32_t> second, std::span<std::int32_t> out,
                                 std::span<const std::uint16_t> forecast, const PlaneBound& bound,
                                 std::span<std::uint16_t> pixels, SimdPath path = simd_path());

// What a plan is chosen by, for one frame: cost[k][r] is the estimate of plane k as it is (r = 3),
// minus plane r (r != k), or minus the floor of the mean of the other two (r = k), with the spatial
// transform that estimate chose (choose_transform; None and estimate_cost for `intra` planes, which
// are coded as they are). `own`: the estimates of the planes as they are, where the caller has
// them. `scratch` holds at least one plane. `smooth`: as choose_transform's.
struct ChannelCosts {
  std::array<std::array<TransformChoice, 4>, 3> cost{};
};
ChannelCosts estimate_channel_costs(std::array<std::span<const std::int32_t>, 3> planes, std::array<bool, 3> intra,
                                    std::size_t width, std::span<std::int32_t> scratch,
                                    const std::array<std::optional<TransformChoice>, 3>& own = {}, bool smooth = true);

// A plan's estimate for one frame, and the spatial transform of each coding position.
struct ChannelChoice {
  std::uint64_t cost = 0;
  std::array<PlaneTransform, 3> transform{};  // by coding position
};
ChannelChoice plan_cost(const ChannelCosts& frame, const ChannelPlan& plan);

// The references that make one frame's estimate smallest with its planes in `order` (ties keep
// fewer references, then the nearer).
ChannelPlan choose_channel_refs(const ChannelCosts& frame, const std::array<std::uint8_t, 3>& order);

// The order whose estimates, each frame with its own best references, sum to the least over
// `frames` (ties keep the earlier, storage order first): one order for the frames whose symbols
// share the entropy coder's tables (a table per coding position), so that each position holds one
// channel's planes. Measured on five colour sequences (docs/colour.md): an order per frame gave
// the same sizes within 0.15%; one plan for all frames (references too) lost 5.6% on a film clip.
std::array<std::uint8_t, 3> choose_channel_order(std::span<const ChannelCosts> frames);

}  // namespace tezip::codecs
