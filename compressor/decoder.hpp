#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compressor/chunk_group.hpp"
#include "compressor/gop_codec.hpp"
#include "format/archive.hpp"
#include "compressor/encoder.hpp"
#include "io/frame_writer.hpp"

namespace tezip {

// Random access to the GOPs of one archive: each decoded chunk is checked against the frame
// checksums of the index. Thread-safe.
class ArchiveDecoder {
 public:
  // `model`: the PredNet model file for an archive written with --predictor prednet (default: found
  // by its SHA-256 in the model search path). Throws DataError when the predictor cannot be rebuilt
  // or cannot reproduce the encoder's forecasts on this machine.
  explicit ArchiveDecoder(const std::filesystem::path& path, const std::filesystem::path& model = {});
  ~ArchiveDecoder();
  const ArchiveIndex& index() const;
  const ArchiveReader& reader() const;
  // Frames of chunk i, planar, in order.
  GopFrames decode_chunk(std::size_t i) const;
  // Several chunks of one sequence at once: a learned predictor runs them as one batch.
  std::vector<GopFrames> decode_chunks(std::span<const std::size_t> chunks) const;
  // Decodes chunk i and checks it against the index's checksums, keeping no more of it than its
  // decoding needs (Frames::Streamed: a few frames, not the GOP); throws as decode_chunk.
  void check_chunk(std::size_t i) const;
  // Chunk `chunk` (an index into `chunks`), frame `frame` of it, planar, whole: valid during the call.
  using FrameDone = std::function<void(std::size_t chunk, std::size_t frame, std::span<const std::uint16_t> pixels)>;
  // Decodes as decode_chunks, but hands each frame to `frame_done` as soon as it is whole and keeps
  // no more of a GOP than check_chunk. A frame with its own checksum (archives with per-frame
  // checksums) is checked before it is handed over; a chunk checksum only once its GOP is decoded,
  // so frames handed over may belong to a GOP that then fails (DataError): decompress writes them
  // to a staging folder that a failure removes.
  void stream_chunks(std::span<const std::size_t> chunks, const FrameDone& frame_done) const;
  // How many chunks decode_chunks likes at once.
  std::size_t preferred_batch() const;

 private:
  std::vector<GopFrames> decode_checked(std::span<const std::size_t> chunks, Frames wanted, const FrameDone& frame_done) const;
  // Chunk i's group of short sequences (compressor/chunk_group.hpp), decoded once for all of its
  // members: the last kKeptGroups are kept.
  std::shared_ptr<const DecodedGroup> group_of(std::size_t i) const;
  static constexpr std::size_t kKeptGroups = 4;

  std::unique_ptr<ArchiveReader> reader_;
  std::unique_ptr<Predictor> predictor_;
  mutable std::mutex groups_mutex_;
  // By first chunk, front the last used; a group still being decoded is a future not yet ready.
  mutable std::list<std::pair<std::size_t, std::shared_future<std::shared_ptr<const DecodedGroup>>>> groups_;
};

struct DecompressOptions {
  OutputFormat format = OutputFormat::Original;
  std::filesystem::path model;  // see ArchiveDecoder
  unsigned threads = 0;
  bool overwrite = false;
  ProgressFn progress;
};

struct DecompressReport {
  std::uint64_t frames = 0;
  std::uint64_t raw_bytes = 0;
  double seconds = 0;
};

// Restores every sequence into `output_dir` (one sub-folder per named sequence). The folder is
// built under a temporary name and renamed into place only when complete.
DecompressReport decompress(const std::filesystem::path& archive, const std::filesystem::path& output_dir,
                            const DecompressOptions& options);

struct VerifyReport {
  std::uint64_t chunks = 0;
  std::uint64_t frames = 0;
  std::vector<std::string> failures;  // checksum or decode failures, one line each
  // With --against: the comparison with the original frames.
  bool compared = false;
  double max_error = 0;
  double psnr = 0;  // over all pixels, against each sequence's full range (inf when identical)
  std::uint64_t pixels_out_of_bound = 0;
  bool ok() const { return failures.empty() && pixels_out_of_bound == 0; }
};

// `source`: how `original` is read (give what compress was given).
VerifyReport verify(const std::filesystem::path& archive, const std::optional<std::filesystem::path>& original,
                    unsigned threads, const ProgressFn& progress = {}, const std::filesystem::path& model = {},
                    const SourceOptions& source = {});

}  // namespace tezip
