#pragma once
// Everything under a folder (each entry's kind, and each file's bytes), to check that a command
// left a user's files exactly as they were.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <system_error>

namespace tezip::test {

using TreeSnapshot = std::map<std::string, std::string>;  // relative path -> "dir", "link:TARGET" or "file:BYTES"

inline TreeSnapshot snapshot_tree(const std::filesystem::path& root) {
  TreeSnapshot out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec); !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    const auto rel = it->path().lexically_relative(root).generic_string();
    const auto st = it->symlink_status();
    if (std::filesystem::is_symlink(st)) {
      out[rel] = "link:" + std::filesystem::read_symlink(it->path(), ec).string();
    } else if (std::filesystem::is_directory(st)) {
      out[rel] = "dir";
    } else if (std::filesystem::is_regular_file(st)) {
      std::ifstream in(it->path(), std::ios::binary);
      out[rel] = "file:" + std::string(std::istreambuf_iterator<char>(in), {});
    } else {
      out[rel] = "other";
    }
  }
  return out;
}

// Entries whose name shows a temporary file or folder of tezip's (".NAME.tmp-PID-N").
inline std::vector<std::string> temporaries_in(const TreeSnapshot& tree) {
  std::vector<std::string> out;
  for (const auto& [path, kind] : tree)
    if (path.find(".tmp-") != std::string::npos || path.find(".unverified") != std::string::npos) out.push_back(path);
  return out;
}

}  // namespace tezip::test
