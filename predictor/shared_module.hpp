#pragma once
// tezip's optional parts that bring heavy libraries live in shared modules beside libtezip and are
// loaded with dlopen() on first use, so that a process which never needs them never maps those
// libraries: libtezip_learned.so (training and float32 PredNet, libtorch; predictor/learned/module_table.hpp) and
// libtezip_images.so (image files and video, OpenCV; io/image_codec.hpp).
#include <filesystem>
#include <string>

namespace tezip {

// The folder libtezip was loaded from (empty when unknown).
std::filesystem::path core_library_folder();

// A module's exported table: `entry` names a function returning a pointer to a struct whose first
// member is `const char* abi`, which must equal `abi` (modules are built with the core they serve).
// Loads `file` from $`env` when set, else from core_library_folder(). Returns the table, or nullptr
// with `error` saying what is missing and what needs it (`purpose`). Not cached: callers keep the
// result (dlopen of a loaded module is cheap and returns the same handle). The module's libraries
// stay out of the global namespace (RTLD_LOCAL) unless `global`.
const void* load_shared_module(const char* file, const char* env, const char* entry, const char* abi,
                               const std::string& purpose, std::string& error, bool global = false);

}  // namespace tezip
