#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace tezip::cli {

// A one-line progress bar on stderr, drawn only when stderr is a terminal and not silenced.
class ProgressBar {
 public:
  ProgressBar(std::string label, bool enabled);
  ~ProgressBar();
  void update(std::uint64_t done, std::uint64_t total);

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace tezip::cli
