#include "io/output_path.hpp"

#include <string>
#include <system_error>
#include <vector>

#include "format/errors.hpp"

namespace fs = std::filesystem;

namespace tezip {
namespace {

bool ends_with_separator(const fs::path& p) {
  const auto& s = p.native();
  return s.size() > 1 && s.back() == '/';
}

// `inner` is `outer` or lies below it, by path components (both resolved).
bool lexically_within(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // "/a/" style trailing element
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return fs::equivalent(a, b, ec) && !ec;
}

// `inner` or one of its existing ancestors is the same file as `outer` (identity, not spelling:
// hard links, bind mounts, case-folding file systems).
bool physically_within(const fs::path& inner, const fs::path& outer) {
  std::error_code ec;
  if (!fs::exists(outer, ec)) return false;
  for (fs::path p = inner;; p = p.parent_path()) {
    if (fs::exists(p, ec) && same_file(p, outer)) return true;
    if (p == p.parent_path()) return false;
  }
}

bool within(const fs::path& inner, const fs::path& outer) {
  return lexically_within(inner, outer) || physically_within(inner, outer);
}

fs::file_status link_status(const fs::path& p) {
  std::error_code ec;
  return fs::symlink_status(p, ec);
}

}  // namespace

fs::path resolved_path(const fs::path& path) {
  if (path.empty()) throw OutputError("the output path is empty");
  try {
    std::string text = fs::absolute(path).native();
    while (text.size() > 1 && text.back() == '/') text.pop_back();
    const fs::path absolute(text);
    const fs::path last = absolute.filename();
    if (absolute == absolute.root_path() || last == "." || last == "..") return fs::weakly_canonical(absolute);
    return fs::weakly_canonical(absolute.parent_path()) / last;
  } catch (const fs::filesystem_error& e) {
    throw OutputError(path.string() + ": cannot resolve the path: " + e.code().message());
  }
}

void check_output_apart(const fs::path& output, std::span<const fs::path> inputs) {
  const fs::path out = resolved_path(output);
  for (const auto& input : inputs) {
    fs::path in;
    try {
      in = resolved_path(input);
    } catch (const OutputError&) {
      continue;  // an input that cannot be resolved is reported when it is opened
    }
    // The input itself, when a symbolic link, and what it points to are both the input.
    std::error_code ec;
    const fs::path target = fs::weakly_canonical(in, ec);
    for (const fs::path& i : {in, ec ? in : target}) {
      if (lexically_within(out, i) && lexically_within(i, out))
        throw OutputError(output.string() + ": is the input " + input.string() + "; choose another output");
      if (same_file(out, i)) throw OutputError(output.string() + ": is the input " + input.string() + "; choose another output");
      if (within(i, out))
        throw OutputError(output.string() + ": holds the input " + input.string() + "; choose an output outside it");
      if (within(out, i))
        throw OutputError(output.string() + ": lies inside the input " + input.string() + "; choose an output outside it");
    }
  }
}

void check_folder_output(const fs::path& output, bool overwrite) {
  const fs::path out = resolved_path(output);
  const auto st = link_status(out);
  if (!fs::exists(st)) return;
  // Before "already exists": -f would not help, so the user should not be sent to try it.
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (out == out.root_path()) throw OutputError(output.string() + ": is the root folder; tezip does not replace it");
  if (!ec && (within(fs::weakly_canonical(cwd, ec), out) || lexically_within(cwd, out)))
    throw OutputError(output.string() + ": is the current folder or holds it; replacing it would remove the folder you are in "
                      "(give a new folder, e.g. -o restored)");
  if (!fs::is_directory(st) && !fs::is_regular_file(st) && !fs::is_symlink(st))
    throw OutputError(output.string() + ": exists and is not a folder or a regular file; tezip does not replace it");
  if (!overwrite) throw OutputError(output.string() + ": already exists (use -f to overwrite)");
}

void check_file_output(const fs::path& output, bool overwrite) {
  if (ends_with_separator(output))
    throw OutputError(output.string() + ": names a folder (trailing slash); the output is a file");
  const fs::path out = resolved_path(output);
  const auto st = link_status(out);
  if (!fs::exists(st) && !fs::is_symlink(st)) return;
  if (fs::is_directory(st)) throw OutputError(output.string() + ": is a folder; the output is a file");
  if (!fs::is_regular_file(st) && !fs::is_symlink(st))
    throw OutputError(output.string() + ": exists and is not a regular file; tezip does not replace it");
  if (!overwrite) throw OutputError(output.string() + ": already exists (use -f to overwrite)");
}

}  // namespace tezip
