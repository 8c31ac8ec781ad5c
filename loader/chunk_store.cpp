#include "loader/chunk_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "format/archive.hpp"
#include "format/dataset_index.hpp"
#include "format/errors.hpp"
#include "io/temporary_files.hpp"

namespace tezip {
namespace fs = std::filesystem;
namespace {

constexpr const char* kManifest = "tezip-store.json";
constexpr const char* kFormat = "tezip-chunk-store";
constexpr int kVersion = 1;
constexpr std::uint64_t kHeaderBytes = 16, kFooterBytes = 32;  // docs/format.md

std::string errno_text() { return std::strerror(errno); }

std::string hex(std::uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

// A file descriptor closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

void read_exact(int fd, std::uint8_t* out, std::size_t n, std::uint64_t offset, const fs::path& path) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, out + done, n - done, off_t(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw InputError(path.string() + ": cannot read: " + (got < 0 ? errno_text() : "unexpected end of file"));
    done += std::size_t(got);
  }
}

void write_exact(int fd, const std::uint8_t* in, std::size_t n, std::uint64_t offset, const fs::path& path) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t put = ::pwrite(fd, in + done, n - done, off_t(offset + done));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) throw OutputError(path.string() + ": write failed: " + (put < 0 ? errno_text() : "no space"));
    done += std::size_t(put);
  }
}

void sync_folder(const fs::path& folder) {
  Fd fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0) ::fsync(fd.get());
}

// The parts of an archive that are not chunks: header, index and footer.
struct ArchiveFrame {
  std::uint64_t size = 0, index_offset = 0, index_hash = 0;
  std::vector<std::uint8_t> header, tail;  // tail: index and footer
};

ArchiveFrame read_frame(const fs::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw InputError(path.string() + ": cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) throw InputError(path.string() + ": not a regular file");
  ArchiveFrame f;
  f.size = std::uint64_t(st.st_size);
  if (f.size < kHeaderBytes + kFooterBytes) throw DataError(path.string() + ": too small to be a tezip archive");
  std::uint8_t footer[kFooterBytes];
  read_exact(fd.get(), footer, sizeof footer, f.size - kFooterBytes, path);
  std::memcpy(&f.index_offset, footer, 8);
  std::memcpy(&f.index_hash, footer + 16, 8);
  if (f.index_offset < kHeaderBytes || f.index_offset > f.size - kFooterBytes)
    throw DataError(path.string() + ": index location out of range");
  f.header.resize(kHeaderBytes);
  read_exact(fd.get(), f.header.data(), kHeaderBytes, 0, path);
  // A model embedded right after the header (version 3, and version 4 where the index says so):
  // the copy needs it from the start.
  if (f.header[8] >= 3) {
    const std::uint64_t model = ArchiveReader(path).index().model.size;
    f.header.resize(kHeaderBytes + model);
    read_exact(fd.get(), f.header.data(), f.header.size(), 0, path);
  }
  f.tail.resize(f.size - f.index_offset);
  read_exact(fd.get(), f.tail.data(), f.tail.size(), f.index_offset, path);
  return f;
}

std::string human(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", double(bytes) / 1e6);
  return bytes < 100000 ? std::to_string(bytes) + " bytes" : text;
}

}  // namespace

struct ChunkStore::State {
  struct Shard {
    fs::path source, mirror;
    std::uint64_t size = 0, index_hash = 0;
    std::size_t first_chunk = 0;
    std::unique_ptr<ArchiveReader> reader;  // of the mirror: reads and checks chunks
    Fd writer;
    bool dirty = false;
  };
  struct Chunk {
    std::size_t shard = 0, local = 0;
  };

  fs::path dir, source;
  Fd lock;  // the folder, flock()ed while the store is open: one process writes a store at a time
  ChunkStoreOptions options;
  std::vector<Shard> shards;
  std::vector<Chunk> chunks;
  std::string tag;

  std::mutex write_mutex;  // one writer at a time: stage, add, drop, commit
  mutable std::mutex mutex;
  std::vector<bool> held;
  std::uint64_t bytes_held = 0;
  mutable Traffic traffic;
  std::vector<Fd> sources;  // opened by stage(); chunks are read at the offsets of the (identical) index
  bool source_checked = false;  // the source's frames were read (and matched) in this process

  fs::path manifest() const { return dir / kManifest; }
  const ChunkEntry& entry(std::size_t c) const {
    const auto& ch = chunks.at(c);
    return shards[ch.shard].reader->index().chunks[ch.local];
  }
  std::uint64_t size_of(std::size_t c) const { return entry(c).size; }

  void write_manifest() {
    nlohmann::json shard_list = nlohmann::json::array();
    for (const auto& s : shards)
      shard_list.push_back({{"file", fs::relative(s.mirror, dir).string()}, {"source", s.source.string()}, {"size", s.size},
                            {"index_xxh64", hex(s.index_hash)}});
    std::vector<std::size_t> list;
    {
      std::lock_guard lock(mutex);
      for (std::size_t c = 0; c < held.size(); ++c)
        if (held[c]) list.push_back(c);
    }
    const nlohmann::json j = {{"format", kFormat}, {"version", kVersion}, {"source", source.string()}, {"tag", tag},
                              {"shards", shard_list}, {"held", list}};
    const std::string text = j.dump(1) + "\n";
    const TemporaryPath temporary(temporary_name_beside(manifest()));
    {
      Fd fd(::open(temporary.path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (fd.get() < 0) throw OutputError(manifest().string() + ": cannot create: " + errno_text());
      try {
        write_exact(fd.get(), reinterpret_cast<const std::uint8_t*>(text.data()), text.size(), 0, manifest());
        if (::fsync(fd.get()) != 0) throw OutputError(manifest().string() + ": sync failed: " + errno_text());
      } catch (...) {
        ::unlink(temporary.path().c_str());
        throw;
      }
    }
    if (::rename(temporary.path().c_str(), manifest().c_str()) != 0) {
      const std::string why = errno_text();
      ::unlink(temporary.path().c_str());
      throw OutputError(manifest().string() + ": cannot rename into place: " + why);
    }
    sync_folder(dir);
  }

  // A sparse copy of `source`'s frame at `mirror`: written under a temporary name, synced, renamed.
  void write_mirror(const Shard& s, const ArchiveFrame& frame) {
    const TemporaryPath temporary(temporary_name_beside(s.mirror));
    Fd fd(::open(temporary.path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0) throw OutputError(s.mirror.string() + ": cannot create: " + errno_text());
    try {
      write_exact(fd.get(), frame.header.data(), frame.header.size(), 0, s.mirror);
      write_exact(fd.get(), frame.tail.data(), frame.tail.size(), frame.index_offset, s.mirror);
      if (::fsync(fd.get()) != 0) throw OutputError(s.mirror.string() + ": sync failed: " + errno_text());
      if (::rename(temporary.path().c_str(), s.mirror.c_str()) != 0)
        throw OutputError(s.mirror.string() + ": cannot rename into place: " + errno_text());
    } catch (...) {
      ::unlink(temporary.path().c_str());
      throw;
    }
  }

  void open_shards() {
    chunks.clear();
    for (std::size_t i = 0; i < shards.size(); ++i) {
      auto& s = shards[i];
      s.reader = std::make_unique<ArchiveReader>(s.mirror);
      if (s.reader->file_size() != s.size)
        throw DataError(s.mirror.string() + ": the store's copy of " + s.source.string() + " has the wrong size");
      s.writer = Fd(::open(s.mirror.c_str(), O_WRONLY | O_CLOEXEC));
      if (s.writer.get() < 0) throw OutputError(s.mirror.string() + ": cannot open for writing: " + errno_text());
      s.first_chunk = chunks.size();
      for (std::size_t k = 0; k < s.reader->index().chunks.size(); ++k) chunks.push_back({i, k});
    }
    held.assign(chunks.size(), false);
  }

  void check_identity(const std::vector<fs::path>& paths, const std::vector<ArchiveFrame>& frames) const {
    const std::string why = dir.string() + " holds a chunk store of another dataset (" + source.string() +
                            "); remove it yourself or give another folder";
    if (paths.size() != shards.size()) throw InputError(why + ": it has " + std::to_string(shards.size()) + " shards, not " + std::to_string(paths.size()));
    for (std::size_t i = 0; i < paths.size(); ++i)
      if (frames[i].size != shards[i].size || frames[i].index_hash != shards[i].index_hash)
        throw InputError(why + ": " + paths[i].string() + " differs from its shard " + std::to_string(i));
  }

  void load_manifest() {
    std::ifstream in(manifest());
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
      if (j.at("format") != kFormat) throw std::runtime_error("not a chunk store manifest");
      if (j.at("version") != kVersion) throw std::runtime_error("manifest version " + j.at("version").dump() + " is not supported");
      source = j.at("source").get<std::string>();
      tag = j.at("tag").get<std::string>();
      for (const auto& s : j.at("shards")) {
        Shard shard;
        const fs::path file = s.at("file").get<std::string>();
        if (file.is_absolute() || file.lexically_normal().string().starts_with(".."))
          throw std::runtime_error("shard file outside the store");
        shard.mirror = dir / file;
        shard.source = s.at("source").get<std::string>();
        shard.size = s.at("size").get<std::uint64_t>();
        shard.index_hash = std::stoull(s.at("index_xxh64").get<std::string>(), nullptr, 16);
        shards.push_back(std::move(shard));
      }
    } catch (const std::exception& e) {
      throw DataError(manifest().string() + ": damaged chunk store manifest: " + e.what());
    }
    open_shards();
    std::vector<std::size_t> list;
    try {
      list = j.at("held").get<std::vector<std::size_t>>();
    } catch (const std::exception& e) {
      throw DataError(manifest().string() + ": damaged chunk store manifest: " + e.what());
    }
    for (const auto i : list) {
      if (i >= held.size()) throw DataError(manifest().string() + ": held chunk " + std::to_string(i) + " out of range");
      if (!held[i]) bytes_held += size_of(i);
      held[i] = true;
    }
  }

  void create(const fs::path& source_path) {
    source = fs::absolute(source_path).lexically_normal();
    const auto paths = archive_paths(source);
    std::vector<ArchiveFrame> frames;
    for (const auto& p : paths) {
      frames.push_back(read_frame(p));
      traffic.source_bytes += frames.back().header.size() + frames.back().tail.size();
    }
    std::error_code ec;
    fs::create_directories(dir / "shards", ec);
    if (ec) throw OutputError((dir / "shards").string() + ": cannot create: " + ec.message());
    if (lock.get() < 0) take_lock();
    for (std::size_t i = 0; i < paths.size(); ++i) {
      Shard s;
      s.source = paths[i];
      char name[32];
      std::snprintf(name, sizeof name, "%05zu.tzp", i);
      s.mirror = dir / "shards" / name;
      s.size = frames[i].size;
      s.index_hash = frames[i].index_hash;
      shards.push_back(std::move(s));
    }
    // The manifest first: from now on the folder is recognisably a store, and its shard files are ours.
    write_manifest();
    for (std::size_t i = 0; i < paths.size(); ++i) write_mirror(shards[i], frames[i]);
    sync_folder(dir / "shards");
    open_shards();
    source_checked = true;
  }

  void take_lock() {
    lock = Fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (lock.get() < 0) throw InputError(dir.string() + ": cannot open: " + errno_text());
    if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0)
      throw InputError(dir.string() + ": the chunk store is open in another process (or object); one process per store");
  }

  void open(const fs::path& directory, const fs::path* source_path) {
    dir = fs::absolute(directory).lexically_normal();
    std::error_code ec;
    const auto status = fs::status(dir, ec);
    if (fs::exists(status) && !fs::is_directory(status)) throw InputError(dir.string() + ": not a folder (a chunk store is a folder)");
    if (fs::exists(status)) take_lock();
    if (fs::exists(manifest())) {
      load_manifest();
      if (source_path) {
        const auto paths = archive_paths(*source_path);
        std::vector<ArchiveFrame> frames;
        for (const auto& p : paths) frames.push_back(read_frame(p));
        check_identity(paths, frames);
        std::lock_guard lock(mutex);
        for (const auto& f : frames) traffic.source_bytes += f.header.size() + f.tail.size();
        source_checked = true;
      }
      return;
    }
    if (fs::exists(status) && !fs::is_empty(dir, ec))
      throw InputError(dir.string() + ": not a tezip chunk store and not empty; give an empty or new folder (nothing in it was touched)");
    if (!source_path) throw InputError(dir.string() + ": no chunk store here (" + kManifest + " is missing)");
    create(*source_path);
  }

  void open_sources() {
    if (!sources.empty()) return;
    const auto paths = archive_paths(source);
    if (!source_checked) {
      std::vector<ArchiveFrame> frames;
      for (const auto& p : paths) frames.push_back(read_frame(p));
      check_identity(paths, frames);
      std::lock_guard lock(mutex);
      for (const auto& f : frames) traffic.source_bytes += f.header.size() + f.tail.size();
    }
    source_checked = true;
    for (const auto& p : paths) {
      sources.emplace_back(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
      if (sources.back().get() < 0) {
        sources.clear();
        throw InputError(p.string() + ": cannot open: " + errno_text());
      }
    }
  }

  std::vector<std::uint8_t> read_source(std::size_t c) const {
    const auto& e = entry(c);
    const auto& path = shards[chunks[c].shard].source;
    std::vector<std::uint8_t> bytes(e.size);
    read_exact(sources[chunks[c].shard].get(), bytes.data(), bytes.size(), e.offset, path);
    if (hash_bytes(bytes) != e.hash)
      throw DataError(path.string() + ": " + describe_chunk(c) + " checksum mismatch (the archive is damaged)");
    return bytes;
  }

  std::string describe_chunk(std::size_t c) const {
    const auto& s = shards[chunks[c].shard];
    const auto& e = entry(c);
    return "chunk " + std::to_string(c) + " (sequence '" + s.reader->index().sequences[e.sequence].name + "' frames " +
           std::to_string(e.first_frame) + "-" + std::to_string(e.first_frame + e.frame_count - 1) + " of shard " +
           std::to_string(chunks[c].shard) + " '" + s.source.filename().string() + "')";
  }

  void put(std::size_t c, std::span<const std::uint8_t> bytes) {
    const auto& e = entry(c);
    auto& s = shards[chunks[c].shard];
    write_exact(s.writer.get(), bytes.data(), bytes.size(), e.offset, s.mirror);
    s.dirty = true;
    std::lock_guard lock(mutex);
    if (!held[c]) bytes_held += e.size;
    held[c] = true;
  }

  void reserve(std::uint64_t more) const {
    std::lock_guard lock(mutex);
    if (bytes_held + more > options.capacity)
      throw StoreFull("chunk store " + dir.string() + ": holding " + human(bytes_held) + " and " + human(more) +
                      " more would pass its capacity of " + human(options.capacity));
  }
};

ChunkStore::ChunkStore(const fs::path& directory, const fs::path& source, const ChunkStoreOptions& options)
    : state_(std::make_unique<State>()) {
  state_->options = options;
  state_->open(directory, &source);
}

ChunkStore::ChunkStore(const fs::path& directory, const ChunkStoreOptions& options) : state_(std::make_unique<State>()) {
  state_->options = options;
  state_->open(directory, nullptr);
}

ChunkStore::~ChunkStore() = default;

const fs::path& ChunkStore::directory() const { return state_->dir; }

std::vector<fs::path> ChunkStore::archives() const {
  std::vector<fs::path> out;
  for (const auto& s : state_->shards) out.push_back(s.mirror);
  return out;
}

std::size_t ChunkStore::num_chunks() const { return state_->chunks.size(); }
std::uint64_t ChunkStore::chunk_size(std::size_t chunk) const { return state_->size_of(chunk); }

bool ChunkStore::has(std::size_t chunk) const {
  std::lock_guard lock(state_->mutex);
  return chunk < state_->held.size() && state_->held[chunk];
}

std::vector<std::size_t> ChunkStore::held() const {
  std::lock_guard lock(state_->mutex);
  std::vector<std::size_t> out;
  for (std::size_t c = 0; c < state_->held.size(); ++c)
    if (state_->held[c]) out.push_back(c);
  return out;
}

std::uint64_t ChunkStore::bytes_held() const {
  std::lock_guard lock(state_->mutex);
  return state_->bytes_held;
}

std::uint64_t ChunkStore::capacity() const { return state_->options.capacity; }

std::string ChunkStore::describe(std::size_t chunk) const {
  if (chunk >= state_->chunks.size())
    return "chunk " + std::to_string(chunk) + " (the data has " + std::to_string(state_->chunks.size()) + ")";
  return state_->describe_chunk(chunk);
}

void ChunkStore::stage(std::span<const std::size_t> chunks) {
  auto& s = *state_;
  std::lock_guard writing(s.write_mutex);
  std::vector<std::size_t> wanted;
  std::uint64_t more = 0;
  for (auto c : chunks) {
    if (c >= s.chunks.size()) throw std::out_of_range("stage: " + describe(c));
    if (!has(c) && std::find(wanted.begin(), wanted.end(), c) == wanted.end()) wanted.push_back(c), more += s.size_of(c);
  }
  if (wanted.empty()) return;
  s.reserve(more);
  s.open_sources();
  std::sort(wanted.begin(), wanted.end());  // in file order
  for (auto c : wanted) {
    const auto bytes = s.read_source(c);  // checked against the index's hash
    {
      std::lock_guard lock(s.mutex);
      s.traffic.source_bytes += bytes.size();
    }
    s.put(c, bytes);
  }
  for (auto& shard : s.shards)
    if (shard.dirty && ::fdatasync(shard.writer.get()) != 0) throw OutputError(shard.mirror.string() + ": sync failed: " + errno_text());
  for (auto& shard : s.shards) shard.dirty = false;
  s.write_manifest();
}

codecs::PooledBytes ChunkStore::read(std::size_t chunk) const {
  if (!has(chunk))
    throw ChunkMissing("the chunk store " + state_->dir.string() + " does not hold " + describe(chunk));
  const auto& ch = state_->chunks[chunk];
  try {
    auto bytes = state_->shards[ch.shard].reader->read_chunk(ch.local);
    count_store_read(bytes.size());
    return bytes;
  } catch (const DataError& e) {
    throw DataError("the chunk store " + state_->dir.string() + " holds a damaged " + describe(chunk) + ": " + e.what());
  }
}

void ChunkStore::add(std::size_t chunk, std::span<const std::uint8_t> bytes) {
  auto& s = *state_;
  if (chunk >= s.chunks.size()) throw std::out_of_range("add: " + describe(chunk));
  const auto& e = s.entry(chunk);
  if (bytes.size() != e.size || hash_bytes(bytes) != e.hash)
    throw DataError("chunk store " + s.dir.string() + ": the bytes received for " + describe(chunk) +
                    " do not match its checksum (damaged in transit or at the sender)");
  std::lock_guard writing(s.write_mutex);
  if (has(chunk)) return;
  s.reserve(e.size);
  s.put(chunk, bytes);
  std::lock_guard lock(s.mutex);
  s.traffic.added_bytes += bytes.size();
}

void ChunkStore::drop(std::span<const std::size_t> chunks) {
  auto& s = *state_;
  std::lock_guard writing(s.write_mutex);
  std::vector<std::size_t> gone;
  {
    std::lock_guard lock(s.mutex);
    for (auto c : chunks)
      if (c < s.held.size() && s.held[c]) s.held[c] = false, s.bytes_held -= s.size_of(c), gone.push_back(c);
  }
  if (gone.empty()) return;
  for (auto& shard : s.shards)
    if (shard.dirty) ::fdatasync(shard.writer.get()), shard.dirty = false;
  // The manifest forgets them before their bytes go, so a crash between the two leaves no chunk
  // listed whose bytes are gone.
  s.write_manifest();
  // Holes as large as they can be: a dropped chunk with the chunks beside it in the file that are
  // not held either, so that file system blocks shared by neighbouring chunks are freed too.
  // Where the file system cannot punch holes the bytes stay until the store is removed.
  std::vector<bool> dropped(s.chunks.size(), false);
  for (auto c : gone) dropped[c] = true;
  for (std::size_t i = 0; i < s.shards.size(); ++i) {
    const auto& index = s.shards[i].reader->index().chunks;
    std::vector<std::size_t> by_offset(index.size());
    for (std::size_t k = 0; k < index.size(); ++k) by_offset[k] = k;
    std::sort(by_offset.begin(), by_offset.end(), [&](auto a, auto b) { return index[a].offset < index[b].offset; });
    std::uint64_t begin = 0, end = 0;
    bool any = false;
    auto punch = [&] {
      if (any && end > begin)
        ::fallocate(s.shards[i].writer.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(begin), off_t(end - begin));
      any = false;
    };
    for (auto k : by_offset) {
      const std::size_t c = s.shards[i].first_chunk + k;
      if (has(c)) {
        punch();
        begin = end = index[k].offset + index[k].size;
        continue;
      }
      if (end != index[k].offset) punch(), begin = index[k].offset;
      end = index[k].offset + index[k].size;
      any = any || dropped[c];
    }
    punch();
  }
}

void ChunkStore::commit() {
  auto& s = *state_;
  std::lock_guard writing(s.write_mutex);
  for (auto& shard : s.shards) {
    if (shard.dirty && ::fdatasync(shard.writer.get()) != 0) throw OutputError(shard.mirror.string() + ": sync failed: " + errno_text());
    shard.dirty = false;
  }
  s.write_manifest();
}

std::string ChunkStore::tag() const {
  std::lock_guard writing(state_->write_mutex);
  return state_->tag;
}

void ChunkStore::set_tag(const std::string& tag) {
  {
    std::lock_guard writing(state_->write_mutex);
    state_->tag = tag;
  }
  commit();
}

ChunkStore::Traffic ChunkStore::traffic() const {
  std::lock_guard lock(state_->mutex);
  return state_->traffic;
}

void ChunkStore::count_store_read(std::uint64_t bytes) const {
  std::lock_guard lock(state_->mutex);
  state_->traffic.store_bytes += bytes;
}

}  // namespace tezip
