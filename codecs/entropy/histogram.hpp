#pragma once
// Histograms of streams that are mostly one or two values (residuals, a background): counted in
// four partial histograms, every fourth value into each, then summed, so that consecutive
// increments of one count do not wait on each other (rank_remap's symbols, the sparse chunk's
// background).
#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace tezip::codecs {

template <class Count>
class SplitHistogram {
 public:
  explicit SplitHistogram(std::size_t size) : size_(size), parts_(4 * size, 0) {}

  // Counts each of `values`; values past the last entry are counted in it.
  template <class Value>
  void add(std::span<const Value> values) {
    if (size_ == 0) return;
    const std::size_t last = size_ - 1;
    Count* h[4] = {parts_.data(), parts_.data() + size_, parts_.data() + 2 * size_, parts_.data() + 3 * size_};
    std::size_t i = 0;
    for (; i + 4 <= values.size(); i += 4)
      for (std::size_t k = 0; k < 4; ++k) ++h[k][std::min<std::size_t>(values[i + k], last)];
    for (; i < values.size(); ++i) ++h[0][std::min<std::size_t>(values[i], last)];
  }

  // The counts of every value added, by value.
  std::vector<Count> counts() const {
    std::vector<Count> out(parts_.begin(), parts_.begin() + std::ptrdiff_t(size_));
    for (std::size_t k = 1; k < 4; ++k)
      for (std::size_t s = 0; s < size_; ++s) out[s] += parts_[k * size_ + s];
    return out;
  }

 private:
  std::size_t size_;
  std::vector<Count> parts_;
};

}  // namespace tezip::codecs
