#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codecs/buffer_pool.hpp"
#include "format/frame.hpp"
#include "format/settings.hpp"
#include "io/temporary_files.hpp"
#include "predictor/predictor.hpp"

namespace tezip {

// The archive (layout in docs/format.md): a 16-byte header, chunks (one coded GOP each) appended
// as they are coded, then the index and a 32-byte footer that points at it.
// 2: predictor arithmetic and fingerprint. 3: the same, plus a model embedded after the header.
// 4: the index stored as one zstd frame, the model optional (a flag in the index). Frame
// names, formats and chunk records repeat from entry to entry; compressed they no longer cost more
// than the frames on small-frame data (Moving MNIST: 55.5 KB of index, 24% of the archive, before).
// 5: as 4, the chunks' decoded-frame checksums XXH3-64 instead of XXH64 (the library's AVX2
// kernel hashes 2.8x as fast; the checksum was 5-9% of decoding).
// 6 (written): as 5, and chunk entries may belong to a group of short sequences stored in the
// group's first chunk (compressor/chunk_group.hpp; ChunkStats::grouped and member).
inline constexpr std::uint32_t kArchiveVersion = 6;
inline constexpr std::uint32_t kOldestArchiveVersion = 2;  // 2 to 4 are read too

enum class GopKind : std::uint8_t { Static = 0, Dynamic = 1 };

// The hash of a chunk's decoded frames (ChunkEntry::frames_hash): XXH64 in archive version 4,
// XXH3-64 (seed 0) from version 5.
enum class FramesChecksum : std::uint8_t { xxh64, xxh3 };
inline constexpr FramesChecksum frames_checksum_of(std::uint32_t archive_version) {
  return archive_version >= 5 ? FramesChecksum::xxh3 : FramesChecksum::xxh64;
}

struct GopPolicy {
  GopKind kind = GopKind::Static;
  std::uint64_t size = 32;         // Static: frames per GOP; Dynamic: the longest GOP allowed
  double mse_threshold = 0;        // Dynamic: a new key frame when the forecast's MSE passes this
};

struct ArchiveSettings {
  CodingSettings coding;
  PredictorIdentity predictor;
  GopPolicy gop;
  std::string writer = "tezip";  // tool and version that wrote the archive
};

struct FrameEntry {
  std::string name;
  std::string format;
  // xxh64 of the decoded frame's planar uint16 pixels: archives of versions 2 and 3 only (version 4
  // keeps one per chunk, ChunkEntry::frames_hash; ArchiveIndex::frame_hashes says which).
  std::uint64_t hash = 0;
};

struct SequenceEntry {
  std::string name;
  Geometry geometry;
  std::vector<FrameEntry> frames;
};

struct ChunkEntry {
  std::uint64_t sequence = 0;
  std::uint64_t first_frame = 0;
  std::uint64_t frame_count = 0;
  std::uint64_t offset = 0;  // of the chunk's bytes in the file
  std::uint64_t size = 0;
  std::uint64_t hash = 0;    // xxh64 of the chunk's bytes
  // Versions 4 and 5: the hash (ArchiveIndex::checksum) of the chunk's decoded frames, their planar
  // uint16 pixels one after the other (hash_frames). One per chunk, not per frame: on Moving MNIST's
  // 64 x 64 frames, 8 bytes a frame were 9% of the archive; the decoder checks a GOP as a whole anyway.
  std::uint64_t frames_hash = 0;
  ChunkStats stats;
};

// The predictor's model file carried in the archive (version 3): its bytes lie between the header
// and the first chunk. size 0: none.
struct EmbeddedModel {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t hash = 0;  // xxh64 of the model's bytes
};

struct ArchiveIndex {
  ArchiveSettings settings;
  EmbeddedModel model;
  std::vector<SequenceEntry> sequences;
  std::vector<ChunkEntry> chunks;  // sequence by sequence, frames in order: a GOP is found by bisection
  // Where the decoded frames' checksums are: per frame (FrameEntry::hash, archives of versions 2
  // and 3) or per chunk (ChunkEntry::frames_hash, versions 4 and 5, what the writer stores).
  bool frame_hashes = false;
  // The chunks' frames_hash: XXH64 (version 4) or XXH3-64 (version 5, what the writer stores).
  FramesChecksum checksum = FramesChecksum::xxh3;

  std::uint64_t raw_bytes() const;
  std::uint64_t frame_count() const;
  // The chunk holding frame `frame` of sequence `sequence`; throws std::out_of_range.
  std::size_t chunk_of(std::size_t sequence, std::size_t frame) const;
};

// Sanity limits a reader applies before it allocates anything the file asks for. The writer checks
// the same (index_problem, and GOPs cut to max_gop_frames), so every archive written can be read.
struct ArchiveLimits {
  std::uint64_t max_dimension = 1u << 16;
  std::uint64_t max_frame_pixels = 1u << 28;
  std::uint64_t max_chunk_pixels = std::uint64_t(1) << 28;  // 512 MiB of decoded uint16 pixels
  std::uint64_t max_model_bytes = std::uint64_t(1) << 26;   // an embedded model, 64 MiB
};

inline constexpr std::size_t kMaxFormatBytes = 16;

// Why frames of this geometry cannot be stored ("has an invalid size ..."), or "" when they can.
std::string geometry_problem(const Geometry& geometry, const ArchiveLimits& limits = {});
// The most frames of this geometry one chunk may hold.
std::uint64_t max_gop_frames(const Geometry& geometry, const ArchiveLimits& limits = {});
// Why ArchiveReader would refuse this index's sequences, names or chunk sizes, or "" when it would
// not: unsafe or duplicated names, sizes past the limits.
std::string index_problem(const ArchiveIndex& index, const ArchiveLimits& limits = {});

std::uint64_t hash_bytes(std::span<const std::uint8_t> bytes);
// XXH64 of one frame's pixels: the per-frame checksum of archive versions 2 and 3 (FrameEntry::hash).
std::uint64_t hash_pixels(std::span<const std::uint16_t> pixels);
// The hash `kind` of frames' pixels one after the other (ChunkEntry::frames_hash).
std::uint64_t hash_frames(std::span<const Pixels> frames, FramesChecksum kind);

// hash_frames' value fed a few rows at a time, in any order: the frames' pixels are `parts` equal
// parts of `part_size` pixels (their rows, planes after planes, frames after frames), and each part
// is hashed as soon as every part before it has been. A decoder that tells it of rows as it writes
// them hashes them while they are in L1, where XXH64 runs at three times its speed from memory
// (XXH3 at 2.8 times XXH64's there).
// Parts added before their turn must stay valid until hashed.
class FramesHasher {
 public:
  FramesHasher(std::size_t parts, std::size_t part_size, FramesChecksum kind);
  ~FramesHasher();
  FramesHasher(FramesHasher&&) noexcept;
  FramesHasher& operator=(FramesHasher&&) noexcept;
  // Parts first, first + 1, ... : `pixels` holds a whole number of them, each added once.
  void add(std::size_t first, std::span<const std::uint16_t> pixels);
  bool complete() const { return next_ == waiting_.size(); }
  std::uint64_t digest() const;  // once complete

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::size_t part_size_ = 0;
  std::vector<const std::uint16_t*> waiting_;  // null: not added yet
  std::size_t next_ = 0;
};
FrameShape shape_of(const Geometry& geometry);

// Writes an archive under a temporary name beside `path`, renamed into place by finish(); a writer
// destroyed before finish() removes the temporary file, so no partial archive is ever left.
class ArchiveWriter {
 public:
  ArchiveWriter(std::filesystem::path path, bool overwrite);
  ~ArchiveWriter();
  ArchiveWriter(const ArchiveWriter&) = delete;
  ArchiveWriter& operator=(const ArchiveWriter&) = delete;

  // Stores a model file right after the header (archive version 3); only before the first chunk,
  // and once. The returned entry goes into the index's `model`.
  EmbeddedModel embed_model(std::span<const std::uint8_t> bytes);
  // Appends a coded chunk; fills entry.offset, size and hash.
  void append_chunk(std::span<const std::uint8_t> bytes, ChunkEntry& entry);
  // Writes the index and footer, syncs, and renames into place. Returns the archive's size.
  std::uint64_t finish(const ArchiveIndex& index);

 private:
  void write_all(std::span<const std::uint8_t> bytes);

  std::filesystem::path path_, target_;  // as given, and resolved (see output_path.hpp)
  TemporaryPath temporary_;
  int fd_ = -1;
  std::uint64_t position_ = 0;
  bool overwrite_ = false;
};

// Opens an archive and validates its header, footer and index. Thread-safe: chunks are read with
// pread and checked against their hash.
class ArchiveReader {
 public:
  explicit ArchiveReader(const std::filesystem::path& path, const ArchiveLimits& limits = {});
  ~ArchiveReader();
  ArchiveReader(const ArchiveReader&) = delete;
  ArchiveReader& operator=(const ArchiveReader&) = delete;

  const ArchiveIndex& index() const { return index_; }
  std::uint64_t file_size() const { return file_size_; }
  const std::filesystem::path& path() const { return path_; }
  // The bytes of chunk i, checked against the index's hash (DataError otherwise), in a block of
  // the buffer pool (a loader reads a chunk for every GOP it decodes).
  codecs::PooledBytes read_chunk(std::size_t i) const;
  // The first `count` bytes of chunk i (fewer where it is shorter), unchecked: for describing it.
  std::vector<std::uint8_t> read_chunk_head(std::size_t i, std::size_t count) const;
  // The embedded model's bytes (empty when the archive has none), checked against the index's
  // hash: DataError when they are damaged.
  std::vector<std::uint8_t> read_embedded_model() const;

 private:
  template <class Bytes>
  Bytes read_range(std::uint64_t offset, std::uint64_t size, const std::string& what) const;
  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t file_size_ = 0;
  ArchiveIndex index_;
};

// True when `path` is a regular file that starts with the archive magic (damaged or not).
bool is_tezip_archive_file(const std::filesystem::path& path);

// Serialized index, exposed for the fuzz target and tests: the body of the given version (4: before
// compression; 2: an index without a model, 3: with one, as older tezip wrote them).
std::vector<std::uint8_t> serialize_index(const ArchiveIndex& index, std::uint32_t version = kArchiveVersion);
// Parses a body of the given archive version (2 and 3: as stored; 4: decompressed).
ArchiveIndex parse_index(std::span<const std::uint8_t> bytes, std::uint64_t chunk_area_end, const ArchiveLimits& limits,
                         std::uint32_t version = kArchiveVersion);
// The bytes a version-4 archive stores for an index body, and the body back from them (DataError
// when they are not one zstd frame of a plausible size).
std::vector<std::uint8_t> store_index_body(std::span<const std::uint8_t> body);
codecs::PooledBytes load_index_body(std::span<const std::uint8_t> stored);  // pooled, as zstd frames decode

}  // namespace tezip
