#pragma once
#include <cstdint>
#include <filesystem>
#include <span>

namespace tezip {

// Writes `bytes` to a temporary file beside `path`, checking every write and the close (a full disk
// shows up there), then renames it over `path`. On failure nothing is left and OutputError names `path`.
void write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

}  // namespace tezip
