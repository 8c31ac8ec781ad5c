#pragma once
#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>

namespace tezip::codecs {

// The separable polyphase layout of a plane of `width` columns: its even rows (0, 2, 4, ...), then
// its odd rows; within each row its even columns, then its odd ones. So the quarter of the plane
// at even rows and columns becomes an image of its own in the top-left corner, and the other three
// phases the other corners. Decoded colour video was stored with chroma at half resolution: in its
// reversible colour transform's chroma planes every 2 x 2 block holds one value (92-100% of the
// pixels of the colour clips measured), where the median predictor leaves exact zeros on three
// pixels of four and the pixel at even row and column is the median prediction of the half-size
// plane. In raster order those zeros sit among the residuals that carry the plane, and the coder's
// contexts (the neighbours' residuals) see zeros around every one of them; in this layout the
// residuals that carry the plane have each other as neighbours, and the zeros a corner of their own.
template <class T>
void to_polyphase(std::span<const T> in, std::size_t width, std::span<T> out) {
  if (width == 0 || in.size() % width != 0 || out.size() != in.size())
    throw std::invalid_argument("to_polyphase: not whole rows");
  const std::size_t height = in.size() / width, even_rows = (height + 1) / 2, even_cols = (width + 1) / 2;
  for (std::size_t y = 0; y < height; ++y) {
    const T* row = in.data() + y * width;
    T* to = out.data() + ((y % 2) ? even_rows + y / 2 : y / 2) * width;
    for (std::size_t x = 0; x < even_cols; ++x) to[x] = row[2 * x];
    for (std::size_t x = 0; x < width / 2; ++x) to[even_cols + x] = row[2 * x + 1];
  }
}

// The inverse of to_polyphase.
template <class T>
void from_polyphase(std::span<const T> in, std::size_t width, std::span<T> out) {
  if (width == 0 || in.size() % width != 0 || out.size() != in.size())
    throw std::invalid_argument("from_polyphase: not whole rows");
  const std::size_t height = in.size() / width, even_rows = (height + 1) / 2, even_cols = (width + 1) / 2;
  for (std::size_t y = 0; y < height; ++y) {
    const T* from = in.data() + ((y % 2) ? even_rows + y / 2 : y / 2) * width;
    T* row = out.data() + y * width;
    for (std::size_t x = 0; x < even_cols; ++x) row[2 * x] = from[x];
    for (std::size_t x = 0; x < width / 2; ++x) row[2 * x + 1] = from[even_cols + x];
  }
}

}  // namespace tezip::codecs
