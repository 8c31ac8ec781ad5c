#pragma once
#include <stdexcept>
#include <string>

namespace tezip {

// An input the user gave cannot be used: missing, unreadable, unsupported, mixed sizes.
// The message names the file.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An archive (or model) is damaged or not ours: bad magic, checksum mismatch, absurd sizes.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Writing the output failed (full disk, permissions, existing file without --force).
struct OutputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace tezip
