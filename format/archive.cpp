#include "format/archive.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxh_x86dispatch.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>
#include <string_view>

#include "codecs/codec_error.hpp"
#include "codecs/entropy/zstd_frame.hpp"
#include "format/byte_io.hpp"
#include "format/errors.hpp"
#include "io/output_path.hpp"

namespace tezip {
namespace {

constexpr char kMagic[8] = {'T', 'E', 'Z', 'I', 'P', '\r', '\n', '\x1a'};
constexpr char kFooterMagic[8] = {'T', 'Z', 'P', 'I', 'N', 'D', 'E', 'X'};
constexpr std::uint64_t kHeaderSize = 16;
constexpr std::uint64_t kFooterSize = 32;
// In the statistics' coder byte of a chunk entry: the chunk is a pixel chunk (docs/format.md).
constexpr std::uint8_t kPixelChunkBit = 0x80;
// Version 6: the chunk belongs to a group; its member number follows the coder byte.
constexpr std::uint8_t kGroupedBit = 0x40;

std::string errno_text() { return std::strerror(errno); }

void write_settings(ByteWriter& out, const ArchiveSettings& s) {
  out.u8(std::uint8_t(s.coding.bound.mode));
  out.f64(s.coding.bound.abs);
  out.f64(s.coding.bound.rel);
  out.u8(std::uint8_t(s.coding.quantizer));
  out.u32(std::uint32_t(s.coding.zstd_level));
  out.u8((s.coding.adaptive_coder ? 1 : 0) | (s.coding.rans_coder ? 2 : 0) | (s.coding.lzma_coder ? 4 : 0));  // coders tried
  out.string(s.predictor.kind);
  out.string(s.predictor.configuration);
  out.string(s.predictor.weights_sha256);
  out.string(s.predictor.arithmetic);
  out.string(s.predictor.fingerprint);
  out.u8(std::uint8_t(s.gop.kind));
  out.u64(s.gop.size);
  out.f64(s.gop.mse_threshold);
  out.string(s.writer);
}

ArchiveSettings read_settings(ByteReader& in) {
  ArchiveSettings s;
  const std::uint8_t mode = in.u8();
  if (mode > std::uint8_t(codecs::BoundMode::PwRel)) in.fail("unknown error mode");
  s.coding.bound.mode = codecs::BoundMode(mode);
  s.coding.bound.abs = in.f64();
  s.coding.bound.rel = in.f64();
  if (!std::isfinite(s.coding.bound.abs) || !std::isfinite(s.coding.bound.rel) || s.coding.bound.abs < 0 ||
      s.coding.bound.rel < 0)
    in.fail("invalid error bound");
  const std::uint8_t quantizer = in.u8();
  if (quantizer > std::uint8_t(QuantizerKind::Interval)) in.fail("unknown quantizer");
  s.coding.quantizer = QuantizerKind(quantizer);
  s.coding.zstd_level = int(in.u32());
  const std::uint8_t coders = in.u8();
  if (coders > 7) in.fail("unknown coder set");
  s.coding.adaptive_coder = coders & 1;
  s.coding.rans_coder = coders & 2;
  s.coding.lzma_coder = coders & 4;
  s.predictor.kind = in.string(64);
  s.predictor.configuration = in.string();
  s.predictor.weights_sha256 = in.string(128);
  s.predictor.arithmetic = in.string(1024);
  s.predictor.fingerprint = in.string(128);
  const std::uint8_t gop = in.u8();
  if (gop > std::uint8_t(GopKind::Dynamic)) in.fail("unknown GOP policy");
  s.gop.kind = GopKind(gop);
  s.gop.size = in.u64();
  s.gop.mse_threshold = in.f64();
  s.writer = in.string(256);
  return s;
}

}  // namespace

std::string geometry_problem(const Geometry& g, const ArchiveLimits& limits) {
  if (g.width == 0 || g.height == 0 || g.width > limits.max_dimension || g.height > limits.max_dimension)
    return "has an invalid size " + std::to_string(g.width) + "x" + std::to_string(g.height) + " (each side 1 to " +
           std::to_string(limits.max_dimension) + ")";
  if (g.channels != 1 && g.channels != 3) return "has an invalid channel count";
  if (g.pixel_count() > limits.max_frame_pixels)
    return "has frames too large (" + std::to_string(g.pixel_count()) + " values, at most " +
           std::to_string(limits.max_frame_pixels) + ")";
  return "";
}

std::uint64_t max_gop_frames(const Geometry& g, const ArchiveLimits& limits) {
  return std::max<std::uint64_t>(1, limits.max_chunk_pixels / std::max<std::uint64_t>(1, g.pixel_count()));
}

std::string index_problem(const ArchiveIndex& index, const ArchiveLimits& limits) {
  std::set<std::string_view> sequences;
  for (const auto& s : index.sequences) {
    const std::string which = "sequence '" + s.name + "'";
    if (!safe_sequence_name(s.name)) return which + ": the name cannot be a folder name";
    if (!sequences.insert(s.name).second) return which + " appears twice";
    if (const auto problem = geometry_problem(s.geometry, limits); !problem.empty()) return which + " " + problem;
    std::set<std::string_view> frames;
    for (const auto& f : s.frames) {
      if (!safe_frame_name(f.name)) return which + ": frame name '" + f.name + "' cannot be a file name";
      if (f.format.size() > kMaxFormatBytes) return which + ": frame '" + f.name + "' has a format name too long";
      if (!frames.insert(f.name).second) return which + ": frame name '" + f.name + "' appears twice";
    }
  }
  for (const auto& c : index.chunks)
    if (c.sequence < index.sequences.size() && c.frame_count > max_gop_frames(index.sequences[c.sequence].geometry, limits))
      return "a chunk of sequence '" + index.sequences[c.sequence].name + "' holds more frames than a reader accepts";
  return "";
}

std::uint64_t hash_bytes(std::span<const std::uint8_t> bytes) { return XXH64(bytes.data(), bytes.size(), 0); }
std::uint64_t hash_pixels(std::span<const std::uint16_t> pixels) {
  return XXH64(pixels.data(), pixels.size_bytes(), 0);
}

std::uint64_t hash_frames(std::span<const Pixels> frames, FramesChecksum kind) {
  const std::size_t size = frames.empty() ? 0 : frames.front().size();
  FramesHasher hasher(size == 0 ? 0 : frames.size(), std::max<std::size_t>(size, 1), kind);
  for (std::size_t t = 0; t < frames.size(); ++t) {
    if (frames[t].size() != size) throw std::invalid_argument("hash_frames: frames of different sizes");
    if (size > 0) hasher.add(t, frames[t]);
  }
  return hasher.digest();
}

// One of the two streaming hashes (the library's AVX2/AVX-512 dispatch for XXH3).
struct FramesHasher::State {
  FramesChecksum kind;
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> xxh64{nullptr, &XXH64_freeState};
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> xxh3{nullptr, &XXH3_freeState};
  explicit State(FramesChecksum k) : kind(k) {
    if (kind == FramesChecksum::xxh64) {
      xxh64.reset(XXH64_createState());
      if (!xxh64) throw std::bad_alloc();
      XXH64_reset(xxh64.get(), 0);
    } else {
      xxh3.reset(XXH3_createState());
      if (!xxh3) throw std::bad_alloc();
      XXH3_64bits_reset(xxh3.get());
    }
  }
  void update(const void* data, std::size_t bytes) {
    if (kind == FramesChecksum::xxh64) {
      XXH64_update(xxh64.get(), data, bytes);
    } else {
      XXH3_64bits_update_dispatch(xxh3.get(), data, bytes);
    }
  }
  std::uint64_t digest() const {
    return kind == FramesChecksum::xxh64 ? XXH64_digest(xxh64.get()) : XXH3_64bits_digest(xxh3.get());
  }
};

FramesHasher::FramesHasher(std::size_t parts, std::size_t part_size, FramesChecksum kind)
    : state_(std::make_unique<State>(kind)), part_size_(part_size), waiting_(parts, nullptr) {
  if (part_size == 0) throw std::invalid_argument("FramesHasher: parts of no pixels");
}
FramesHasher::~FramesHasher() = default;
FramesHasher::FramesHasher(FramesHasher&&) noexcept = default;
FramesHasher& FramesHasher::operator=(FramesHasher&&) noexcept = default;

void FramesHasher::add(std::size_t first, std::span<const std::uint16_t> pixels) {
  static_assert(std::endian::native == std::endian::little, "pixels are hashed as little-endian uint16");
  const std::size_t count = pixels.size() / part_size_;
  if (pixels.size() % part_size_ != 0 || first > waiting_.size() || count > waiting_.size() - first)
    throw std::logic_error("FramesHasher: not whole parts, or parts out of range");
  for (std::size_t i = 0; i < count; ++i) {
    if (waiting_[first + i]) throw std::logic_error("FramesHasher: a part added twice");
    waiting_[first + i] = pixels.data() + i * part_size_;
  }
  // The parts now in turn, consecutive ones that lie one after the other in memory in one update.
  while (next_ < waiting_.size() && waiting_[next_]) {
    const std::uint16_t* start = waiting_[next_];
    std::size_t run = 1;
    while (next_ + run < waiting_.size() && waiting_[next_ + run] == start + run * part_size_) ++run;
    state_->update(start, run * part_size_ * sizeof(std::uint16_t));
    next_ += run;
  }
}

std::uint64_t FramesHasher::digest() const {
  if (!complete()) throw std::logic_error("FramesHasher: parts missing");
  return state_->digest();
}

FrameShape shape_of(const Geometry& g) { return {g.width, g.height, g.channels, g.max_value()}; }

std::uint64_t ArchiveIndex::raw_bytes() const {
  std::uint64_t total = 0;
  for (const auto& s : sequences) total += s.geometry.raw_bytes() * s.frames.size();
  return total;
}

std::uint64_t ArchiveIndex::frame_count() const {
  std::uint64_t total = 0;
  for (const auto& s : sequences) total += s.frames.size();
  return total;
}

std::size_t ArchiveIndex::chunk_of(std::size_t sequence, std::size_t frame) const {
  const auto it = std::upper_bound(chunks.begin(), chunks.end(), std::pair{sequence, frame},
                                   [](const std::pair<std::size_t, std::size_t>& key, const ChunkEntry& c) {
                                     return key.first < c.sequence || (key.first == c.sequence && key.second < c.first_frame);
                                   });
  if (it == chunks.begin()) throw std::out_of_range("no such frame");
  const auto& c = *(it - 1);
  if (c.sequence != sequence || frame >= c.first_frame + c.frame_count) throw std::out_of_range("no such frame");
  return std::size_t(it - 1 - chunks.begin());
}

// The largest index body a reader inflates: about 2^28 frames' worth of entries. The stored frame
// is checked against the footer's hash before it is inflated, so only a crafted file reaches this.
constexpr std::size_t kMaxIndexBody = std::size_t(1) << 34;
constexpr int kIndexLevel = 19;  // the index is a small part of the work; its bytes are for good

std::vector<std::uint8_t> store_index_body(std::span<const std::uint8_t> body) {
  return codecs::compress_zstd_frame(body, kIndexLevel);
}

codecs::PooledBytes load_index_body(std::span<const std::uint8_t> stored) {
  try {
    const std::size_t most = std::min<std::size_t>(kMaxIndexBody, std::max<std::size_t>(stored.size(), 1) << 16);
    return codecs::decompress_zstd_frame(stored, 0, most, "archive index");
  } catch (const codecs::CodecError& e) {
    throw DataError(e.what());
  }
}

std::vector<std::uint8_t> serialize_index(const ArchiveIndex& index, std::uint32_t version) {
  if (version < kOldestArchiveVersion || version > kArchiveVersion || (version == 2 && index.model.size > 0) ||
      (version == 3 && index.model.size == 0))
    throw std::invalid_argument("serialize_index: version " + std::to_string(version) + " cannot hold this index");
  ByteWriter out;
  write_settings(out, index.settings);
  if (version >= 4) out.u8(index.model.size > 0);
  if (index.model.size > 0) {
    out.u64(index.model.offset);
    out.u64(index.model.size);
    out.u64(index.model.hash);
  }
  out.varint(index.sequences.size());
  for (const auto& s : index.sequences) {
    out.string(s.name);
    out.u32(s.geometry.width);
    out.u32(s.geometry.height);
    out.u8(std::uint8_t(s.geometry.channels));
    out.u8(std::uint8_t(s.geometry.type));
    out.varint(s.frames.size());
    for (const auto& f : s.frames) {
      out.string(f.name);
      out.string(f.format);
      if (version < 4) out.u64(f.hash);
    }
  }
  out.varint(index.chunks.size());
  for (const auto& c : index.chunks) {
    out.varint(c.sequence);
    out.varint(c.first_frame);
    out.varint(c.frame_count);
    out.u64(c.offset);
    out.u64(c.size);
    out.u64(c.hash);
    if (version >= 4) out.u64(c.frames_hash);
    out.varint(c.stats.symbol_bytes);
    out.varint(c.stats.run_bytes);
    out.varint(c.stats.literal_bytes);
    out.varint(c.stats.literal_count);
    if (c.stats.grouped && version < 6)
      throw std::invalid_argument("serialize_index: version " + std::to_string(version) + " has no groups");
    out.u8(std::uint8_t(c.stats.coder) | (c.stats.pixels ? kPixelChunkBit : 0) | (c.stats.grouped ? kGroupedBit : 0));
    if (c.stats.grouped) out.varint(c.stats.member);
  }
  return std::move(out.bytes());
}

ArchiveIndex parse_index(std::span<const std::uint8_t> bytes, std::uint64_t chunk_area_end, const ArchiveLimits& limits,
                         std::uint32_t version) {
  ByteReader in(bytes, "archive index");
  ArchiveIndex index;
  std::set<std::string> sequence_names;
  index.settings = read_settings(in);
  index.frame_hashes = version < 4;
  index.checksum = frames_checksum_of(version);
  std::uint64_t chunks_start = kHeaderSize;
  bool has_model = version == 3;
  if (version >= 4) {
    const std::uint8_t flag = in.u8();
    if (flag > 1) in.fail("bad embedded model flag");
    has_model = flag == 1;
  }
  if (has_model) {
    index.model.offset = in.u64();
    index.model.size = in.u64();
    index.model.hash = in.u64();
    if (index.model.size == 0 || index.model.size > limits.max_model_bytes) in.fail("embedded model size out of range");
    if (index.model.offset != kHeaderSize || index.model.size > chunk_area_end - kHeaderSize)
      in.fail("embedded model offset out of range");
    chunks_start = kHeaderSize + index.model.size;
  }
  // Each entry takes at least a few bytes, so no count can ask for more entries than bytes remain.
  const auto sequences = in.varint(in.remaining(), "sequence count");
  index.sequences.reserve(sequences);
  for (std::uint64_t i = 0; i < sequences; ++i) {
    SequenceEntry s;
    s.name = in.string(kMaxNameBytes);
    if (!safe_sequence_name(s.name)) in.fail("unsafe sequence name '" + s.name + "'");
    if (!sequence_names.insert(s.name).second) in.fail("sequence '" + s.name + "' is listed twice");
    s.geometry.width = in.u32();
    s.geometry.height = in.u32();
    s.geometry.channels = in.u8();
    const std::uint8_t type = in.u8();
    if (type != std::uint8_t(PixelType::U8) && type != std::uint8_t(PixelType::U16))
      in.fail("sequence '" + s.name + "' has an invalid pixel type");
    s.geometry.type = PixelType(type);
    if (const auto problem = geometry_problem(s.geometry, limits); !problem.empty()) in.fail("sequence '" + s.name + "' " + problem);
    // A frame's entry takes at least 3 bytes (a name, a format), 11 with the hash of versions 2 and 3.
    const auto frames = in.varint(in.remaining() / (version >= 4 ? 3 : 11), "frame count");
    s.frames.resize(frames);
    std::set<std::string_view> frame_names;
    for (auto& f : s.frames) {
      f.name = in.string(kMaxNameBytes);
      if (!safe_frame_name(f.name)) in.fail("unsafe frame name '" + f.name + "'");
      f.format = in.string(kMaxFormatBytes);
      if (version < 4) f.hash = in.u64();
    }
    // After the loop: the strings no longer move.
    for (const auto& f : s.frames)
      if (!frame_names.insert(f.name).second) in.fail("sequence '" + s.name + "': frame name '" + f.name + "' is listed twice");
    index.sequences.push_back(std::move(s));
  }
  const auto chunks = in.varint(in.remaining() / 30, "chunk count");
  index.chunks.resize(chunks);
  std::uint64_t expected_sequence = 0, expected_frame = 0, previous_end = chunks_start, group_pixels = 0;
  for (auto& c : index.chunks) {
    c.sequence = in.varint();
    c.first_frame = in.varint();
    c.frame_count = in.varint();
    c.offset = in.u64();
    c.size = in.u64();
    c.hash = in.u64();
    if (version >= 4) c.frames_hash = in.u64();
    c.stats.symbol_bytes = in.varint();
    c.stats.run_bytes = in.varint();
    c.stats.literal_bytes = in.varint();
    c.stats.literal_count = in.varint();
    const std::uint8_t coder = in.u8();
    const std::uint8_t flags = kPixelChunkBit | (version >= 6 ? kGroupedBit : 0);
    if (!codecs::is_entropy_coder(coder & ~flags)) in.fail("unknown entropy coder");
    c.stats.coder = codecs::EntropyCoderKind(coder & ~flags);
    c.stats.pixels = coder & kPixelChunkBit;
    c.stats.grouped = coder & kGroupedBit;
    if (c.stats.grouped) c.stats.member = std::uint32_t(in.varint(UINT32_MAX, "group member"));
    // Chunks tile the sequences in order, and the file's chunk area in order.
    while (expected_sequence < index.sequences.size() && expected_frame == index.sequences[expected_sequence].frames.size()) {
      ++expected_sequence;
      expected_frame = 0;
    }
    if (expected_sequence >= index.sequences.size() || c.sequence != expected_sequence || c.first_frame != expected_frame)
      in.fail("chunks do not cover the sequences in order");
    const auto& seq = index.sequences[c.sequence];
    if (c.frame_count == 0 || c.frame_count > seq.frames.size() - c.first_frame)
      in.fail("chunk frame count out of range");
    if (c.frame_count > limits.max_chunk_pixels / seq.geometry.pixel_count()) in.fail("chunk too large");
    if (c.offset < previous_end || c.size > chunk_area_end || c.offset > chunk_area_end - c.size)
      in.fail("chunk offset out of range");
    previous_end = c.offset + c.size;
    expected_frame += c.frame_count;
    // A group's members are whole sequences of one geometry, numbered 0, 1, ... in consecutive
    // chunks, and decode together: their pixels within the limit of one chunk.
    if (c.stats.grouped) {
      if (c.first_frame != 0 || c.frame_count != seq.frames.size()) in.fail("a grouped chunk that is not a whole sequence");
      const std::size_t i = std::size_t(&c - index.chunks.data());
      if (c.stats.member > 0) {
        if (i == 0 || !index.chunks[i - 1].stats.grouped || index.chunks[i - 1].stats.member + 1 != c.stats.member ||
            !(index.sequences[index.chunks[i - 1].sequence].geometry == seq.geometry))
          in.fail("a group's members are not consecutive sequences of one geometry");
        group_pixels += c.frame_count * seq.geometry.pixel_count();
      } else {
        group_pixels = c.frame_count * seq.geometry.pixel_count();
      }
      if (group_pixels > limits.max_chunk_pixels) in.fail("group too large");
    }
  }
  while (expected_sequence < index.sequences.size() && expected_frame == index.sequences[expected_sequence].frames.size()) {
    ++expected_sequence;
    expected_frame = 0;
  }
  if (expected_sequence != index.sequences.size()) in.fail("chunks do not cover every frame");
  in.expect_end();
  return index;
}

ArchiveWriter::ArchiveWriter(std::filesystem::path path, bool overwrite)
    : path_(std::move(path)), overwrite_(overwrite) {
  check_file_output(path_, overwrite_);
  target_ = resolved_path(path_);
  temporary_ = TemporaryPath(temporary_name_beside(target_));
  fd_ = ::open(temporary_.path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) throw OutputError(path_.string() + ": cannot create: " + errno_text());
  ByteWriter header;
  header.raw(kMagic, sizeof kMagic);
  header.u32(kArchiveVersion);
  header.u32(0);  // flags
  write_all(header.bytes());
}

ArchiveWriter::~ArchiveWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temporary_.path().c_str());
  }
}

void ArchiveWriter::write_all(std::span<const std::uint8_t> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw OutputError(path_.string() + ": write failed: " + errno_text());
    bytes = bytes.subspan(std::size_t(n));
    position_ += std::uint64_t(n);
  }
}

EmbeddedModel ArchiveWriter::embed_model(std::span<const std::uint8_t> bytes) {
  if (position_ != kHeaderSize) throw std::logic_error("ArchiveWriter::embed_model: only once, before the first chunk");
  if (bytes.empty() || bytes.size() > ArchiveLimits{}.max_model_bytes)
    throw InputError(path_.string() + ": the model to embed is empty or larger than " +
                     std::to_string(ArchiveLimits{}.max_model_bytes) + " bytes");
  EmbeddedModel entry{position_, bytes.size(), hash_bytes(bytes)};
  write_all(bytes);
  return entry;
}

void ArchiveWriter::append_chunk(std::span<const std::uint8_t> bytes, ChunkEntry& entry) {
  entry.offset = position_;
  entry.size = bytes.size();
  entry.hash = hash_bytes(bytes);
  write_all(bytes);
}

std::uint64_t ArchiveWriter::finish(const ArchiveIndex& index) {
  // The reader's own checks, so that no archive is written that tezip cannot read back.
  if (const auto problem = index_problem(index); !problem.empty())
    throw InputError(path_.string() + ": cannot be written: " + problem);
  if (index.model.size > 0 && index.model.offset != kHeaderSize)
    throw std::logic_error("ArchiveWriter::finish: the index's model was not embedded by this writer");
  const auto body = store_index_body(serialize_index(index));
  const std::uint64_t index_offset = position_;
  write_all(body);
  ByteWriter footer;
  footer.u64(index_offset);
  footer.u64(body.size());
  footer.u64(hash_bytes(body));
  footer.raw(kFooterMagic, sizeof kFooterMagic);
  write_all(footer.bytes());
  if (::fsync(fd_) != 0) throw OutputError(path_.string() + ": sync failed: " + errno_text());
  if (::close(fd_) != 0) {
    fd_ = -1;
    ::unlink(temporary_.path().c_str());
    throw OutputError(path_.string() + ": close failed: " + errno_text());
  }
  fd_ = -1;
  std::error_code ec;
  if (!overwrite_ && std::filesystem::symlink_status(target_, ec).type() != std::filesystem::file_type::not_found) {
    ::unlink(temporary_.path().c_str());
    throw OutputError(path_.string() + ": appeared while writing (use -f to overwrite)");
  }
  if (::rename(temporary_.path().c_str(), target_.c_str()) != 0) {
    const auto why = errno_text();
    ::unlink(temporary_.path().c_str());
    throw OutputError(path_.string() + ": cannot rename into place: " + why);
  }
  temporary_.release();
  return position_;
}

bool is_tezip_archive_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::status(path, ec))) return false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  char magic[sizeof kMagic];
  const bool ok = ::pread(fd, magic, sizeof magic, 0) == ssize_t(sizeof magic) && std::memcmp(magic, kMagic, sizeof magic) == 0;
  ::close(fd);
  return ok;
}

ArchiveReader::ArchiveReader(const std::filesystem::path& path, const ArchiveLimits& limits) : path_(path) {
  // Non-blocking, so that a FIFO given as an archive is refused by the check below, not waited on.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw InputError(path.string() + ": cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw InputError(path.string() + ": not a regular file");
  }
  file_size_ = std::uint64_t(st.st_size);
  auto fail = [&](const std::string& why) {
    ::close(fd_);
    fd_ = -1;
    throw DataError(path.string() + ": " + why);
  };
  if (file_size_ < kHeaderSize + kFooterSize) fail("too small to be a tezip archive");
  std::uint8_t header[kHeaderSize], footer[kFooterSize];
  if (::pread(fd_, header, sizeof header, 0) != ssize_t(sizeof header) ||
      ::pread(fd_, footer, sizeof footer, off_t(file_size_ - kFooterSize)) != ssize_t(sizeof footer))
    fail("cannot read header or footer");
  if (std::memcmp(header, kMagic, sizeof kMagic) != 0) fail("not a tezip archive (bad magic)");
  std::uint32_t version, flags;
  std::memcpy(&version, header + 8, 4);
  std::memcpy(&flags, header + 12, 4);
  if (version < kOldestArchiveVersion || version > kArchiveVersion)
    fail("archive format version " + std::to_string(version) + " is not supported (this tezip reads " +
         std::to_string(kOldestArchiveVersion) + " to " + std::to_string(kArchiveVersion) + ")");
  if (flags != 0) fail("unknown archive flags");
  if (std::memcmp(footer + 24, kFooterMagic, sizeof kFooterMagic) != 0)
    fail("footer missing: the archive is truncated or was not finished");
  std::uint64_t index_offset, index_size, index_hash;
  std::memcpy(&index_offset, footer, 8);
  std::memcpy(&index_size, footer + 8, 8);
  std::memcpy(&index_hash, footer + 16, 8);
  const std::uint64_t index_end = file_size_ - kFooterSize;
  if (index_offset < kHeaderSize || index_offset > index_end || index_size != index_end - index_offset)
    fail("index location out of range");
  std::vector<std::uint8_t> body(index_size);
  if (::pread(fd_, body.data(), body.size(), off_t(index_offset)) != ssize_t(body.size())) fail("cannot read index");
  if (hash_bytes(body) != index_hash) fail("index checksum mismatch (the archive is damaged)");
  try {
    index_ = version >= 4 ? parse_index(load_index_body(body), index_offset, limits, version)
                          : parse_index(body, index_offset, limits, version);
  } catch (const DataError& e) {
    fail(e.what());
  }
}

ArchiveReader::~ArchiveReader() {
  if (fd_ >= 0) ::close(fd_);
}

template <class Bytes>
Bytes ArchiveReader::read_range(std::uint64_t offset, std::uint64_t size, const std::string& what) const {
  Bytes bytes(size);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd_, bytes.data() + done, bytes.size() - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw DataError(path_.string() + ": cannot read " + what + ": " + errno_text());
    done += std::size_t(n);
  }
  return bytes;
}

std::vector<std::uint8_t> ArchiveReader::read_embedded_model() const {
  if (index_.model.size == 0) return {};
  auto bytes = read_range<std::vector<std::uint8_t>>(index_.model.offset, index_.model.size, "the embedded model");
  if (hash_bytes(bytes) != index_.model.hash)
    throw DataError(path_.string() + ": the embedded PredNet model is damaged (checksum mismatch); decode with the "
                    "model it was written with: --model FILE");
  return bytes;
}

std::vector<std::uint8_t> ArchiveReader::read_chunk_head(std::size_t i, std::size_t count) const {
  const auto& c = index_.chunks.at(i);
  return read_range<std::vector<std::uint8_t>>(c.offset, std::min<std::uint64_t>(count, c.size), "chunk " + std::to_string(i));
}

codecs::PooledBytes ArchiveReader::read_chunk(std::size_t i) const {
  const auto& c = index_.chunks.at(i);
  auto bytes = read_range<codecs::PooledBytes>(c.offset, c.size, "chunk " + std::to_string(i));
  if (hash_bytes(bytes) != c.hash)
    throw DataError(path_.string() + ": chunk " + std::to_string(i) + " (sequence '" + index_.sequences[c.sequence].name +
                    "', frames " + std::to_string(c.first_frame) + "-" + std::to_string(c.first_frame + c.frame_count - 1) +
                    ") checksum mismatch");
  return bytes;
}

}  // namespace tezip
