#include "io/temporary_files.hpp"

#include <unistd.h>

#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <system_error>
#include <thread>

namespace fs = std::filesystem;

namespace tezip {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::uint64_t, fs::path> paths;
  std::uint64_t next = 1;
};

// Never destroyed: the signal thread may still use it while static destructors run.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

TemporaryPath::TemporaryPath(fs::path path) : path_(std::move(path)) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  id_ = r.next++;
  r.paths.emplace(id_, path_);
}

TemporaryPath::~TemporaryPath() { release(); }

TemporaryPath::TemporaryPath(TemporaryPath&& other) noexcept : path_(std::move(other.path_)), id_(other.id_) { other.id_ = 0; }

TemporaryPath& TemporaryPath::operator=(TemporaryPath&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}

void TemporaryPath::release() {
  if (id_ == 0) return;
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  r.paths.erase(id_);
  id_ = 0;
}

fs::path temporary_name_beside(const fs::path& target, const char* suffix) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  const auto dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string name = ".";
  name.append(target.filename().string()).append(suffix).append(".tmp-").append(std::to_string(::getpid()));
  name.append("-").append(std::to_string(random() & 0xffffff));
  return dir / name;
}

void remove_temporary_paths_and_exit(int status) {
  auto& r = registry();
  r.mutex.lock();  // held until _exit: no new temporary path can be registered, so none is created
  // Worker threads may still be adding files to a staging folder while it is removed: repeat
  // until every path has stayed gone for two looks in a row (bounded, a few hundred ms at most).
  for (int calm = 0, tries = 0; calm < 2 && tries < 50; ++tries) {
    bool any = false;
    for (const auto& [id, path] : r.paths) {
      std::error_code ec;
      if (fs::symlink_status(path, ec).type() != fs::file_type::not_found) {
        any = true;
        fs::remove_all(path, ec);
      }
    }
    calm = any ? 0 : calm + 1;
    if (calm < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::_exit(status);
}

std::size_t registered_temporary_paths() {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  return r.paths.size();
}

}  // namespace tezip
