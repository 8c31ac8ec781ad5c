#include "cli/progress_bar.hpp"

#include <unistd.h>

#include <cstdio>

namespace tezip::cli {

ProgressBar::ProgressBar(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled && ::isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()), last_(start_) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
}

void ProgressBar::update(std::uint64_t done, std::uint64_t total) {
  if (!enabled_ || total == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  const double fraction = double(done) / double(total);
  const double seconds = std::chrono::duration<double>(now - start_).count();
  constexpr int kWidth = 30;
  const int filled = int(fraction * kWidth);
  std::string bar(std::size_t(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r%s [%s] %5.1f%%  %.1f MB/s", label_.c_str(), bar.c_str(), 100 * fraction,
               seconds > 0 ? double(done) / seconds / 1e6 : 0.0);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace tezip::cli
