#include "codecs/quantize/error_bound.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace tezip::codecs {
namespace {

std::uint32_t floor_tolerance(double bound, std::uint32_t max_value) {
  if (!(bound >= 0)) return 0;  // NaN or negative: exact
  if (bound >= double(max_value)) return max_value;
  return static_cast<std::uint32_t>(std::floor(bound));
}

}  // namespace

std::uint32_t ErrorBound::tolerance(std::uint32_t lo, std::uint32_t hi, std::uint32_t max_value) const {
  const double range = hi >= lo ? double(hi - lo) : 0.0;
  switch (mode) {
    case BoundMode::Lossless: return 0;
    case BoundMode::Abs: return floor_tolerance(abs, max_value);
    case BoundMode::Rel: return floor_tolerance(rel * range, max_value);
    case BoundMode::AbsRel: return std::min(floor_tolerance(abs, max_value), floor_tolerance(rel * range, max_value));
    case BoundMode::PwRel: return 0;  // pointwise: see pointwise_tolerance
  }
  return 0;
}

bool ErrorBound::allows(std::uint32_t x, std::uint32_t y, std::uint32_t lo, std::uint32_t hi) const {
  const double err = std::fabs(double(y) - double(x));
  const double range = hi >= lo ? double(hi - lo) : 0.0;
  switch (mode) {
    case BoundMode::Lossless: return err == 0;
    case BoundMode::Abs: return err <= abs;
    case BoundMode::Rel: return err <= rel * range;
    case BoundMode::AbsRel: return err <= abs && err <= rel * range;
    case BoundMode::PwRel: return err <= rel * double(x);
  }
  return false;
}

std::uint32_t pointwise_tolerance(double rel, std::uint32_t x) {
  return floor_tolerance(rel * double(x), x);
}

BoundMode parse_bound_mode(const std::string& name) {
  if (name == "lossless") return BoundMode::Lossless;
  if (name == "abs") return BoundMode::Abs;
  if (name == "rel") return BoundMode::Rel;
  if (name == "absrel") return BoundMode::AbsRel;
  if (name == "pwrel") return BoundMode::PwRel;
  throw std::invalid_argument("unknown error mode '" + name + "' (lossless, abs, rel, absrel, pwrel)");
}

std::string to_string(BoundMode mode) {
  switch (mode) {
    case BoundMode::Lossless: return "lossless";
    case BoundMode::Abs: return "abs";
    case BoundMode::Rel: return "rel";
    case BoundMode::AbsRel: return "absrel";
    case BoundMode::PwRel: return "pwrel";
  }
  return "unknown";
}

std::string describe(const ErrorBound& bound) {
  std::ostringstream out;
  out << to_string(bound.mode);
  switch (bound.mode) {
    case BoundMode::Lossless: break;
    case BoundMode::Abs: out << ' ' << bound.abs; break;
    case BoundMode::Rel:
    case BoundMode::PwRel: out << ' ' << bound.rel; break;
    case BoundMode::AbsRel: out << ' ' << bound.abs << ',' << bound.rel; break;
  }
  return out.str();
}

}  // namespace tezip::codecs
