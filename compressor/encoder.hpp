#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compressor/gop_codec.hpp"
#include "format/archive.hpp"
#include "io/source.hpp"
#include "predictor/adaptation.hpp"
#include "predictor/learned_predictor.hpp"

namespace tezip {

// Called with raw pixel bytes done and in total.
using ProgressFn = std::function<void(std::uint64_t done, std::uint64_t total)>;

struct CompressOptions {
  CodingSettings coding;
  std::string predictor = "auto";  // auto, intra, previous, linear, motion or prednet
  LearnedPredictorOptions learned;     // --predictor prednet
  // --adapt: compress() first adapts the PredNet (learned.model, or adapt.net from scratch when
  // adapt_from_scratch) to a sample of the input for adapt.seconds (adapt_auto: auto_adapt_seconds),
  // then codes with the result and embeds it. Needs libtorch.
  AdaptOptions adapt;
  bool adapt_auto = false;
  bool adapt_from_scratch = false;
  std::uint64_t adapt_max_values = std::uint64_t(48) << 20;  // the sample's size (adapt_sample)
  // --adapt also codes the input with the default classical choice (`auto`) and keeps the smaller
  // archive, the model it embeds counted: adapting never costs bytes. false: always the adapted one.
  bool adapt_keep_smaller = true;
  bool adapts() const { return adapt_auto || adapt.seconds > 0; }
  GopPolicy gop;
  // Sequences of a single GOP, each at most a quarter of this many raw bytes, are stored in groups
  // of up to this many where that is smaller (compressor/chunk_group.hpp); 0: never.
  std::uint64_t group_bytes = std::uint64_t(4) << 20;
  SourceOptions source;  // how INPUT is read (compress(); compress_sources takes open sources)
  unsigned threads = 0;  // 0: all cores
  bool overwrite = false;
  ProgressFn progress;
};

struct CompressReport {
  std::uint64_t sequences = 0;
  std::uint64_t frames = 0;
  std::uint64_t chunks = 0;
  std::uint64_t raw_bytes = 0;
  std::uint64_t archive_bytes = 0;
  double seconds = 0;  // adaptation included
  // --adapt: training time, and the kept model's next-frame MSE on held-out clips of the input
  // against the previous frame's.
  double adapt_seconds = 0, adapt_val_mse = 0, adapt_previous_mse = 0;
  // adapt_keep_smaller: both archives' sizes (the adapted one with its model), and whether the
  // classical one was smaller and kept.
  std::uint64_t adapted_bytes = 0, classical_bytes = 0;
  bool kept_classical = false;
  // Where the memory available (compressor/memory_budget.hpp) held fewer GOP batches than the
  // threads would code at once: the most that were in flight (else 0), each batch's estimate, and
  // the memory that was available then.
  std::size_t batches_in_flight = 0;
  std::uint64_t batch_memory_bytes = 0, available_memory_bytes = 0;
};

// Compresses INPUT (see open_sources) into the archive `output`, written atomically.
CompressReport compress(const std::filesystem::path& input, const std::filesystem::path& output,
                        const CompressOptions& options);
// Compresses the given sequences, in this order, into the archive `output` (written atomically):
// a batch job compresses a chosen share of a dataset's sources this way.
CompressReport compress_sources(std::vector<std::unique_ptr<SequenceSource>> sources,
                                const std::filesystem::path& output, const CompressOptions& options);

// --adapt: trains the PredNet that will code INPUT on a sample of its frames (adapt_sample), as
// `options` asks (options.adapt, adapt_auto, adapt_from_scratch, learned.model), on `threads`
// torch threads. Throws InputError (unusable input or model), LearnedModuleError without libtorch
// (its message names `purpose`, the command that asked).
AdaptResult adapt_to_input(const std::filesystem::path& input, const CompressOptions& options, unsigned threads,
                           const std::string& purpose = "tezip compress --adapt (training)");

// The most worker threads tezip starts; `-T` above it is refused by the CLI.
inline constexpr unsigned kMaxThreads = 1024;
// 0: one per core; otherwise `requested`, at most kMaxThreads and 4 per core.
unsigned resolve_threads(unsigned requested);

// The predictor `options` name. Throws std::invalid_argument (unknown name, bad options) or
// InputError (an unusable model file).
std::unique_ptr<Predictor> make_predictor(const CompressOptions& options);

}  // namespace tezip
