#include "compressor/encoder.hpp"

#include <chrono>
#include <deque>
#include <future>
#include <thread>

#include "compressor/source.hpp"
#include "compressor/thread_pool.hpp"

namespace tezip {
namespace {

// A GOP handed to a worker, and where its result goes in the index.
struct PendingGop {
  std::future<EncodedGop> result;
  ChunkEntry entry;
};

}  // namespace

unsigned resolve_threads(unsigned requested) {
  if (requested > 0) return requested;
  return std::max(1u, std::thread::hardware_concurrency());
}

CompressReport compress(const std::filesystem::path& input, const std::filesystem::path& output,
                        const CompressOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto report = compress_sources(open_sources(input), output, options);
  // Opening the input (a video is decoded to count its frames) is part of the work.
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

CompressReport compress_sources(std::vector<std::unique_ptr<SequenceSource>> sources,
                                const std::filesystem::path& output, const CompressOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::shared_ptr<const Predictor> predictor = make_classical_predictor(options.predictor);

  ArchiveIndex index;
  index.settings.coding = options.coding;
  index.settings.predictor = predictor->identity();
  index.settings.gop = options.gop;
  index.settings.writer = "tezip 0.1";
  std::uint64_t total = 0;
  for (const auto& s : sources) total += s->geometry().raw_bytes() * s->frame_count();

  ArchiveWriter writer(output, options.overwrite);
  const unsigned threads = resolve_threads(options.threads);
  ThreadPool pool(threads);
  std::deque<PendingGop> pending;
  std::uint64_t done = 0;

  auto finish_oldest = [&] {
    PendingGop p = std::move(pending.front());
    pending.pop_front();
    EncodedGop gop = p.result.get();
    writer.append_chunk(gop.bytes, p.entry);
    p.entry.stats = gop.stats;
    auto& sequence = index.sequences[p.entry.sequence];
    for (std::size_t k = 0; k < gop.reconstruction.size(); ++k)
      sequence.frames[p.entry.first_frame + k].hash = hash_pixels(gop.reconstruction[k]);
    index.chunks.push_back(p.entry);
    done += sequence.geometry.raw_bytes() * p.entry.frame_count;
    if (options.progress) options.progress(done, total);
  };

  auto submit = [&](std::size_t sequence, std::size_t first, const FrameShape& shape, GopFrames&& frames) {
    PendingGop p;
    p.entry.sequence = sequence;
    p.entry.first_frame = first;
    p.entry.frame_count = frames.size();
    auto shared = std::make_shared<GopFrames>(std::move(frames));
    p.result = pool.submit([predictor, shape, shared, coding = options.coding] {
      const GopFrames* gops[] = {shared.get()};
      return std::move(encode_gops(*predictor, shape, gops, coding).front());
    });
    pending.push_back(std::move(p));
    // Bounded look-ahead keeps memory to a few GOPs per thread.
    while (pending.size() > 2 * std::size_t(threads)) finish_oldest();
  };

  const bool dynamic = options.gop.kind == GopKind::Dynamic && !predictor->intra_only();
  const std::size_t max_gop = std::max<std::uint64_t>(1, options.gop.size);
  for (std::size_t s = 0; s < sources.size(); ++s) {
    auto& source = *sources[s];
    SequenceEntry entry;
    entry.name = source.name();
    entry.geometry = source.geometry();
    entry.frames.resize(source.frame_count());
    index.sequences.push_back(std::move(entry));
    const FrameShape shape = shape_of(source.geometry());
    GopFrames current;
    std::size_t first = 0;
    std::unique_ptr<GopState> probe;  // Dynamic windows: the forecast on original frames decides the cut
    std::vector<std::uint16_t> forecast(shape.size());
    for (std::size_t i = 0; i < source.frame_count(); ++i) {
      Frame frame = source.read(i);
      index.sequences[s].frames[i].name = frame.name;
      index.sequences[s].frames[i].format = frame.format;
      bool cut = current.size() >= max_gop;
      if (dynamic && !current.empty() && !cut) {
        GopState* states[] = {probe.get()};
        std::span<std::uint16_t> views[] = {forecast};
        predictor->forecast(states, views);
        cut = mean_squared_error(forecast, frame.pixels, shape.max_value) > options.gop.mse_threshold;
      }
      if (cut) {
        submit(s, first, shape, std::move(current));
        current = {};
        first = i;
      }
      if (dynamic) {
        if (current.empty()) {
          probe = predictor->begin_gop(shape, frame.pixels);
        } else {
          GopState* states[] = {probe.get()};
          std::span<const std::uint16_t> views[] = {frame.pixels};
          predictor->observe(states, views);
        }
      }
      current.push_back(std::move(frame.pixels));
    }
    if (!current.empty()) submit(s, first, shape, std::move(current));
  }
  while (!pending.empty()) finish_oldest();

  CompressReport report;
  report.sequences = index.sequences.size();
  report.frames = index.frame_count();
  report.chunks = index.chunks.size();
  report.raw_bytes = index.raw_bytes();
  report.archive_bytes = writer.finish(index);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace tezip
