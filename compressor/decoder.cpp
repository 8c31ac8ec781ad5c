#include "compressor/decoder.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <map>

#include "codecs/codec_error.hpp"
#include "format/dataset_index.hpp"
#include "format/errors.hpp"
#include "io/output_path.hpp"
#include "io/temporary_files.hpp"
#include "io/source.hpp"
#include "compressor/thread_pool.hpp"
#include "predictor/learned_predictor.hpp"
#include "predictor/registry.hpp"
#include "predictor/model_file.hpp"

namespace tezip {
namespace {

std::unique_ptr<Predictor> rebuild_predictor(const ArchiveReader& reader, const std::filesystem::path& model) {
  const PredictorIdentity& identity = reader.index().settings.predictor;
  const std::filesystem::path& archive = reader.path();
  if (find_predictor(identity.kind) == nullptr)
    throw DataError(archive.string() + ": the archive was written with predictor '" + identity.kind +
                    "', which this tezip does not have");
  // A model the user names wins over the embedded one (a way around a damaged copy).
  const auto embedded = model.empty() ? reader.read_embedded_model() : std::vector<std::uint8_t>{};
  // A batch job's shards find the model it adapted to their dataset beside them (tezip batch --adapt).
  std::filesystem::path chosen = model;
  if (chosen.empty() && embedded.empty() && find_predictor(identity.kind)->learned && identity.weights_sha256.size() == 64) {
    const auto beside = archive.parent_path() / dataset_model_name(identity.weights_sha256);
    std::error_code ec;
    if (std::filesystem::exists(beside, ec)) chosen = beside;
  }
  try {
    return predictor_for(identity, chosen, embedded);
  } catch (const ModelError& e) {
    throw DataError(archive.string() + ": " + e.what());
  } catch (const DeterminismError& e) {
    throw DataError(archive.string() + ": " + e.what());
  } catch (const std::invalid_argument& e) {
    throw DataError(archive.string() + ": the archive's " + identity.kind + " settings are unusable: " + e.what());
  }
}

std::string frame_label(const SequenceEntry& s, std::size_t frame) {
  return "sequence '" + s.name + "' frame " + std::to_string(frame) + " (" + s.frames[frame].name + ")";
}

// Builds a folder under a temporary name beside `target` (resolved: "-o ." or "-o dir/" name the
// folder itself, never a place inside it); commit() moves it into place. With `overwrite`, an
// existing target is first renamed aside and removed only once the new folder is in place, so a
// failure or an interrupt at any point leaves the old folder or the new one, never neither.
class StagingDirectory {
 public:
  StagingDirectory(const std::filesystem::path& target, bool overwrite)
      : given_(target), target_(resolved_path(target)), overwrite_(overwrite) {
    check_folder_output(target, overwrite);
    staging_ = TemporaryPath(temporary_name_beside(target_, ".dec"));
    std::error_code ec;
    std::filesystem::create_directory(staging_.path(), ec);
    if (ec) throw OutputError(given_.string() + ": cannot create " + staging_.path().string() + ": " + ec.message());
  }
  ~StagingDirectory() {
    std::error_code ec;
    if (!committed_) std::filesystem::remove_all(staging_.path(), ec);
  }
  const std::filesystem::path& path() const { return staging_.path(); }
  void commit() {
    std::error_code ec;
    // Not registered for removal on an interrupt: until the new folder is in place it is the user's.
    std::filesystem::path aside;
    if (std::filesystem::symlink_status(target_, ec).type() != std::filesystem::file_type::not_found) {
      if (!overwrite_) throw OutputError(given_.string() + ": appeared while writing (use -f to overwrite)");
      aside = temporary_name_beside(target_, ".old");
      std::filesystem::rename(target_, aside, ec);
      if (ec) throw OutputError(given_.string() + ": cannot move the old folder aside to replace it: " + ec.message());
    }
    std::filesystem::rename(staging_.path(), target_, ec);
    if (ec) {
      std::error_code undo;
      if (!aside.empty()) std::filesystem::rename(aside, target_, undo);
      throw OutputError(given_.string() + ": cannot rename into place: " + ec.message());
    }
    committed_ = true;
    staging_.release();
    if (!aside.empty()) std::filesystem::remove_all(aside, ec);
  }

 private:
  std::filesystem::path given_, target_;
  TemporaryPath staging_;
  bool overwrite_ = false, committed_ = false;
};

}  // namespace

ArchiveDecoder::ArchiveDecoder(const std::filesystem::path& path, const std::filesystem::path& model)
    : reader_(std::make_unique<ArchiveReader>(path)), predictor_(rebuild_predictor(*reader_, model)) {}

ArchiveDecoder::~ArchiveDecoder() = default;
const ArchiveIndex& ArchiveDecoder::index() const { return reader_->index(); }
const ArchiveReader& ArchiveDecoder::reader() const { return *reader_; }

GopFrames ArchiveDecoder::decode_chunk(std::size_t i) const {
  const std::size_t chunks[] = {i};
  return std::move(decode_chunks(chunks).front());
}

std::size_t ArchiveDecoder::preferred_batch() const { return std::max<std::size_t>(1, predictor_->preferred_batch()); }

void ArchiveDecoder::check_chunk(std::size_t i) const {
  const std::size_t chunks[] = {i};
  decode_checked(chunks, Frames::Streamed, {});
}

void ArchiveDecoder::stream_chunks(std::span<const std::size_t> which, const FrameDone& frame_done) const {
  decode_checked(which, Frames::Streamed, frame_done);
}

std::vector<GopFrames> ArchiveDecoder::decode_chunks(std::span<const std::size_t> which) const {
  return decode_checked(which, Frames::Returned, {});
}

std::vector<GopFrames> ArchiveDecoder::decode_checked(std::span<const std::size_t> which, Frames wanted,
                                                      const FrameDone& frame_done) const {
  const auto& index = reader_->index();
  if (which.empty()) return {};
  const auto& sequence = index.sequences[index.chunks.at(which.front()).sequence];
  std::vector<codecs::PooledBytes> bytes;
  std::vector<std::span<const std::uint8_t>> chunks;
  std::vector<std::size_t> counts, coded;  // coded: the places in `which` of chunks that are not in a group
  for (std::size_t c = 0; c < which.size(); ++c) {
    const auto& chunk = index.chunks.at(which[c]);
    if (index.sequences[chunk.sequence].geometry.raw_bytes() != sequence.geometry.raw_bytes() ||
        index.sequences[chunk.sequence].geometry.channels != sequence.geometry.channels)
      throw std::invalid_argument("decode_chunks: chunks of different geometries");
    counts.push_back(std::size_t(chunk.frame_count));
    if (chunk.stats.grouped) continue;
    bytes.push_back(reader_->read_chunk(which[c]));
    coded.push_back(c);
  }
  for (const auto& b : bytes) chunks.emplace_back(b);
  const auto where = [&](std::size_t i) {
    const auto& chunk = index.chunks[i];
    return reader_->path().string() + ": " + frame_label(index.sequences[chunk.sequence], chunk.first_frame);
  };
  // Checksums as rows are decoded, while they are in cache: the chunk's (its frames' rows one
  // after the other), or each frame's.
  const auto& geometry = sequence.geometry;
  const std::size_t channels = geometry.channels, height = geometry.height, width = geometry.width;
  std::vector<FramesHasher> chunk_hashes;
  std::vector<std::vector<FramesHasher>> frame_hashes(which.size());
  for (std::size_t c = 0; c < which.size(); ++c) {
    if (index.frame_hashes) {
      for (std::size_t t = 0; t < counts[c]; ++t) frame_hashes[c].emplace_back(channels * height, width, FramesChecksum::xxh64);
    } else {
      chunk_hashes.emplace_back(counts[c] * channels * height, width, index.checksum);
    }
  }
  // frame_done: the rows of each frame still to come; the frame is whole when none are left.
  std::vector<std::vector<std::size_t>> rows_left(which.size());
  if (frame_done)
    for (std::size_t c = 0; c < which.size(); ++c) rows_left[c].assign(counts[c], channels * height);
  const RowsDone hash_rows = [&](std::size_t c, std::size_t t, std::size_t channel, std::size_t y,
                                 std::span<const std::uint16_t> rows) {
    if (channel >= channels || y >= height) throw std::logic_error("decode_chunks: no such row");
    const std::size_t row_in_frame = channel * height + y;
    if (index.frame_hashes) {
      frame_hashes[c].at(t).add(row_in_frame, rows);
    } else {
      chunk_hashes[c].add(t * channels * height + row_in_frame, rows);
    }
    if (!frame_done || (rows_left[c].at(t) -= rows.size() / width) != 0) return;
    const auto& chunk = index.chunks[which[c]];
    const auto& seq = index.sequences[chunk.sequence];
    if (index.frame_hashes && frame_hashes[c][t].digest() != seq.frames[chunk.first_frame + t].hash)
      throw DataError(frame_label(seq, chunk.first_frame + t) + ": checksum mismatch after decoding");  // where() names the file
    // The rows lie in the frame's planar buffer, `channel` planes and `y` rows into it.
    frame_done(c, t, std::span<const std::uint16_t>(rows.data() - (channel * height + y) * width, channels * height * width));
  };
  std::vector<GopFrames> frames(which.size());
  try {
    if (!coded.empty()) {
      std::vector<std::size_t> coded_counts;
      for (const std::size_t c : coded) coded_counts.push_back(counts[c]);
      const RowsDone coded_rows = [&](std::size_t k, std::size_t t, std::size_t channel, std::size_t y,
                                      std::span<const std::uint16_t> rows) { hash_rows(coded[k], t, channel, y, rows); };
      auto decoded = decode_gops(*predictor_, shape_of(sequence.geometry), chunks, coded_counts, index.settings.coding,
                                 coded.size() == which.size() ? hash_rows : coded_rows, wanted);
      for (std::size_t k = 0; k < coded.size(); ++k) frames[coded[k]] = std::move(decoded[k]);
    }
    // Members of groups: their frames from the group's, checked and handed over plane by plane.
    const std::size_t plane_size = width * height;
    for (std::size_t c = 0; c < which.size(); ++c) {
      const auto& stats = index.chunks[which[c]].stats;
      if (!stats.grouped) continue;
      GopFrames member = group_of(which[c])->member(stats.member);
      if (member.size() != counts[c]) throw std::logic_error("decode_chunks: a group member's frame count differs");
      for (std::size_t t = 0; t < member.size(); ++t)
        for (std::size_t channel = 0; channel < channels; ++channel)
          hash_rows(c, t, channel, 0, std::span<const std::uint16_t>(member[t]).subspan(channel * plane_size, plane_size));
      frames[c] = std::move(member);
    }
  } catch (const std::exception& e) {
    if (!dynamic_cast<const DataError*>(&e) && !dynamic_cast<const codecs::CodecError*>(&e)) throw;
    // A batch decodes in lockstep: the damage is in one of its chunks, named by the first.
    throw DataError(where(which.front()) + (which.size() == 1 ? "" : " (or a chunk decoded with it)") + ": " + e.what());
  }
  for (std::size_t c = 0; c < which.size(); ++c) {
    const auto& chunk = index.chunks[which[c]];
    const auto& seq = index.sequences[chunk.sequence];
    if (frames[c].size() != counts[c]) throw std::logic_error("decode_chunks: frame count differs");
    if (!index.frame_hashes) {
      if (!chunk_hashes[c].complete()) throw std::logic_error("decode_chunks: a row was not checksummed");
      if (chunk_hashes[c].digest() != chunk.frames_hash)
        throw DataError(reader_->path().string() + ": " + frame_label(seq, chunk.first_frame) + " to " +
                        seq.frames[chunk.first_frame + chunk.frame_count - 1].name + ": checksum mismatch after decoding");
      continue;
    }
    for (std::size_t k = 0; k < frames[c].size(); ++k) {
      if (!frame_hashes[c][k].complete()) throw std::logic_error("decode_chunks: a row was not checksummed");
      if (frame_hashes[c][k].digest() != seq.frames[chunk.first_frame + k].hash)
        throw DataError(reader_->path().string() + ": " + frame_label(seq, chunk.first_frame + k) + ": checksum mismatch after decoding");
    }
  }
  return frames;
}

std::shared_ptr<const DecodedGroup> ArchiveDecoder::group_of(std::size_t i) const {
  const auto& chunks = reader_->index().chunks;
  const std::size_t first = i - chunks.at(i).stats.member;  // the index keeps members consecutive
  if (chunks[i].stats.member > 0 && group_member_of(reader_->read_chunk(i)) != chunks[i].stats.member)
    throw DataError("a group's member chunk names another place in the group than the index");
  // A group being decoded is waited for, not decoded again (a Stream's workers take a group's
  // members one after the other).
  std::promise<std::shared_ptr<const DecodedGroup>> promise;
  std::shared_future<std::shared_ptr<const DecodedGroup>> known;
  {
    std::lock_guard lock(groups_mutex_);
    const auto it = std::find_if(groups_.begin(), groups_.end(), [&](const auto& g) { return g.first == first; });
    if (it != groups_.end()) {
      groups_.splice(groups_.begin(), groups_, it);
      known = it->second;
    } else {
      groups_.emplace_front(first, promise.get_future().share());
      if (groups_.size() > kKeptGroups) groups_.pop_back();
    }
  }
  if (known.valid()) return known.get();  // rethrows the decoding thread's error
  try {
    std::vector<std::size_t> counts;
    for (std::size_t j = first; j < chunks.size() && chunks[j].stats.grouped && chunks[j].stats.member == j - first; ++j)
      counts.push_back(std::size_t(chunks[j].frame_count));
    const auto& geometry = reader_->index().sequences[chunks[first].sequence].geometry;
    auto group = std::make_shared<const DecodedGroup>(shape_of(geometry), reader_->read_chunk(first), counts);
    promise.set_value(group);
    return group;
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::lock_guard lock(groups_mutex_);
    groups_.remove_if([&](const auto& g) { return g.first == first; });  // a later call tries again
    throw;
  }
}

namespace {

// The archives INPUT names (one, or the shards of a dataset index), opened; sequence names must be
// unique across them, as each becomes a folder.
std::vector<std::unique_ptr<ArchiveDecoder>> open_archives(const std::filesystem::path& input, const std::filesystem::path& model) {
  std::vector<std::unique_ptr<ArchiveDecoder>> decoders;
  std::map<std::string, std::string> owner;
  for (const auto& path : archive_paths(input)) {
    decoders.push_back(std::make_unique<ArchiveDecoder>(path, model));
    for (const auto& s : decoders.back()->index().sequences)
      if (const auto [it, fresh] = owner.emplace(s.name, path.string()); !fresh)
        throw DataError(input.string() + ": sequence '" + s.name + "' is in both " + it->second + " and " + path.string());
  }
  return decoders;
}

// Two frames written under one name would leave one file holding the other's pixels: refused
// before anything is written ("a.jpg" and "a.png" both become "a.png" as PNG).
void check_output_names(const std::vector<std::unique_ptr<ArchiveDecoder>>& decoders, OutputFormat format) {
  for (const auto& d : decoders)
    for (const auto& s : d->index().sequences) {
      std::map<std::string, const std::string*> written;
      for (const auto& f : s.frames) {
        const auto name = output_file_name(f.name, f.format, s.geometry, format);
        if (const auto [it, fresh] = written.emplace(name, &f.name); !fresh)
          throw OutputError(d->reader().path().string() + ": sequence '" + s.name + "': frames '" + *it->second + "' and '" +
                            f.name + "' would both be written as '" + name + "'" +
                            (format == OutputFormat::Png ? " (try --format original)" : ""));
      }
    }
}

}  // namespace

DecompressReport decompress(const std::filesystem::path& archive, const std::filesystem::path& output_dir,
                            const DecompressOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const auto decoders = open_archives(archive, options.model);
  std::vector<std::filesystem::path> inputs = archive_paths(archive);
  inputs.push_back(archive);
  check_output_apart(output_dir, inputs);
  check_output_names(decoders, options.format);
  std::uint64_t total = 0, frames = 0;
  for (const auto& d : decoders) total += d->index().raw_bytes(), frames += d->index().frame_count();
  StagingDirectory staging(output_dir, options.overwrite);
  for (const auto& d : decoders)
    for (const auto& s : d->index().sequences) {
      std::error_code ec;
      std::filesystem::create_directories(staging.path() / s.name, ec);
      if (ec) throw OutputError((staging.path() / s.name).string() + ": cannot create: " + ec.message());
    }
  std::atomic<bool> cancelled = false;
  {
    ThreadPool pool(resolve_threads(options.threads));
    // Consecutive chunks of one sequence decode as a batch (a learned predictor runs them through
    // one network call), as many as the predictor likes but few enough to keep every thread busy.
    struct Job {
      const ArchiveIndex* index;
      std::vector<std::size_t> chunks;
      std::future<void> done;
    };
    std::deque<Job> jobs;
    for (const auto& d : decoders) {
      const ArchiveDecoder& decoder = *d;
      const auto& index = decoder.index();
      const std::size_t batch = std::clamp<std::size_t>((index.chunks.size() + pool.size() - 1) / pool.size(), 1,
                                                        decoder.preferred_batch());
      for (std::size_t i = 0; i < index.chunks.size();) {
        std::vector<std::size_t> chunks = {i++};
        while (i < index.chunks.size() && chunks.size() < batch && index.chunks[i].sequence == index.chunks[chunks[0]].sequence)
          chunks.push_back(i++);
        // Each frame is written as soon as it is decoded: a GOP is never held whole (4K colour: 1.6
        // GB a GOP of 32 frames), and its pages are reused frame by frame.
        auto future = pool.submit([&, chunks] {
          if (cancelled) return;
          decoder.stream_chunks(chunks, [&](std::size_t c, std::size_t k, std::span<const std::uint16_t> pixels) {
            const auto& chunk = index.chunks[chunks[c]];
            const auto& sequence = index.sequences[chunk.sequence];
            const auto& entry = sequence.frames[chunk.first_frame + k];
            const Frame frame{entry.name, entry.format, Pixels(pixels.begin(), pixels.end())};
            write_frame(staging.path() / sequence.name, frame, sequence.geometry, options.format);
          });
        });
        jobs.push_back({&index, std::move(chunks), std::move(future)});
      }
    }
    std::uint64_t done = 0;
    try {
      for (auto& job : jobs) {
        job.done.get();
        for (const std::size_t c : job.chunks) {
          const auto& chunk = job.index->chunks[c];
          done += job.index->sequences[chunk.sequence].geometry.raw_bytes() * chunk.frame_count;
        }
        if (options.progress) options.progress(done, total);
      }
    } catch (...) {
      cancelled = true;
      throw;
    }
  }
  staging.commit();
  DecompressReport report;
  report.frames = frames;
  report.raw_bytes = total;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

namespace {

// What verify() adds up over the archives of one input.
struct VerifyTotals {
  double squared_error = 0;  // normalised to each sequence's full range
  std::uint64_t compared_pixels = 0;
  std::uint64_t done = 0, total = 0;
};

// Decodes every chunk of one archive; with `sources` (by sequence name), compares with the original.
void verify_archive(const ArchiveDecoder& decoder, std::map<std::string, SequenceSource*>* sources, unsigned threads,
                    const ProgressFn& progress, VerifyReport& report, VerifyTotals& totals) {
  const auto& index = decoder.index();
  const auto& bound = index.settings.coding.bound;
  ThreadPool pool(resolve_threads(threads));
  const std::size_t window = 2 * std::size_t(pool.size());
  std::deque<std::future<GopFrames>> pending;
  std::size_t next = 0;
  for (std::size_t i = 0; i < index.chunks.size(); ++i) {
    // Without an original to compare with, each chunk is only checked: a few frames of memory a
    // thread, not a GOP (docs/performance.md, "verify checks GOPs in a few frames of memory").
    while (next < index.chunks.size() && pending.size() < window) {
      pending.push_back(pool.submit([&decoder, next, sources]() -> GopFrames {
        if (sources) return decoder.decode_chunk(next);
        decoder.check_chunk(next);
        return {};
      }));
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
    totals.done += sequence.geometry.raw_bytes() * chunk.frame_count;
    if (progress) progress(totals.done, totals.total);
    if (!sources) continue;
    SequenceSource& source = *sources->at(sequence.name);
    const std::size_t plane = sequence.geometry.plane_size();
    const double full_range = sequence.geometry.max_value();
    for (std::size_t k = 0; k < chunk.frame_count; ++k) {
      const Frame source_frame = source.read(chunk.first_frame + k);
      if (frames.empty()) continue;  // a failed chunk is already reported; keep the source in step
      const auto& decoded = frames[k];
      for (std::uint32_t c = 0; c < sequence.geometry.channels; ++c) {
        const auto* x = source_frame.pixels.data() + c * plane;
        const auto* y = decoded.data() + c * plane;
        const auto [lo, hi] = std::minmax_element(x, x + plane);
        for (std::size_t p = 0; p < plane; ++p) {
          const double err = std::fabs(double(y[p]) - double(x[p]));
          report.max_error = std::max(report.max_error, err);
          totals.squared_error += (err / full_range) * (err / full_range);
          if (!bound.allows(x[p], y[p], *lo, *hi)) ++report.pixels_out_of_bound;
        }
      }
      totals.compared_pixels += decoded.size();
    }
  }
}

}  // namespace

VerifyReport verify(const std::filesystem::path& archive, const std::optional<std::filesystem::path>& original,
                    unsigned threads, const ProgressFn& progress, const std::filesystem::path& model,
                    const SourceOptions& source) {
  VerifyReport report;
  // A dataset index: each shard must be the file it lists (size, checksum, sequences); a damaged
  // shard is reported and the others are still checked.
  std::vector<std::unique_ptr<ArchiveDecoder>> decoders;
  if (is_dataset_index(archive)) {
    const auto index = read_dataset_index(archive);
    const auto paths = archive_paths(archive);
    // The model the job adapted must be the file the index lists, before the shards load it.
    if (index.model) {
      const auto path = (std::filesystem::absolute(archive).parent_path() / index.model->path).lexically_normal();
      const std::string file = path.string();
      std::error_code ec;
      const auto size = std::filesystem::file_size(path, ec);
      if (ec) report.failures.push_back(file + ": missing dataset model: " + ec.message());
      else if (size != index.model->size || hash_file(path) != index.model->hash)
        report.failures.push_back(file + ": the dataset's model is damaged (size or checksum differs from the dataset index)");
    }
    for (std::size_t i = 0; i < paths.size(); ++i) {
      const auto& entry = index.shards[i];
      const std::string file = paths[i].string();
      try {
        std::error_code ec;
        const auto size = std::filesystem::file_size(paths[i], ec);
        if (ec) throw InputError(file + ": missing shard: " + ec.message());
        if (size != entry.size)
          throw DataError(file + ": " + std::to_string(size) + " bytes, the index says " + std::to_string(entry.size));
        if (hash_file(paths[i]) != entry.hash) throw DataError(file + ": checksum mismatch with the dataset index");
        auto decoder = std::make_unique<ArchiveDecoder>(paths[i], model);
        std::vector<std::string> names;
        for (const auto& s : decoder->index().sequences) names.push_back(s.name);
        if (names != entry.sequences || decoder->index().frame_count() != entry.frames)
          throw DataError(file + ": holds other sequences or frames than the dataset index lists");
        decoders.push_back(std::move(decoder));
      } catch (const std::exception& e) {
        report.failures.push_back(e.what());
      }
    }
  } else {
    decoders.push_back(std::make_unique<ArchiveDecoder>(archive, model));
  }
  std::vector<std::unique_ptr<SequenceSource>> sources;
  std::map<std::string, SequenceSource*> by_name;
  if (original) {
    sources = open_sources(*original, source);
    report.compared = true;
    std::size_t archived = 0;
    for (const auto& d : decoders) archived += d->index().sequences.size();
    if (sources.size() != archived && report.failures.empty())
      throw InputError(original->string() + ": has " + std::to_string(sources.size()) + " sequences, the archive " +
                       std::to_string(archived));
    for (const auto& s : sources) by_name[s->name()] = s.get();
    for (const auto& d : decoders)
      for (const auto& seq : d->index().sequences) {
        const auto it = by_name.find(seq.name);
        if (it == by_name.end())
          throw InputError(original->string() + ": has no sequence '" + seq.name + "', which the archive holds");
        if (it->second->frame_count() != seq.frames.size() || !(it->second->geometry() == seq.geometry))
          throw InputError(original->string() + ": sequence '" + seq.name +
                           "' does not match the archive's (frame count or geometry)");
      }
  }
  VerifyTotals totals;
  for (const auto& d : decoders) totals.total += d->index().raw_bytes();
  for (const auto& d : decoders) verify_archive(*d, original ? &by_name : nullptr, threads, progress, report, totals);
  if (original) {
    const double mse = totals.compared_pixels ? totals.squared_error / double(totals.compared_pixels) : 0;
    report.psnr = mse > 0 ? 10 * std::log10(1 / mse) : std::numeric_limits<double>::infinity();
  }
  return report;
}

}  // namespace tezip
