#pragma once
// A fresh folder under the system temp dir, removed with everything in it when the test ends.
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <system_error>

namespace tezip::test {

class TempDir {
 public:
  explicit TempDir(const std::string& tag = "tezip-test") {
    std::random_device random;
    path_ = std::filesystem::temp_directory_path() /
            (tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(random()) + std::to_string(random()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::filesystem::path& child) const { return path_ / child; }

 private:
  std::filesystem::path path_;
};

}  // namespace tezip::test
