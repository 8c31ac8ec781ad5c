#pragma once
#include <cstdint>
#include <string>

namespace tezip::codecs {

// The user's promise about every reconstructed pixel y of an original pixel x (DESIGN.md §5).
enum class BoundMode : std::uint8_t { Lossless = 0, Abs = 1, Rel = 2, AbsRel = 3, PwRel = 4 };

struct ErrorBound {
  BoundMode mode = BoundMode::Lossless;
  double abs = 0;  // Abs, AbsRel: |y - x| <= abs
  double rel = 0;  // Rel, AbsRel: |y - x| <= rel * (max - min) of the frame's channel; PwRel: <= rel * |x|

  bool pointwise() const { return mode == BoundMode::PwRel; }
  // Whether tolerance() depends on the channel's span (rel, absrel), so that lo and hi are needed.
  bool spans() const { return mode == BoundMode::Rel || mode == BoundMode::AbsRel; }
  // Largest integer error allowed on a channel whose pixels span [lo, hi] (uniform modes only).
  // On integer data a real bound E allows floor(E): 2.5 allows 2.
  std::uint32_t tolerance(std::uint32_t lo, std::uint32_t hi, std::uint32_t max_value) const;
  // Whether |y - x| is allowed for pixel x on a channel spanning [lo, hi]; the check `verify` uses.
  bool allows(std::uint32_t x, std::uint32_t y, std::uint32_t lo, std::uint32_t hi) const;
};

// Largest integer error PwRel allows at x: floor(rel * x), so a zero pixel stays exact.
std::uint32_t pointwise_tolerance(double rel, std::uint32_t x);

BoundMode parse_bound_mode(const std::string& name);  // throws std::invalid_argument
std::string to_string(BoundMode mode);
std::string describe(const ErrorBound& bound);  // "abs 2", "absrel 2,0.01", "lossless"

}  // namespace tezip::codecs
