#include "compressor/decoder.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <random>

#include "codecs/codec_error.hpp"
#include "compressor/errors.hpp"
#include "compressor/source.hpp"
#include "compressor/thread_pool.hpp"

namespace tezip {
namespace {

std::unique_ptr<Predictor> predictor_for(const PredictorIdentity& identity, const std::filesystem::path& archive) {
  try {
    return make_classical_predictor(identity.kind);
  } catch (const std::invalid_argument&) {
    throw DataError(archive.string() + ": the archive was written with predictor '" + identity.kind +
                    "', which this tezip does not have");
  }
}

std::string frame_label(const SequenceEntry& s, std::size_t frame) {
  return "sequence '" + s.name + "' frame " + std::to_string(frame) + " (" + s.frames[frame].name + ")";
}

// Builds a folder under a temporary name beside `target`; rename() moves it into place.
class StagingDirectory {
 public:
  StagingDirectory(std::filesystem::path target, bool overwrite) : target_(std::move(target)), overwrite_(overwrite) {
    if (!overwrite_ && std::filesystem::exists(target_))
      throw OutputError(target_.string() + ": already exists (use -f to overwrite)");
    const auto name = target_.filename().empty() ? target_.parent_path().filename() : target_.filename();
    const auto parent = std::filesystem::absolute(target_).lexically_normal().parent_path();
    std::random_device random;
    path_ = parent / ("." + name.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(random() & 0xffffff));
    std::error_code ec;
    std::filesystem::create_directories(path_, ec);
    if (ec) throw OutputError(path_.string() + ": cannot create: " + ec.message());
  }
  ~StagingDirectory() {
    std::error_code ec;
    if (!committed_) std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  void commit() {
    std::error_code ec;
    if (std::filesystem::exists(target_)) {
      if (!overwrite_) throw OutputError(target_.string() + ": appeared while writing (use -f to overwrite)");
      std::filesystem::remove_all(target_, ec);
      if (ec) throw OutputError(target_.string() + ": cannot replace: " + ec.message());
    }
    std::filesystem::rename(path_, target_, ec);
    if (ec) throw OutputError(target_.string() + ": cannot rename into place: " + ec.message());
    committed_ = true;
  }

 private:
  std::filesystem::path target_, path_;
  bool overwrite_ = false, committed_ = false;
};

}  // namespace

ArchiveDecoder::ArchiveDecoder(const std::filesystem::path& path)
    : reader_(std::make_unique<ArchiveReader>(path)), predictor_(predictor_for(reader_->index().settings.predictor, path)) {}

ArchiveDecoder::~ArchiveDecoder() = default;
const ArchiveIndex& ArchiveDecoder::index() const { return reader_->index(); }
const ArchiveReader& ArchiveDecoder::reader() const { return *reader_; }

GopFrames ArchiveDecoder::decode_chunk(std::size_t i) const {
  const auto& index = reader_->index();
  const auto& chunk = index.chunks.at(i);
  const auto& sequence = index.sequences[chunk.sequence];
  const auto bytes = reader_->read_chunk(i);
  GopFrames frames;
  try {
    const std::span<const std::uint8_t> chunks[] = {bytes};
    const std::size_t counts[] = {std::size_t(chunk.frame_count)};
    frames = std::move(decode_gops(*predictor_, shape_of(sequence.geometry), chunks, counts, index.settings.coding).front());
  } catch (const DataError& e) {
    throw DataError(reader_->path().string() + ": " + frame_label(sequence, chunk.first_frame) + ": " + e.what());
  } catch (const codecs::CodecError& e) {
    throw DataError(reader_->path().string() + ": " + frame_label(sequence, chunk.first_frame) + ": " + e.what());
  }
  for (std::size_t k = 0; k < frames.size(); ++k)
    if (hash_pixels(frames[k]) != sequence.frames[chunk.first_frame + k].hash)
      throw DataError(reader_->path().string() + ": " + frame_label(sequence, chunk.first_frame + k) +
                      ": checksum mismatch after decoding");
  return frames;
}

DecompressReport decompress(const std::filesystem::path& archive, const std::filesystem::path& output_dir,
                            const DecompressOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const ArchiveDecoder decoder(archive);
  const auto& index = decoder.index();
  StagingDirectory staging(output_dir, options.overwrite);
  for (const auto& s : index.sequences) {
    std::error_code ec;
    std::filesystem::create_directories(staging.path() / s.name, ec);
    if (ec) throw OutputError((staging.path() / s.name).string() + ": cannot create: " + ec.message());
  }
  std::atomic<bool> cancelled = false;
  {
    ThreadPool pool(resolve_threads(options.threads));
    std::deque<std::future<void>> jobs;
    for (std::size_t i = 0; i < index.chunks.size(); ++i)
      jobs.push_back(pool.submit([&, i] {
        if (cancelled) return;
        const auto& chunk = index.chunks[i];
        const auto& sequence = index.sequences[chunk.sequence];
        GopFrames frames = decoder.decode_chunk(i);
        for (std::size_t k = 0; k < frames.size(); ++k) {
          const auto& entry = sequence.frames[chunk.first_frame + k];
          Frame frame{entry.name, entry.format, std::move(frames[k])};
          write_frame(staging.path() / sequence.name, frame, sequence.geometry, options.format);
        }
      }));
    std::uint64_t done = 0;
    try {
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        jobs[i].get();
        const auto& chunk = index.chunks[i];
        done += index.sequences[chunk.sequence].geometry.raw_bytes() * chunk.frame_count;
        if (options.progress) options.progress(done, index.raw_bytes());
      }
    } catch (...) {
      cancelled = true;
      throw;
    }
  }
  staging.commit();
  DecompressReport report;
  report.frames = index.frame_count();
  report.raw_bytes = index.raw_bytes();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

VerifyReport verify(const std::filesystem::path& archive, const std::optional<std::filesystem::path>& original,
                    unsigned threads, const ProgressFn& progress) {
  const ArchiveDecoder decoder(archive);
  const auto& index = decoder.index();
  VerifyReport report;
  std::vector<std::unique_ptr<SequenceSource>> sources;
  if (original) {
    sources = open_sources(*original);
    report.compared = true;
    if (sources.size() != index.sequences.size())
      throw InputError(original->string() + ": has " + std::to_string(sources.size()) + " sequences, the archive " +
                       std::to_string(index.sequences.size()));
    for (std::size_t s = 0; s < sources.size(); ++s) {
      const auto& seq = index.sequences[s];
      if (sources[s]->name() != seq.name || sources[s]->frame_count() != seq.frames.size() ||
          !(sources[s]->geometry() == seq.geometry))
        throw InputError(original->string() + ": sequence '" + sources[s]->name() + "' does not match the archive's '" +
                         seq.name + "' (name, frame count or geometry)");
    }
  }
  const auto& bound = index.settings.coding.bound;
  double squared_error = 0;  // normalised to each sequence's full range
  std::uint64_t compared_pixels = 0;
  ThreadPool pool(resolve_threads(threads));
  const std::size_t window = 2 * std::size_t(pool.size());
  std::deque<std::future<GopFrames>> pending;
  std::size_t next = 0;
  std::uint64_t done = 0;
  for (std::size_t i = 0; i < index.chunks.size(); ++i) {
    while (next < index.chunks.size() && pending.size() < window) {
      pending.push_back(pool.submit([&decoder, next] { return decoder.decode_chunk(next); }));
      ++next;
    }
    const auto& chunk = index.chunks[i];
    const auto& sequence = index.sequences[chunk.sequence];
    GopFrames frames;
    ++report.chunks;
    try {
      frames = pending.front().get();
    } catch (const std::exception& e) {
      report.failures.push_back(e.what());
    }
    pending.pop_front();
    report.frames += chunk.frame_count;
    done += sequence.geometry.raw_bytes() * chunk.frame_count;
    if (progress) progress(done, index.raw_bytes());
    if (!original) continue;
    const std::size_t plane = sequence.geometry.plane_size();
    const double full_range = sequence.geometry.max_value();
    for (std::size_t k = 0; k < chunk.frame_count; ++k) {
      const Frame source_frame = sources[chunk.sequence]->read(chunk.first_frame + k);
      if (frames.empty()) continue;  // a failed chunk is already reported; keep the source in step
      const auto& decoded = frames[k];
      for (std::uint32_t c = 0; c < sequence.geometry.channels; ++c) {
        const auto* x = source_frame.pixels.data() + c * plane;
        const auto* y = decoded.data() + c * plane;
        const auto [lo, hi] = std::minmax_element(x, x + plane);
        for (std::size_t p = 0; p < plane; ++p) {
          const double err = std::fabs(double(y[p]) - double(x[p]));
          report.max_error = std::max(report.max_error, err);
          squared_error += (err / full_range) * (err / full_range);
          if (!bound.allows(x[p], y[p], *lo, *hi)) ++report.pixels_out_of_bound;
        }
      }
      compared_pixels += decoded.size();
    }
  }
  if (original) {
    const double mse = compared_pixels ? squared_error / double(compared_pixels) : 0;
    report.psnr = mse > 0 ? 10 * std::log10(1 / mse) : std::numeric_limits<double>::infinity();
  }
  return report;
}

}  // namespace tezip
