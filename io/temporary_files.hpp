#pragma once
// The temporary files and folders tezip is writing, so that an interrupted run (SIGINT, SIGTERM,
// SIGHUP; see cli/interrupt_cleanup.hpp) removes them before it exits. This is process-wide state on
// purpose: a signal interrupts the process, not one object. `kill -9` cannot be caught; what it
// leaves is named in the README ("Reliability") and a rerun ignores or replaces it.
#include <cstdint>
#include <filesystem>

namespace tezip {

// Registers `path` (a file or a folder, which need not exist yet) while it lives. The owner still
// removes the path or renames it into place; call release() once it is renamed.
class TemporaryPath {
 public:
  TemporaryPath() = default;
  explicit TemporaryPath(std::filesystem::path path);
  ~TemporaryPath();
  TemporaryPath(TemporaryPath&& other) noexcept;
  TemporaryPath& operator=(TemporaryPath&& other) noexcept;
  TemporaryPath(const TemporaryPath&) = delete;
  TemporaryPath& operator=(const TemporaryPath&) = delete;

  const std::filesystem::path& path() const { return path_; }
  void release();

 private:
  std::filesystem::path path_;
  std::uint64_t id_ = 0;  // 0: not registered
};

// A hidden temporary name beside `target` for tezip's output: ".NAME.tmp-PID-RANDOM" (plus `suffix`).
std::filesystem::path temporary_name_beside(const std::filesystem::path& target, const char* suffix = "");

// Removes every registered path (a folder with all it holds), then ends the process with `status`
// through _exit: no destructor runs that could write more. Registrations made meanwhile wait
// forever, so nothing new appears. Called by the CLI's signal thread, never by a signal handler.
[[noreturn]] void remove_temporary_paths_and_exit(int status);

// The paths registered now, for tests.
std::size_t registered_temporary_paths();

}  // namespace tezip
