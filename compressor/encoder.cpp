#include "compressor/encoder.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <future>
#include <set>
#include <thread>

#include "compressor/chunk_group.hpp"
#include "compressor/grouper.hpp"
#include "compressor/memory_budget.hpp"
#include "compressor/thread_pool.hpp"
#include "format/errors.hpp"
#include "io/output_path.hpp"
#include "io/source.hpp"
#include "io/temporary_files.hpp"
#include "predictor/model_file.hpp"
#include "predictor/registry.hpp"
#include "predictor/training.hpp"

namespace tezip {
namespace {

// GOPs of one shape handed to a worker as one batch, and where their results go in the index.
struct PendingBatch {
  std::future<std::vector<EncodedGop>> result;
  std::vector<ChunkEntry> entries;
  bool quick = false;  // coded with the quick settings (a short sequence)
  // The batch's frames, where they must outlive its coding: a quick batch at a bound (its frames
  // may be coded again, and its reconstructions are not they).
  std::shared_ptr<const std::vector<GopFrames>> frames;
};

}  // namespace

std::unique_ptr<Predictor> make_predictor(const CompressOptions& options) {
  try {
    return make_predictor(options.predictor, options.learned);
  } catch (const ModelError& e) {
    throw InputError(e.what());
  }
}

unsigned resolve_threads(unsigned requested) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (requested == 0) return cores;
  // More threads than this only cost memory (each holds frames in flight), and enough of them make
  // thread creation fail; the archive is the same for any count, so asking for more is harmless.
  return std::min({requested, kMaxThreads, 4 * cores});
}

AdaptResult adapt_to_input(const std::filesystem::path& input, const CompressOptions& options, unsigned threads,
                           const std::string& purpose) {
  check_training_available(purpose);
  auto sources = open_sources(input, options.source);
  std::vector<std::size_t> frames, values;
  std::uint64_t total = 0;
  for (const auto& s : sources) {
    frames.push_back(s->frame_count());
    values.push_back(s->geometry().pixel_count());
    total += std::uint64_t(s->frame_count()) * s->geometry().pixel_count();
  }
  const auto windows = adapt_sample(frames, values, options.adapt_max_values);
  std::vector<TrainingSequence> sequences;
  for (std::size_t s = 0; s < sources.size(); ++s)
    for (const auto& w : windows[s]) {
      TrainingSequence seq;
      seq.shape = shape_of(sources[s]->geometry());
      seq.name = sources[s]->name() + (windows[s].size() > 1 ? "@" + std::to_string(w.first) : "");
      for (std::size_t i = w.first; i < w.first + w.count; ++i) {
        const Frame frame = sources[s]->read(i);
        seq.frames.emplace_back(frame.pixels.begin(), frame.pixels.end());
      }
      sequences.push_back(std::move(seq));
    }
  AdaptOptions adapt = options.adapt;
  if (options.adapt_auto) adapt.seconds = auto_adapt_seconds(total, threads);
  if (!options.adapt_from_scratch) {
    const auto path = options.learned.model.empty() ? default_model_path() : options.learned.model;
    adapt.start = std::make_shared<const ModelFile>(load_model_file(path));
  }
  adapt.threads = int(threads);
  try {
    return adapt_prednet(sequences, adapt);
  } catch (const TrainingError& e) {
    throw InputError(input.string() + ": cannot adapt PredNet to it: " + e.what());
  }
}

CompressReport compress(const std::filesystem::path& input, const std::filesystem::path& output,
                        const CompressOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::filesystem::path inputs[] = {input};
  check_output_apart(output, inputs);
  if (options.adapts()) {
    CompressOptions adapted = options;
    AdaptResult result;
    try {
      result = adapt_to_input(input, options, resolve_threads(options.threads));
    } catch (const ModelError& e) {  // LearnedModuleError too: no libtorch
      throw InputError(e.what());
    }
    adapted.learned.model_data = std::make_shared<const ModelFile>(std::move(result.model));
    adapted.learned.model_name = "adapted";
    adapted.learned.embed = true;
    adapted.adapt = {};
    adapted.adapt_auto = false;
    auto report = compress_sources(open_sources(input, options.source), output, adapted);
    if (options.adapt_keep_smaller) {
      // The classical archive under a temporary name beside the output; the smaller one takes the
      // output's name, the other (tezip's own) is removed.
      CompressOptions classical = options;
      classical.predictor = "auto";
      classical.learned = {};
      classical.adapt = {};
      classical.adapt_auto = false;
      classical.overwrite = false;
      const TemporaryPath temporary(temporary_name_beside(output, ".classical"));
      const auto other = compress_sources(open_sources(input, options.source), temporary.path(), classical);
      report.adapted_bytes = report.archive_bytes;
      report.classical_bytes = other.archive_bytes;
      report.kept_classical = other.archive_bytes < report.archive_bytes;
      std::error_code ec;
      if (report.kept_classical) std::filesystem::rename(temporary.path(), output, ec);
      if (!report.kept_classical || ec) std::filesystem::remove(temporary.path());  // ours either way
      if (ec) throw OutputError(output.string() + ": cannot put --predictor auto's archive in place: " + ec.message());
      if (report.kept_classical) report.archive_bytes = other.archive_bytes, report.chunks = other.chunks;
    }
    report.adapt_seconds = result.seconds;
    report.adapt_val_mse = result.val_mse;
    report.adapt_previous_mse = result.previous_mse;
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
  }
  auto report = compress_sources(open_sources(input, options.source), output, options);
  // Opening the input (a video is decoded to count its frames) is part of the work.
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

CompressReport compress_sources(std::vector<std::unique_ptr<SequenceSource>> sources,
                                const std::filesystem::path& output, const CompressOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::shared_ptr<const Predictor> predictor = make_predictor(options);

  ArchiveIndex index;
  index.settings.coding = options.coding;
  index.settings.predictor = predictor->identity();
  index.settings.gop = options.gop;
  index.settings.writer = "tezip 0.1";
  std::uint64_t total = 0;
  for (const auto& s : sources) total += s->geometry().raw_bytes() * s->frame_count();
  // What the reader would refuse is refused here, before any file is created.
  std::set<std::string> names;
  for (const auto& s : sources) {
    const std::string which = s->name().empty() ? "the input" : "sequence '" + s->name() + "'";
    if (const auto problem = geometry_problem(s->geometry()); !problem.empty())
      throw InputError(output.string() + ": cannot store " + which + ": it " + problem);
    if (!safe_sequence_name(s->name())) throw InputError(output.string() + ": cannot store " + which + ": unusable as a folder name");
    if (!names.insert(s->name()).second) throw InputError(output.string() + ": two sequences are named '" + s->name() + "'");
  }

  ArchiveWriter writer(output, options.overwrite);
  if (find_predictor(options.predictor) && find_predictor(options.predictor)->learned && options.learned.embed) {
    try {
      index.model = writer.embed_model(prednet_model_bytes(options.learned));
    } catch (const ModelError& e) {
      throw InputError(e.what());
    }
  }
  const unsigned threads = resolve_threads(options.threads);
  ThreadPool pool(threads);
  std::deque<PendingBatch> pending;
  std::uint64_t done = 0;
  std::size_t batch_size = 1;
  // Batches in flight (coded or read ahead), per sequence: as many as the memory holds
  // (compressor/memory_budget.hpp), up to 2 per thread. The memory left is read once, not per
  // sequence (a dataset may hold thousands of small ones).
  std::size_t in_flight = 2 * std::size_t(threads);
  const std::uint64_t available = available_memory_bytes();
  CompressReport report;

  auto store = [&](ChunkEntry entry, std::span<const std::uint8_t> bytes, const ChunkStats& stats, const GopFrames& reconstruction) {
    writer.append_chunk(bytes, entry);
    entry.stats = stats;
    entry.frames_hash = hash_frames(reconstruction, frames_checksum_of(kArchiveVersion));
    index.chunks.push_back(entry);
    done += index.sequences[entry.sequence].geometry.raw_bytes() * entry.frame_count;
  };
  // Short sequences (compressor/chunk_group.hpp): each a single GOP of at most a quarter of
  // options.group_bytes waits here, coded, while the waiting ones' raw pixels stay within
  // group_bytes; then a pool thread codes them as a group, and they are stored as a group where
  // that is smaller than their own chunks (a measured choice), and as they are otherwise. Chunks go
  // to the archive in order: a GOP after a group waits in `ordered` until the group is decided.
  // A short sequence is first coded quickly (`quick`): the group is measured against those
  // chunks, and the members are coded in full only where the group loses (docs/performance.md,
  // "Encoding: the losing candidates estimated, not coded"). Lossless, the group's frames are the
  // members' whatever coded them; at a bound they are the quick chunks' reconstructions, within the
  // bound as any. Not with a learned predictor (it has no cheaper choice), nor for one sequence.
  const bool quick_members = options.group_bytes > 0 && sources.size() > 1 &&
                             !(find_predictor(options.predictor) && find_predictor(options.predictor)->learned);
  const bool lossless = options.coding.bound.mode == codecs::BoundMode::Lossless;
  CodingSettings quick = options.coding;
  quick.first_choice_only = true;  // auto: its first choice, `previous`, without the trial
  quick.coded_motion = false;
  quick.zstd_level = 1;
  quick.zstd_win_level = std::min(quick.zstd_win_level, 9);
  const auto short_sequence = [&](const ChunkEntry& entry) {
    const auto& sequence = index.sequences[entry.sequence];
    return options.group_bytes > 0 && entry.first_frame == 0 && entry.frame_count == sequence.frames.size() &&
           sequence.geometry.raw_bytes() * entry.frame_count <= options.group_bytes / 4;
  };
  struct Waiting {
    ChunkEntry entry;
    EncodedGop gop;
    bool quick = false;  // coded with `quick`: to be coded again unless the group holds it
    GopFrames input;     // at a bound, a quick member's frames (lossless: its reconstruction)
  };
  struct GroupResult {
    std::optional<std::vector<std::uint8_t>> holder;  // the group's chunk, where it is smaller
    ChunkStats stats;
  };
  // A job's members not held by a group, coded again in full where they were coded quickly.
  const auto code_in_full = [predictor, coding = options.coding](const FrameShape& shape, std::vector<Waiting>& members) {
    for (auto& w : members) {
      if (!w.quick) continue;
      const GopFrames* frames = w.input.empty() ? &w.gop.reconstruction : &w.input;
      w.gop = std::move(encode_gops(*predictor, shape, std::span(&frames, 1), coding).front());
      w.quick = false;
    }
  };
  struct Ordered {
    // One GOP stored as it is, or a group's members, shared with the job that codes them.
    std::shared_ptr<std::vector<Waiting>> members;
    std::optional<std::future<GroupResult>> group;  // where members are a group being coded
  };
  std::deque<Ordered> ordered;
  std::size_t groups_in_flight = 0;
  std::vector<Waiting> group;
  std::uint64_t group_raw = 0, group_pixels = 0;
  // Stores the front of `ordered` where it is decided, or, with `wait`, once it is.
  auto store_front = [&](bool wait) {
    Ordered& front = ordered.front();
    const auto& members = *front.members;
    if (front.group) {
      if (!wait && front.group->wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
      GroupResult result = front.group->get();
      --groups_in_flight;
      if (result.holder) {
        for (std::size_t k = 0; k < members.size(); ++k) {
          ChunkStats member_stats = result.stats;
          if (k > 0) member_stats.symbol_bytes = 0;
          member_stats.grouped = true, member_stats.member = std::uint32_t(k);
          store(members[k].entry, k == 0 ? std::move(*result.holder) : group_member_chunk(k), member_stats,
                members[k].gop.reconstruction);
        }
        ordered.pop_front();
        return true;
      }
    }
    for (const auto& w : members) store(w.entry, w.gop.bytes, w.gop.stats, w.gop.reconstruction);
    ordered.pop_front();
    return true;
  };
  // Stores what is decided; GOPs waiting behind a group hold their frames, at most as many as
  // the batches in flight.
  auto drain = [&] {
    while (!ordered.empty() && store_front(ordered.size() > in_flight)) {
    }
  };
  auto close_group = [&] {
    Ordered item;
    item.members = std::make_shared<std::vector<Waiting>>(std::move(group));
    group = {};
    group_raw = group_pixels = 0;
    const auto& members = *item.members;
    // The members' own chunks; the grouped ones but the group's chunk, and each entry's member number.
    std::uint64_t own = 0, grouped = members.size();
    for (const auto& w : members) own += w.gop.bytes.size();
    for (std::size_t k = 1; k < members.size(); ++k) grouped += group_member_chunk(k).size();
    const bool tried = members.size() >= 2 && own > grouped;
    const bool any_quick = std::any_of(members.begin(), members.end(), [](const Waiting& w) { return w.quick; });
    if (tried || any_quick) {
      item.group = pool.submit([code_in_full, shape = shape_of(index.sequences[members[0].entry.sequence].geometry),
                                waiting = item.members, budget = tried ? own - grouped : 0] {
        GroupResult result;
        if (budget > 0) {
          std::vector<const GopFrames*> frames;
          for (const auto& w : *waiting) frames.push_back(&w.gop.reconstruction);
          result.holder = encode_group(shape, frames, budget, result.stats);
        }
        if (!result.holder) code_in_full(shape, *waiting);
        return result;
      });
      ++groups_in_flight;
    }
    if (!members.empty()) ordered.push_back(std::move(item));
    // Each group in flight holds its members' frames: at most one a thread.
    while (groups_in_flight > threads) store_front(true);
  };
  auto finish_oldest = [&] {
    PendingBatch p = std::move(pending.front());
    pending.pop_front();
    std::vector<EncodedGop> gops = p.result.get();
    for (std::size_t g = 0; g < gops.size(); ++g) {
      const ChunkEntry& entry = p.entries[g];
      const auto& sequence = index.sequences[entry.sequence];
      const std::uint64_t raw = sequence.geometry.raw_bytes() * entry.frame_count;
      const std::uint64_t pixels = sequence.geometry.pixel_count() * entry.frame_count;
      const bool is_short = short_sequence(entry);
      if (!group.empty() && (!is_short || !(index.sequences[group[0].entry.sequence].geometry == sequence.geometry) ||
                             group_raw + raw > options.group_bytes || group_pixels + pixels > ArchiveLimits{}.max_chunk_pixels))
        close_group();
      if (is_short) {
        group.push_back({entry, std::move(gops[g]), p.quick, p.frames ? (*p.frames)[g] : GopFrames()});
        group_raw += raw, group_pixels += pixels;
      } else {
        ordered.push_back({std::make_shared<std::vector<Waiting>>(), std::nullopt});
        ordered.back().members->push_back({entry, std::move(gops[g]), false, {}});
      }
    }
    drain();
    if (options.progress) options.progress(done, total);
  };

  // GOPs of the current sequence wait here until a batch is full (a network codes them together).
  std::vector<GopFrames> batch;
  std::vector<ChunkEntry> batch_entries;
  FrameShape batch_shape;
  auto flush = [&] {
    if (batch.empty()) return;
    PendingBatch p;
    p.entries = std::move(batch_entries);
    auto shared = std::make_shared<std::vector<GopFrames>>(std::move(batch));
    batch = {};
    batch_entries = {};
    // A short sequence is a batch of its own (its one GOP).
    p.quick = quick_members && p.entries.size() == 1 && short_sequence(p.entries[0]);
    if (p.quick && !lossless) p.frames = shared;
    p.result = pool.submit([predictor, shape = batch_shape, shared, coding = p.quick ? quick : options.coding] {
      std::vector<const GopFrames*> gops;
      for (const auto& g : *shared) gops.push_back(&g);
      return encode_gops(*predictor, shape, gops, coding);
    });
    pending.push_back(std::move(p));
    // Bounded look-ahead keeps memory to a few batches per thread, or to what the memory holds.
    while (pending.size() > in_flight) finish_oldest();
  };

  auto submit = [&](std::size_t sequence, std::size_t first, const FrameShape& shape, GopFrames&& frames) {
    ChunkEntry entry;
    entry.sequence = sequence;
    entry.first_frame = first;
    entry.frame_count = frames.size();
    batch_shape = shape;
    batch.push_back(std::move(frames));
    batch_entries.push_back(entry);
    if (batch.size() >= batch_size) flush();
  };

  const bool dynamic = options.gop.kind == GopKind::Dynamic && !predictor->intra_only();
  for (std::size_t s = 0; s < sources.size(); ++s) {
    auto& source = *sources[s];
    // A chunk must stay within the reader's limit: very large frames get shorter GOPs.
    const std::size_t max_gop = std::min<std::uint64_t>(std::max<std::uint64_t>(1, options.gop.size), max_gop_frames(source.geometry()));
    SequenceEntry entry;
    entry.name = source.name();
    entry.geometry = source.geometry();
    entry.frames.resize(source.frame_count());
    index.sequences.push_back(std::move(entry));
    const FrameShape shape = shape_of(source.geometry());
    // Batches as large as the predictor likes, but small enough that every thread gets work.
    const std::size_t gops_here = dynamic ? source.frame_count() : (source.frame_count() + max_gop - 1) / max_gop;
    batch_size = std::clamp<std::size_t>((gops_here + threads - 1) / threads, 1, std::max<std::size_t>(1, predictor->preferred_batch()));
    const std::uint64_t gop_frames = std::min<std::uint64_t>(max_gop, source.frame_count());
    const std::uint64_t batch_bytes = gop_memory_bytes(source.geometry(), gop_frames) * batch_size;
    in_flight = batches_in_flight(threads, batch_bytes, available);
    if (in_flight < 2 * std::size_t(threads) &&
        (report.batches_in_flight == 0 || in_flight < report.batches_in_flight)) {
      report.batches_in_flight = in_flight;
      report.batch_memory_bytes = batch_bytes;
      report.available_memory_bytes = available;
    }
    GopFrames current;
    std::size_t first = 0;
    Grouper grouper(*predictor, shape, options.gop, max_gop);
    for (std::size_t i = 0; i < source.frame_count(); ++i) {
      Frame frame = source.read(i);
      if (!safe_frame_name(frame.name))
        throw InputError("frame '" + frame.name + "' of " + (source.name().empty() ? "the input" : "sequence '" + source.name() + "'") +
                         ": the name could not be restored as a file name");
      index.sequences[s].frames[i].name = frame.name;
      index.sequences[s].frames[i].format = frame.format;
      if (grouper.next(frame.pixels)) {
        submit(s, first, shape, std::move(current));
        current = {};
        first = i;
      }
      current.push_back(std::move(frame.pixels));
    }
    if (!current.empty()) submit(s, first, shape, std::move(current));
    flush();
  }
  while (!pending.empty()) finish_oldest();
  close_group();
  while (!ordered.empty()) store_front(true);

  report.sequences = index.sequences.size();
  report.frames = index.frame_count();
  report.chunks = index.chunks.size();
  report.raw_bytes = index.raw_bytes();
  report.archive_bytes = writer.finish(index);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace tezip
