#pragma once
#include <cstddef>
#include <cstdint>

namespace tezip::codecs::interpolation {

// SZ3's interpolation in two dimensions, as PlaneTransform::Interpolation (open loop, on symbols)
// and the closed-loop quantizer of interpolated planes (codecs/quantize/linear_quantizer.hpp, on
// reconstructed pixels) share it: the order of the positions and each one's prediction.

// The prediction of the value at position p of a line of n values `step` apart from `line`, p an
// odd multiple of h: the cubic through the values at p -+ h and p -+ 3h, -1/16, 9/16, 9/16, -1/16,
// rounded; where p - 3h or p + 3h leaves the line the mean of p -+ h (rounded down); where p + h
// leaves it the value at p - h. In 64 bits: defined for any values, a damaged stream's too.
template <class T>
inline std::int64_t predict(const T* line, std::size_t p, std::size_t h, std::size_t n, std::ptrdiff_t step) {
  const std::int64_t a = line[std::ptrdiff_t(p - h) * step];
  if (p + h >= n) return a;
  const std::int64_t b = line[std::ptrdiff_t(p + h) * step];
  if (p < 3 * h || p + 3 * h >= n) return (a + b) >> 1;
  const std::int64_t c = line[std::ptrdiff_t(p - 3 * h) * step], d = line[std::ptrdiff_t(p + 3 * h) * step];
  return (9 * (a + b) - c - d + 8) >> 4;
}

// The levels, coarse to fine, over a width x height plane of `values`: position 0 first (its
// prediction 0), then for each h from half the smallest power of two covering both sides down to
// 1, the positions of rows that are multiples of 2h at odd multiples of h along the row, then the
// rows at odd multiples of h at every multiple of h along the column. visit(i, prediction) for
// each position i in that order, the prediction read from `values` at positions visited before
// (which the visit may have just written: an inverse, a closed-loop quantizer).
template <class T, class Visit>
void for_each_level(const T* values, std::size_t width, std::size_t height, Visit&& visit) {
  visit(std::size_t{0}, std::int64_t{0});
  std::size_t top = 1;
  while (top < width || top < height) top *= 2;
  for (std::size_t h = top / 2; h >= 1; h /= 2) {
    for (std::size_t y = 0; y < height; y += 2 * h) {
      const T* row = values + y * width;
      for (std::size_t x = h; x < width; x += 2 * h) visit(y * width + x, predict(row, x, h, width, 1));
    }
    for (std::size_t y = h; y < height; y += 2 * h)
      for (std::size_t x = 0; x < width; x += h) visit(y * width + x, predict(values + x, y, h, height, std::ptrdiff_t(width)));
  }
}

// The prediction at (x, y) as for_each_level makes it, on its own: the level of the position is
// the lowest set bit h of x | y, along the row where y is a multiple of 2h, else along the column.
template <class T>
inline std::int64_t predict_at(const T* values, std::size_t width, std::size_t height, std::size_t x, std::size_t y) {
  if (x == 0 && y == 0) return 0;
  const std::size_t h = (x | y) & (~(x | y) + 1);
  if ((y & h) == 0) return predict(values + y * width, x, h, width, 1);
  return predict(values + x, y, h, height, std::ptrdiff_t(width));
}

}  // namespace tezip::codecs::interpolation
