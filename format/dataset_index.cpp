#include "format/dataset_index.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "format/errors.hpp"
#include "io/temporary_files.hpp"

namespace tezip {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

constexpr const char* kFormatName = "tezip-dataset";
constexpr int kFormatVersion = 1;
// An index lists shards, not pixels: anything this large is not one of ours.
constexpr std::uintmax_t kMaxIndexBytes = std::uintmax_t(1) << 30;

// 64-bit checksums are written as 16 hex digits: JSON numbers above 2^53 lose digits in many readers.
std::string hex64(std::uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

std::uint64_t parse_hex64(const std::string& text, const std::string& where) {
  if (text.size() != 16 || text.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    throw DataError(where + ": 'xxh64' must be 16 hex digits, not '" + text + "'");
  return std::stoull(text, nullptr, 16);
}

// A relative path that stays inside the index's folder: a hostile index must not name /etc/passwd.
void check_relative(const std::string& path, const std::string& where) {
  const fs::path p(path);
  if (path.empty() || p.is_absolute() || p.has_root_name())
    throw DataError(where + ": shard path '" + path + "' must be relative to the index's folder");
  for (const auto& part : p)
    if (part == "..") throw DataError(where + ": shard path '" + path + "' leaves the index's folder");
}

json to_json(const DatasetIndex& index) {
  json shards = json::array();
  for (const auto& s : index.shards)
    shards.push_back({{"path", s.path},
                      {"size", s.size},
                      {"xxh64", hex64(s.hash)},
                      {"frames", s.frames},
                      {"raw_bytes", s.raw_bytes},
                      {"sequences", s.sequences}});
  std::uint64_t frames = 0, raw = 0, bytes = 0, sequences = 0;
  for (const auto& s : index.shards) {
    frames += s.frames;
    raw += s.raw_bytes;
    bytes += s.size;
    sequences += s.sequences.size();
  }
  // The totals are for people and scripts reading the file; readers recompute them from the shards.
  json doc = {{"format", kFormatName},
              {"version", kFormatVersion},
              {"totals", {{"shards", index.shards.size()}, {"sequences", sequences}, {"frames", frames},
                          {"raw_bytes", raw}, {"size", bytes}}},
              {"shards", shards}};
  if (index.model)
    doc["model"] = {{"path", index.model->path},
                    {"size", index.model->size},
                    {"xxh64", hex64(index.model->hash)},
                    {"weights_sha256", index.model->weights_sha256}};
  return doc;
}

// The model is a plain file name: the shards look for it beside themselves.
void check_model_entry(const ModelEntry& model, const std::string& where) {
  const fs::path p(model.path);
  if (model.path.empty() || p.has_parent_path() || p.filename() != p || model.path == "." || model.path == ".." ||
      p.extension() != ".tzm")
    throw DataError(where + ": model path '" + model.path + "' must be a .tzm file name in the index's folder");
  if (model.weights_sha256.size() != 64 || model.weights_sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw DataError(where + ": model 'weights_sha256' must be 64 lowercase hex digits");
}

template <class T>
T field(const json& object, const char* name, const std::string& where) {
  const auto it = object.find(name);
  if (it == object.end()) throw DataError(where + ": missing '" + name + "'");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw DataError(where + ": '" + name + "' has the wrong type");
  }
}

}  // namespace

bool is_dataset_index(const fs::path& path) {
  // Only a regular file is opened: a FIFO would block the open, a device would feed it forever.
  // What is not one is refused by name when opened as an archive.
  std::error_code ec;
  if (!fs::is_regular_file(fs::status(path, ec))) return false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  char c = 0;
  // JSON may start with a byte-order mark or white space; an archive starts with its magic.
  for (int i = 0; i < 64 && in.get(c); ++i) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (i == 0 && static_cast<unsigned char>(c) == 0xEF) {
      char bom[2];
      if (!in.read(bom, 2) || static_cast<unsigned char>(bom[0]) != 0xBB || static_cast<unsigned char>(bom[1]) != 0xBF)
        return false;
      continue;
    }
    return c == '{';
  }
  return false;
}

bool looks_like_dataset_index(const fs::path& path) {
  if (!is_dataset_index(path)) return false;
  std::error_code ec;
  if (fs::file_size(path, ec) > kMaxIndexBytes || ec) return false;
  std::ifstream in(path, std::ios::binary);
  const json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded()) return false;
  if (!doc.is_object()) return false;
  const auto it = doc.find("format");
  return it != doc.end() && it->is_string() && it->get<std::string>() == kFormatName;
}

DatasetIndex read_dataset_index(const fs::path& path) {
  const std::string file = path.string();
  std::error_code ec;
  const auto bytes = fs::file_size(path, ec);
  if (ec) throw InputError(file + ": cannot open: " + ec.message());
  if (bytes > kMaxIndexBytes) throw DataError(file + ": too large for a dataset index");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(file + ": cannot open: " + std::strerror(errno));
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::parse_error& e) {
    throw DataError(file + ": not a valid dataset index (JSON: " + e.what() + ")");
  }
  if (!doc.is_object()) throw DataError(file + ": not a dataset index (expected a JSON object)");
  if (field<std::string>(doc, "format", file) != kFormatName)
    throw DataError(file + ": not a tezip dataset index ('format' is not '" + kFormatName + "')");
  const int version = field<int>(doc, "version", file);
  if (version != kFormatVersion)
    throw DataError(file + ": dataset index version " + std::to_string(version) + " is not supported (this tezip reads " +
                    std::to_string(kFormatVersion) + ")");
  const auto shards = doc.find("shards");
  if (shards == doc.end() || !shards->is_array()) throw DataError(file + ": missing 'shards' array");
  DatasetIndex index;
  std::set<std::string> paths, names;
  for (std::size_t i = 0; i < shards->size(); ++i) {
    const auto& s = (*shards)[i];
    const std::string where = file + ": shard " + std::to_string(i);
    if (!s.is_object()) throw DataError(where + ": expected an object");
    ShardEntry entry;
    entry.path = field<std::string>(s, "path", where);
    check_relative(entry.path, where);
    if (!paths.insert(fs::path(entry.path).lexically_normal().string()).second)
      throw DataError(where + ": shard '" + entry.path + "' is listed twice");
    entry.size = field<std::uint64_t>(s, "size", where);
    entry.hash = parse_hex64(field<std::string>(s, "xxh64", where), where);
    entry.frames = field<std::uint64_t>(s, "frames", where);
    entry.raw_bytes = field<std::uint64_t>(s, "raw_bytes", where);
    entry.sequences = field<std::vector<std::string>>(s, "sequences", where);
    for (const auto& name : entry.sequences)
      if (!names.insert(name).second) throw DataError(where + ": sequence '" + name + "' is listed twice");
    index.shards.push_back(std::move(entry));
  }
  if (const auto model = doc.find("model"); model != doc.end()) {
    const std::string where = file + ": model";
    if (!model->is_object()) throw DataError(where + ": expected an object");
    ModelEntry entry;
    entry.path = field<std::string>(*model, "path", where);
    entry.size = field<std::uint64_t>(*model, "size", where);
    entry.hash = parse_hex64(field<std::string>(*model, "xxh64", where), where);
    entry.weights_sha256 = field<std::string>(*model, "weights_sha256", where);
    check_model_entry(entry, file);
    index.model = std::move(entry);
  }
  return index;
}

void write_dataset_index(const fs::path& path, const DatasetIndex& index) {
  // The reader's rules, so that no index is written that tezip would refuse to read.
  std::set<std::string> paths, names;
  for (const auto& s : index.shards) {
    check_relative(s.path, path.string());
    if (!paths.insert(fs::path(s.path).lexically_normal().string()).second)
      throw DataError(path.string() + ": shard '" + s.path + "' is listed twice");
    for (const auto& name : s.sequences)
      if (!names.insert(name).second) throw DataError(path.string() + ": sequence '" + name + "' is listed twice");
  }
  if (index.model) check_model_entry(*index.model, path.string());
  const std::string text = to_json(index).dump(2) + "\n";
  const TemporaryPath guard(temporary_name_beside(path));
  const fs::path& temporary = guard.path();
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw OutputError(path.string() + ": cannot create: " + std::strerror(errno));
  const char* data = text.data();
  std::size_t left = text.size();
  bool ok = true;
  while (left > 0 && ok) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) data += n, left -= std::size_t(n);
  }
  const std::string why = ok ? "" : std::strerror(errno);
  ok = ok && ::fsync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok) {
    ::unlink(temporary.c_str());
    throw OutputError(path.string() + ": write failed: " + (why.empty() ? std::strerror(errno) : why));
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temporary.c_str());
    throw OutputError(path.string() + ": cannot rename into place: " + reason);
  }
}

std::vector<fs::path> archive_paths(const fs::path& input) {
  if (!is_dataset_index(input)) return {input};
  const auto index = read_dataset_index(input);
  const auto dir = fs::absolute(input).parent_path();
  std::vector<fs::path> out;
  for (const auto& s : index.shards) out.push_back((dir / s.path).lexically_normal());
  return out;
}

std::uint64_t hash_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open");
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(), &XXH64_freeState);
  if (!state) throw std::bad_alloc();
  XXH64_reset(state.get(), 0);
  std::vector<char> block(std::size_t(1) << 20);
  while (in) {
    in.read(block.data(), std::streamsize(block.size()));
    if (in.gcount() > 0) XXH64_update(state.get(), block.data(), std::size_t(in.gcount()));
  }
  if (in.bad()) throw InputError(path.string() + ": read failed");
  return XXH64_digest(state.get());
}

}  // namespace tezip
