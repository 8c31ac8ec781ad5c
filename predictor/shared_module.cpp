#include "predictor/shared_module.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace tezip {

std::filesystem::path core_library_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&core_library_folder), &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code ec;
  const auto path = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? std::filesystem::path{} : path.parent_path();
}

const void* load_shared_module(const char* file, const char* env, const char* entry, const char* abi,
                               const std::string& purpose, std::string& error, bool global) {
  std::filesystem::path path;
  if (const char* value = std::getenv(env); value != nullptr && *value != '\0') {
    path = value;
  } else {
    path = core_library_folder() / file;
  }
  const std::string where = path.string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    error = purpose + " needs tezip's module " + where + ", which is not there (this tezip was built or installed " +
            "without it); set $" + env + " to its path if it is elsewhere";
    return nullptr;
  }
  // RTLD_LOCAL: the module's libraries stay out of the global namespace, beside whatever the host has.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
  if (handle == nullptr) {
    const char* why = ::dlerror();
    error = purpose + ": cannot load tezip's module " + where + ": " + (why ? why : "unknown error");
    return nullptr;
  }
  using Entry = const void* (*)();
  const auto function = reinterpret_cast<Entry>(::dlsym(handle, entry));
  if (function == nullptr) {
    error = where + " is not tezip's module (no " + entry + ")";
    return nullptr;
  }
  const void* table = function();
  const char* const* module_abi = static_cast<const char* const*>(table);
  if (table == nullptr || *module_abi == nullptr || std::strcmp(*module_abi, abi) != 0) {
    error = where + " is from another build of tezip (" + (table && *module_abi ? *module_abi : "?") + "; this one is " + abi + ")";
    return nullptr;
  }
  return table;
}

}  // namespace tezip
