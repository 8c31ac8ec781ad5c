#pragma once
#include <cstdint>
#include <filesystem>
#include <span>

namespace tezip {

// Writes `bytes` to a temporary file beside `path`, checking every write and the close (a full disk
// shows up there), then renames it over `path`. On failure nothing is left and OutputError names `path`.
// The temporary file is registered for removal on an interrupt (io/temporary_files.hpp)
// before anything is created, `path`'s folder too when `create_folder` asks for it.
void write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes, bool create_folder = false);

}  // namespace tezip
