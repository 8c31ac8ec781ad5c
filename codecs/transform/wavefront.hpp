#pragma once
// Row-by-row reconstruction through a median predictor (LOCO-I's MED on the left, upper and
// upper-left neighbours), several rows at once.
//
// out(y, x) = rec(med(out(y, x - 1), out(y - 1, x), out(y - 1, x - 1)), in(y, x)), with
// out(y, 0) = rec(out(y - 1, 0), in(y, 0)) and out(0, x) = rec(out(0, x - 1), in(0, x)) (0 left of
// the first). Each value waits on its left neighbour, so one row is a chain of dependent
// min/max/add steps (5-7 cycles a pixel). Row y + 1 needs only row y up to column x, so four rows
// advance together, each one column behind the row above: four independent chains, the same
// values in the same dependency order, so exactly the same results as one row at a time.
#include <cstddef>

namespace tezip::codecs {

// Runs: rec(p, 0) must be p (a zero residual keeps the prediction; true of every caller). A row
// of zero inputs under a row of one value v is then all v (med(v, v, v) = v), and so is the row
// below it: such rows are filled without the chain (sparse frames, Moving MNIST's black ground).
template <class In, class Out>
bool constant_rows(const In* in, std::size_t rows, const Out* up, std::size_t width) {
  // In chunks of 16 with an early exit: most rows that are not constant differ near their start.
  constexpr std::size_t kChunk = 16;
  const Out v = up[0];
  std::size_t x = 0;
  for (; x + kChunk <= width; x += kChunk) {
    bool same = true;
    for (std::size_t j = 0; j < kChunk; ++j) same &= up[x + j] == v;
    if (!same) return false;
  }
  for (; x < width; ++x)
    if (up[x] != v) return false;
  const std::size_t n = rows * width;
  std::size_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    In any = 0;
    for (std::size_t j = 0; j < kChunk; ++j) any |= in[i + j];
    if (any != 0) return false;
  }
  for (; i < n; ++i)
    if (in[i] != 0) return false;
  return true;
}

// Value: the arithmetic type of predictions (what rec returns and med takes); In, Out: the element
// types of `in` and `out` (`in` may be `out`: each element is read just before it is written).
// Rows [y_begin, y_end) of the plane; rows above y_begin are already reconstructed (the decoder
// reconstructs a plane a few rows at a time while they are in cache).
template <class Value, class In, class Out, class Med, class Rec>
void median_rows(const In* in, Out* out, std::size_t width, std::size_t y_begin, std::size_t y_end, Med med, Rec rec) {
  if (y_begin >= y_end || width == 0) return;
  std::size_t y = y_begin;
  if (y == 0) {
    Value left = 0;
    for (std::size_t x = 0; x < width; ++x) left = out[x] = Out(rec(left, in[x]));
    y = 1;
  }
  constexpr int kRows = 4;
  if (width >= 2 * kRows) {
    for (; y + kRows <= y_end; y += kRows) {
      const Out* up = out + (y - 1) * width;
      if (constant_rows(in + y * width, kRows, up, width)) {
        const Out v = up[0];
        for (std::size_t i = 0; i < kRows * width; ++i) out[y * width + i] = v;
        continue;
      }
      const In* q[kRows];
      Out* r[kRows];
      Value prev[kRows] = {}, prev2[kRows] = {};  // each row's last two outputs
      for (int k = 0; k < kRows; ++k) {
        q[k] = in + (y + k) * width;
        r[k] = out + (y + k) * width;
      }
      // Row k at step i computes column i - k: its upper neighbours are row k - 1's outputs of
      // steps i - 1 and i - 2 (rows are visited from the last, so those are still in prev, prev2).
      const auto cell = [&](int k, std::size_t x) {
        Value v;
        if (x == 0) {
          v = Value(rec(k == 0 ? Value(up[0]) : prev[k - 1], q[k][0]));
        } else {
          const Value b = k == 0 ? Value(up[x]) : prev[k - 1];
          const Value c = k == 0 ? Value(up[x - 1]) : prev2[k - 1];
          v = Value(rec(med(prev[k], b, c), q[k][x]));
        }
        r[k][x] = Out(v);
        prev2[k] = prev[k];
        prev[k] = v;
      };
      for (std::size_t i = 0; i < kRows; ++i)
        for (int k = kRows - 1; k >= 0; --k)
          if (i >= std::size_t(k)) cell(k, i - k);
      for (std::size_t i = kRows; i < width; ++i) {
#pragma GCC unroll 4
        for (int k = kRows - 1; k >= 0; --k) cell(k, i - k);
      }
      for (std::size_t i = width; i < width + kRows - 1; ++i)
        for (int k = kRows - 1; k >= 0; --k)
          if (i - k < width) cell(k, i - k);
    }
  }
  for (; y < y_end; ++y) {
    const Out* up = out + (y - 1) * width;
    Out* row = out + y * width;
    const In* q = in + y * width;
    Value a = row[0] = Out(rec(Value(up[0]), q[0]));
    Value c = up[0];
    for (std::size_t x = 1; x < width; ++x) {
      const Value b = up[x];
      a = row[x] = Out(rec(med(a, b, c), q[x]));
      c = b;
    }
  }
}

}  // namespace tezip::codecs
