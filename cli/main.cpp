// The tezip command: parses options, reports progress, maps errors to exit codes
// (0 ok, 1 usage, 2 input or data error). All the work happens in compressor/.
#include <cxxopts.hpp>
#include <malloc.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/interrupt_cleanup.hpp"
#include "cli/progress_bar.hpp"
#include "cli/train_command.hpp"
#include "codecs/codec_error.hpp"
#include "codecs/simd.hpp"
#include "batch/batch.hpp"
#include "format/dataset_index.hpp"
#include "compressor/decoder.hpp"
#include "compressor/encoder.hpp"
#include "compressor/gop_codec.hpp"
#include "format/errors.hpp"
#include "format/file_format.hpp"
#include "batch/mpi_context.hpp"
#include "io/atomic_file.hpp"
#include "io/output_path.hpp"
#include "predictor/learned_predictor.hpp"
#include "predictor/model_file.hpp"
#include "predictor/registry.hpp"

namespace tezip::cli {
namespace {

constexpr int kOk = 0, kUsage = 1, kDataError = 2;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char* kUsageText =
    "usage: tezip <command> [options]\n"
    "  compress INPUT -o OUT.tzp    compress a folder of frames, a dataset folder, a video or a .npy array\n"
    "  decompress IN.tzp -o DIR     restore the frames with their original names and formats\n"
    "  info IN.tzp                  sequences, frames, ratio, settings, per-chunk statistics\n"
    "  verify IN.tzp [--against INPUT]  check every checksum; with the original, the error bound\n"
    "  batch INPUT -o OUTDIR        compress a dataset as shards, under mpirun or as Slurm array tasks\n"
    "  train DATASET... -o MODEL    train a PredNet predictor on sequences of frames (docs/training.md)\n"
    "  convert-model IN.tzm -o OUT.tzm  rewrite a version-1 model file (torch::save weights) as version 2,\n"
    "                                   or with --compact BITS any model as version 3 (about 4x smaller);\n"
    "                                   IN may be an archive written with --adapt: its model is extracted\n"
    "IN.tzp may also be the index.json a batch job writes: its shards then act as one archive.\n"
    "--predictor prednet with the default --arithmetic exact needs no libtorch. What does: train,\n"
    "convert-model, --arithmetic float32 (and its archives), version-1 model files"
#if TEZIP_BUILT_WITH_TORCH
    ".\n"
#else
    ";\nthis tezip was built without libtorch (-DTEZIP_TORCH=OFF), so they are not available.\n"
#endif
    "Run 'tezip <command> --help' for the options of a command.\n";

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  std::ostringstream out;
  out.precision(u == 0 ? 0 : 2);
  out << std::fixed << bytes << ' ' << units[u];
  return out.str();
}

// Options every command shares.
void add_common(cxxopts::Options& options) {
  options.add_options()("h,help", "show this help")("q,quiet", "no progress and no summary")(
      "v,verbose", "more detail")("T,threads", "worker threads (default: all cores)", cxxopts::value<unsigned>()->default_value("0"));
}

// -T: 0 is one thread per core; more than kMaxThreads is refused rather than tried (each thread
// costs memory, and the system refuses threads long before 100000).
unsigned threads_of(const cxxopts::ParseResult& args) {
  const unsigned threads = args["threads"].as<unsigned>();
  if (threads > kMaxThreads)
    throw UsageError("-T " + std::to_string(threads) + ": at most " + std::to_string(kMaxThreads) + " threads (0: one per core)");
  return threads;
}

// --npy-layout, for the commands that read inputs.
void add_source_options(cxxopts::Options& options) {
  options.add_options()("npy-layout",
                        "how a 4-D .npy array is read: THWC (frames of C=1 or 3 channels), NTHW (N gray sequences) or auto "
                        "(THWC when the last dimension is 1 or 3)",
                        cxxopts::value<std::string>()->default_value("auto"));
}

SourceOptions source_options(const cxxopts::ParseResult& args) {
  SourceOptions source;
  try {
    source.npy_layout = parse_npy_layout(args["npy-layout"].as<std::string>());
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return source;
}

cxxopts::ParseResult parse(cxxopts::Options& options, int argc, char** argv, const char* positional_help) {
  options.positional_help(positional_help);
  try {
    auto result = options.parse(argc, argv);
    if (result.count("help")) {
      std::cout << options.help() << '\n';
      std::exit(kOk);
    }
    if (result.unmatched().size() > 0) throw UsageError("unexpected argument '" + result.unmatched().front() + "'");
    return result;
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(e.what());
  }
}

std::vector<double> parse_numbers(const std::string& text) {
  std::vector<double> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    double v;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      throw UsageError("--bound: '" + text + "' is not a number or a pair of numbers");
    }
    if (used != item.size() || !std::isfinite(v) || v < 0) throw UsageError("--bound: '" + item + "' must be a number >= 0");
    values.push_back(v);
  }
  return values;
}

codecs::ErrorBound parse_bound(const std::string& mode_name, const std::string& bound_text) {
  codecs::ErrorBound bound;
  try {
    bound.mode = codecs::parse_bound_mode(mode_name);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const auto values = bound_text.empty() ? std::vector<double>{} : parse_numbers(bound_text);
  const std::size_t wanted = bound.mode == codecs::BoundMode::Lossless ? 0 : bound.mode == codecs::BoundMode::AbsRel ? 2 : 1;
  if (values.size() != wanted) {
    if (wanted == 0) throw UsageError("--bound has no meaning with --mode lossless");
    throw UsageError("--mode " + mode_name + " needs --bound " + (wanted == 2 ? "E,R" : mode_name == "abs" ? "E" : "R"));
  }
  switch (bound.mode) {
    case codecs::BoundMode::Abs: bound.abs = values[0]; break;
    case codecs::BoundMode::Rel:
    case codecs::BoundMode::PwRel: bound.rel = values[0]; break;
    case codecs::BoundMode::AbsRel: bound.abs = values[0]; bound.rel = values[1]; break;
    case codecs::BoundMode::Lossless: break;
  }
  return bound;
}


QuantizerKind default_quantizer(codecs::BoundMode mode) {
  // Measured in docs/defaults.md ("Quantizer per error mode"): the linear quantizer wins in every mode on camera and video data.
  (void)mode;
  return QuantizerKind::Linear;
}

// The options `compress` and `batch` share: how to code the frames.
void add_coding_options(cxxopts::Options& options) {
  options.add_options()("mode", "lossless, abs, rel, absrel or pwrel", cxxopts::value<std::string>()->default_value("lossless"))(
      "bound", "E (abs), R (rel, pwrel) or E,R (absrel)", cxxopts::value<std::string>()->default_value(""))(
      "predictor",
      "auto (per GOP, measured: previous, intra, linear or bidirectional), intra, previous, linear, motion, bidirectional or prednet",
      cxxopts::value<std::string>()->default_value("auto"))(
      "model", "prednet: the model file (default: models/prednet-small.tzm)", cxxopts::value<std::string>())(
      "arithmetic", "prednet: exact (integer, decodes bit for bit on any machine) or float32 (libtorch; decodes only where the CPU kernels match)",
      cxxopts::value<std::string>()->default_value("exact"))(
      "loop", "prednet: closed (fed the reconstructed frames) or open (TEZIP's window mode: fed its own forecasts after the warm-up)",
      cxxopts::value<std::string>()->default_value("closed"))(
      "window", "prednet: TEZIP's static window prediction: GOPs of N frames, open loop (= --gop N --loop open)", cxxopts::value<std::uint64_t>())(
      "warmup", "prednet: key frames at the start of each GOP", cxxopts::value<std::size_t>()->default_value("1"))(
      "batch", "prednet: GOPs per network call", cxxopts::value<std::size_t>()->default_value("8"))(
      "embed-model", "prednet: store the model in the archive (~200 KB for the shipped one), so that decoding needs no model file")(
      "quantizer", "linear (SZ-style) or interval (TEZIP's); default by mode", cxxopts::value<std::string>())(
      "gop", "frames per GOP (static window); the longest GOP with --mse-threshold",
      cxxopts::value<std::uint64_t>()->default_value("32"))(
      "group-mb", "sequences of one GOP, each at most a quarter of this many MB of pixels, stored in groups of up to this "
      "many MB where that is smaller (random access per group; 0: never)", cxxopts::value<double>()->default_value("4"))(
      "mse-threshold", "dynamic window: a new key frame when the forecast's MSE (pixels scaled to [0, 1]) passes T, e.g. 0.002", cxxopts::value<double>())(
      "level", "zstd level 1-22 of the trial against rANS (a stream zstd wins is compressed again at level 19)",
      cxxopts::value<int>()->default_value("9"))(
      "coder", "fast (smaller of zstd and static context rANS, per stream), best (adds the adaptive coder and LZMA: "
      "smaller on sparse and rendered data, decodes at 0.6x) or zstd",
      cxxopts::value<std::string>()->default_value("fast"))(
      "profile", "default; fast: --predictor previous --motion off --level 1, zstd level 9 where zstd wins (about 3-4x "
      "faster encoding, 6-12% larger on lossless video, more at a bound and on depth maps; explicit options win); or max: --coder best, zstd level 22 where "
      "zstd wins, and auto codes each GOP whole with every choice (about 5x the encoding time; docs/defaults.md)",
      cxxopts::value<std::string>()->default_value("default"))(
      "motion", "coded block motion against the previous frame, used per plane where it pays: on or off",
      cxxopts::value<std::string>()->default_value("on"));
}

CompressOptions coding_options(const cxxopts::ParseResult& args) {
  CompressOptions compress;
  compress.coding.bound = parse_bound(args["mode"].as<std::string>(), args["bound"].as<std::string>());
  compress.coding.quantizer = default_quantizer(compress.coding.bound.mode);
  if (args.count("quantizer")) {
    const auto q = args["quantizer"].as<std::string>();
    if (q == "linear") compress.coding.quantizer = QuantizerKind::Linear;
    else if (q == "interval") compress.coding.quantizer = QuantizerKind::Interval;
    else throw UsageError("--quantizer must be linear or interval");
  }
  const auto profile = args["profile"].as<std::string>();
  if (profile != "default" && profile != "max" && profile != "fast") throw UsageError("--profile must be fast, default or max");
  const bool max = profile == "max", fast = profile == "fast";
  compress.coding.zstd_level = fast && !args.count("level") ? 1 : args["level"].as<int>();
  if (compress.coding.zstd_level < 1 || compress.coding.zstd_level > 22) throw UsageError("--level must be 1-22");
  // --profile fast (docs/performance.md, "A fast encoding profile"): `previous` without coded
  // motion (auto's trials and the motion search were 30% and 29% of vtest's default encoding), zstd
  // tried once at level 1 (no level-1 probe, no level-6 gate), and where zstd wins or comes close,
  // level 9 rather than 19: level 19 took mire2's fast encoding from 1.7 to 3.3 s for the same
  // archive (box: 3.2 to 10.8 s for 1.1%), and no stronger pass at all made Moving MNIST 4% larger.
  if (fast) compress.coding.zstd_win_level = 9;
  const auto coder = args.count("coder") || !max ? args["coder"].as<std::string>() : std::string("best");
  if (coder != "fast" && coder != "best" && coder != "zstd") throw UsageError("--coder must be fast, best or zstd");
  if (max) {
    compress.coding.zstd_win_level = 22;
    compress.coding.whole_gop_trials = true;
    compress.coding.interpolate_every_plane = true;
  }
  compress.coding.adaptive_coder = coder == "best";
  compress.coding.lzma_coder = coder == "best";
  compress.coding.rans_coder = coder != "zstd";
  const auto motion = args["motion"].as<std::string>();
  if (motion != "on" && motion != "off") throw UsageError("--motion must be on or off");
  compress.coding.coded_motion = motion == "on" && !(fast && !args.count("motion"));
  compress.predictor = fast && !args.count("predictor") ? std::string("previous") : args["predictor"].as<std::string>();
  const PredictorInfo* chosen = find_predictor(compress.predictor);
  if (chosen == nullptr)
    throw UsageError("--predictor: unknown predictor '" + compress.predictor + "' (" + predictor_names() + ")");
  const bool prednet = chosen->learned;
  if (!prednet) {
    for (const char* name : {"model", "window"})
      if (args.count(name)) throw UsageError(std::string("--") + name + " needs --predictor prednet");
  }
  if (args.count("model")) compress.learned.model = args["model"].as<std::string>();
  compress.learned.embed = args.count("embed-model") > 0;
  if (compress.learned.embed && !prednet) throw UsageError("--embed-model needs --predictor prednet");
  compress.learned.arithmetic = args["arithmetic"].as<std::string>();
  if (compress.learned.arithmetic != "exact" && compress.learned.arithmetic != "float32")
    throw UsageError("--arithmetic must be exact or float32");
  const auto loop = args["loop"].as<std::string>();
  if (loop != "closed" && loop != "open") throw UsageError("--loop must be closed or open");
  compress.learned.open_loop = loop == "open" || args.count("window");
  compress.learned.warmup = args["warmup"].as<std::size_t>();
  if (compress.learned.warmup < 1) throw UsageError("--warmup must be at least 1");
  compress.learned.batch = std::max<std::size_t>(1, args["batch"].as<std::size_t>());
  compress.gop.size = args["gop"].as<std::uint64_t>();
  if (args.count("window")) {
    if (args["gop"].count()) throw UsageError("give --window or --gop, not both");
    compress.gop.size = args["window"].as<std::uint64_t>();
  }
  if (compress.gop.size == 0) throw UsageError("--gop must be at least 1");
  if (args.count("mse-threshold")) {
    compress.gop.kind = GopKind::Dynamic;
    compress.gop.mse_threshold = args["mse-threshold"].as<double>();
    if (!(compress.gop.mse_threshold >= 0)) throw UsageError("--mse-threshold must be >= 0");
    if (!args["gop"].count()) compress.gop.size = 64;
  }
  const double group_mb = args["group-mb"].as<double>();
  if (!(group_mb >= 0 && group_mb <= 4096)) throw UsageError("--group-mb must be in [0, 4096]");
  compress.group_bytes = std::uint64_t(group_mb * (1 << 20));
  compress.threads = threads_of(args);
  compress.source = source_options(args);
  return compress;
}

// --adapt and the options that go with it (compress and batch).
void add_adapt_options(cxxopts::Options& options, const std::string& then) {
  options.add_options()(
      "adapt", "prednet: first fine-tune the model (--model, default the shipped one) on clips of INPUT for SECONDS, or auto "
      "(about the time coding INPUT takes), " + then + "; needs libtorch",
      cxxopts::value<std::string>())(
      "stack", "prednet --adapt: train this stack (e.g. 1,4,8,16) from random weights instead of fine-tuning",
      cxxopts::value<std::string>())(
      "forecast", "prednet --adapt: residual (a correction to the previous frame, starts at --predictor previous) or frame (PredNet's own)",
      cxxopts::value<std::string>()->default_value("residual"))(
      "seed", "prednet --adapt: the seed of the clips, crops and random weights", cxxopts::value<std::uint64_t>()->default_value("1"))(
      "weight-bits", "prednet --adapt: the embedded model's weights rounded to BITS bits of their channel's scale (2..16; 0: exact)",
      cxxopts::value<int>()->default_value("8"), "BITS");
}

// compress only: batch shards share one model, adapted before any shard is coded.
void add_keep_adapted_option(cxxopts::Options& options) {
  options.add_options()("keep-adapted", "prednet --adapt: keep the adapted PredNet's archive even where --predictor auto's, "
                                        "which --adapt also codes, is smaller");
}

void adapt_options(const cxxopts::ParseResult& args, CompressOptions& compress) {
  if (args.count("adapt")) {
    if (compress.predictor != "prednet") throw UsageError("--adapt needs --predictor prednet");
    if (compress.learned.arithmetic != "exact") throw UsageError("--adapt codes with --arithmetic exact");
    const auto budget = args["adapt"].as<std::string>();
    if (budget == "auto") {
      compress.adapt_auto = true;
    } else {
      char* end = nullptr;
      compress.adapt.seconds = std::strtod(budget.c_str(), &end);
      if (end == budget.c_str() || *end != '\0' || !(compress.adapt.seconds > 0) || compress.adapt.seconds > 86400)
        throw UsageError("--adapt must be auto or a number of seconds (0 < SECONDS <= 86400)");
    }
    const auto forecast = args["forecast"].as<std::string>();
    if (forecast != "residual" && forecast != "frame") throw UsageError("--forecast must be residual or frame");
    compress.adapt.residual = forecast == "residual";
    compress.adapt.seed = args["seed"].as<std::uint64_t>();
    compress.adapt.weight_bits = args["weight-bits"].as<int>();
    if (compress.adapt.weight_bits != 0 && (compress.adapt.weight_bits < 2 || compress.adapt.weight_bits > 16))
      throw UsageError("--weight-bits takes 0 (exact) or 2..16");
    if (args.count("stack")) {
      if (args.count("model")) throw UsageError("give --model (fine-tune it) or --stack (train from scratch), not both");
      std::vector<int> stack;
      std::stringstream in(args["stack"].as<std::string>());
      for (std::string item; std::getline(in, item, ',');) {
        char* e = nullptr;
        const long v = std::strtol(item.c_str(), &e, 10);
        if (item.empty() || *e != '\0' || v < 1 || v > 1024) throw UsageError("--stack: '" + args["stack"].as<std::string>() + "' is not a list of channel counts");
        stack.push_back(int(v));
      }
      compress.adapt.net.a_channels = stack;
      try {
        compress.adapt.net.validate();
      } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--stack: ") + e.what());
      }
      compress.adapt_from_scratch = true;
    }
    if (!args.count("quiet"))
      compress.adapt.on_epoch = [](const EpochReport& r) {
        std::fprintf(stderr, "adapt: epoch %d  val mse %.6f (previous frame %.6f, x%.3f)  %.1f s%s\n", r.epoch, r.val_mse,
                     r.previous_mse, r.val_mse / r.previous_mse, r.seconds, r.best ? "  *" : "");
      };
  } else {
    for (const char* name : {"stack", "seed"})
      if (args.count(name)) throw UsageError(std::string("--") + name + " needs --adapt");
  }
}

int run_compress(int argc, char** argv) {
  cxxopts::Options options("tezip compress", "Compress a sequence or dataset of frames into a tezip archive.");
  add_common(options);
  options.add_options()("input", "folder of frames, dataset folder, video or .npy", cxxopts::value<std::string>())(
      "o,output", "archive to write", cxxopts::value<std::string>())("f,force", "overwrite the output");
  add_coding_options(options);
  add_adapt_options(options, "then code with it and embed it in the archive");
  add_keep_adapted_option(options);
  add_source_options(options);
  options.parse_positional({"input"});
  const auto args = parse(options, argc, argv, "INPUT -o OUT.tzp");
  if (!args.count("input") || !args.count("output")) throw UsageError("compress needs INPUT and -o OUT.tzp");

  CompressOptions compress = coding_options(args);
  adapt_options(args, compress);
  compress.adapt_keep_smaller = !args.count("keep-adapted");
  compress.overwrite = args.count("force") > 0;
  const bool quiet = args.count("quiet") > 0;
  ProgressBar bar("compress", !quiet);
  compress.progress = [&](std::uint64_t done, std::uint64_t total) { bar.update(done, total); };
  const auto report = tezip::compress(args["input"].as<std::string>(), args["output"].as<std::string>(), compress);
  if (!quiet) {
    std::printf("%s: %llu sequences, %llu frames, %s -> %s, ratio %.3f, %.1f MB/s\n", args["output"].as<std::string>().c_str(),
                (unsigned long long)report.sequences, (unsigned long long)report.frames, human_bytes(double(report.raw_bytes)).c_str(),
                human_bytes(double(report.archive_bytes)).c_str(), double(report.raw_bytes) / double(report.archive_bytes),
                double(report.raw_bytes) / report.seconds / 1e6);
    if (args.count("adapt"))
      std::printf("adapted PredNet in %.1f s: next-frame MSE %.6f on held-out clips, previous frame %.6f (x%.3f)%s\n",
                  report.adapt_seconds, report.adapt_val_mse, report.adapt_previous_mse,
                  report.adapt_val_mse / report.adapt_previous_mse, report.kept_classical ? "" : "; embedded");
    if (report.kept_classical)
      std::printf("note: kept --predictor auto's archive (%s), smaller than the adapted PredNet's with its model (%s); "
                  "--keep-adapted keeps PredNet's\n",
                  human_bytes(double(report.classical_bytes)).c_str(), human_bytes(double(report.adapted_bytes)).c_str());
    else if (report.classical_bytes > 0)
      std::printf("the adapted PredNet's archive, its model included, is %.2f%% smaller than --predictor auto's (%s)\n",
                  100.0 * (1.0 - double(report.adapted_bytes) / double(report.classical_bytes)),
                  human_bytes(double(report.classical_bytes)).c_str());
    else if (args.count("adapt") && !(report.adapt_val_mse < report.adapt_previous_mse))
      std::printf("note: the adapted model does not beat the previous frame here; --predictor auto is likely smaller and faster\n");
    if (report.batches_in_flight > 0)
      std::printf("note: coded %zu GOP batch%s at a time, not 2 per thread: each needs about %s, and %s of memory was available\n",
                  report.batches_in_flight, report.batches_in_flight == 1 ? "" : "es",
                  human_bytes(double(report.batch_memory_bytes)).c_str(), human_bytes(double(report.available_memory_bytes)).c_str());
  }
  return kOk;
}

void print_summary(const BatchSummary& summary, const std::filesystem::path& index) {
  std::printf("tezip batch: %s: %zu shards, %s -> %s, ratio %.3f\n", index.string().c_str(), summary.shards.size(),
              human_bytes(double(summary.raw_bytes)).c_str(), human_bytes(double(summary.archive_bytes)).c_str(),
              double(summary.raw_bytes) / double(std::max<std::uint64_t>(1, summary.archive_bytes)));
  for (const auto& s : summary.shards)
    std::printf("  %s  worker %u  %zu sequences  %llu frames  %s -> %s  ratio %.3f\n", s.file.c_str(), s.worker, s.sequences,
                (unsigned long long)s.frames, human_bytes(double(s.raw_bytes)).c_str(), human_bytes(double(s.archive_bytes)).c_str(),
                double(s.raw_bytes) / double(std::max<std::uint64_t>(1, s.archive_bytes)));
  for (std::size_t w = 0; w < summary.workers.size(); ++w) {
    const auto& k = summary.workers[w];
    std::printf("  worker %zu: %zu shards, %s -> %s", w, k.shards, human_bytes(double(k.raw_bytes)).c_str(),
                human_bytes(double(k.archive_bytes)).c_str());
    if (k.seconds >= 0) std::printf(", %.2f s", k.seconds);
    std::printf("\n");
  }
  std::printf("  load imbalance (max/mean): %.3f by raw bytes", summary.planned_imbalance);
  if (summary.time_imbalance > 0) std::printf(", %.3f by time", summary.time_imbalance);
  std::printf("\n");
}

int run_batch(int argc, char** argv) {
  cxxopts::Options options("tezip batch",
                           "Compress a dataset as shards, shared among MPI ranks (mpirun, srun) or Slurm array tasks.\n"
                           "Rerun the same command to resume: complete shards are kept, the rest redone.");
  add_common(options);
  options.add_options()("input", "dataset folder, .npy or any input of compress", cxxopts::value<std::string>())(
      "o,output", "folder for the shards and index.json", cxxopts::value<std::string>())(
      "shard-size", "raw bytes per shard (a sequence is never split)",
      cxxopts::value<std::uint64_t>()->default_value(std::to_string(kDefaultShardSize)))(
      "task-id", "this array task, 0-based (default: $SLURM_ARRAY_TASK_ID)", cxxopts::value<unsigned>())(
      "num-tasks", "array tasks in the job (default: $SLURM_ARRAY_TASK_COUNT)", cxxopts::value<unsigned>());
  add_coding_options(options);
  add_adapt_options(options, "on one worker; every worker codes with the result, stored once beside the shards");
  add_source_options(options);
  options.parse_positional({"input"});
  const auto args = parse(options, argc, argv, "INPUT -o OUTDIR");
  if (!args.count("input") || !args.count("output")) throw UsageError("batch needs INPUT and -o OUTDIR");
  BatchOptions batch;
  batch.compress = coding_options(args);
  adapt_options(args, batch.compress);
  batch.shard_size = args["shard-size"].as<std::uint64_t>();
  if (batch.shard_size == 0) throw UsageError("--shard-size must be at least 1");
  const MpiContext mpi;
  WorkerPlace place;
  try {
    place = worker_place(args.count("task-id") ? std::optional(args["task-id"].as<unsigned>()) : std::nullopt,
                         args.count("num-tasks") ? std::optional(args["num-tasks"].as<unsigned>()) : std::nullopt,
                         mpi.rank(), mpi.size());
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const unsigned workers = place.workers, worker = place.worker;
  batch.workers = workers;
  if (batch.compress.threads == 0)  // the ranks on a node share its cores
    batch.compress.threads = std::max(1u, resolve_threads(0) / unsigned(std::max(1, mpi.local_size())));
  const bool quiet = args.count("quiet") > 0;
  const std::filesystem::path output = args["output"].as<std::string>();

  // Every rank runs to the collective below even when its own work failed, so none waits forever.
  std::optional<BatchJob> job;
  WorkerReport report;
  std::string error;
  int status = kOk;
  try {
    job.emplace(args["input"].as<std::string>(), output, batch);
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    error = e.what();
    status = kDataError;
  }
  if (batch.compress.adapts()) {
    // Worker 0 adapts PredNet; the others wait for its model, rank 0 of each MPI job polling the
    // folder (array tasks) and the other ranks waiting on it without spinning (docs/batch.md).
    const bool leader = !mpi.active() || mpi.rank() == 0;
    std::string problem;
    if (leader && job) {
      try {
        if (const auto found = job->find_adapted_model()) {
          if (!quiet) std::printf("tezip batch: worker %u: codes with %s, adapted by an earlier run\n", worker, found->string().c_str());
        } else if (worker == 0) {
          // The node's other ranks wait idle: its cores train, unless -T says otherwise.
          const auto adapted = job->adapt_model(args.count("threads") ? batch.compress.threads : 0);
          if (!quiet)
            std::printf("tezip batch: worker 0: adapted PredNet in %.1f s: next-frame MSE %.6f on held-out clips, previous frame %.6f "
                        "(x%.3f); %s\n",
                        adapted.result.seconds, adapted.result.val_mse, adapted.result.previous_mse,
                        adapted.result.val_mse / adapted.result.previous_mse, adapted.path.string().c_str());
        } else {
          if (!quiet) std::printf("tezip batch: worker %u: waiting for worker 0's adapted PredNet model\n", worker);
          std::fflush(stdout);
          job->wait_for_adapted_model(job->adapt_wait_seconds());
        }
      } catch (const std::exception& e) {
        problem = e.what();
      }
    }
    const bool ready = mpi.root_ok(job && problem.empty());
    if (error.empty() && !ready) error = leader ? problem : "rank 0 could not provide the adapted PredNet model";
    if (error.empty()) {
      try {
        const auto found = job->find_adapted_model();
        if (!found) throw OutputError(output.string() + ": the adapted PredNet model is gone");
        job->use_adapted_model(*found);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    if (!error.empty()) status = kDataError;
  }
  if (error.empty()) try {
    report = job->run_worker(worker, [&](const ShardResult& r) {
      if (!r.redone.empty())
        std::fprintf(stderr, "tezip batch: worker %u: %s redone: %s\n", worker, job->plan().shards[r.shard].file.c_str(),
                     r.redone.c_str());
      if (args.count("verbose"))
        std::printf("tezip batch: worker %u: %s %s, %s -> %s, %.2f s\n", worker, job->plan().shards[r.shard].file.c_str(),
                    r.kept ? "kept" : "written", human_bytes(double(r.raw_bytes)).c_str(),
                    human_bytes(double(r.archive_bytes)).c_str(), r.seconds);
    });
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    error = e.what();
    status = kDataError;
  }
  if (!error.empty()) std::fprintf(stderr, "tezip batch: worker %u of %u: %s\n", worker, workers, error.c_str());
  std::size_t written = 0;
  for (const auto& r : report.shards) written += r.kept ? 0 : 1;
  if (!quiet && error.empty())
    std::printf("tezip batch: worker %u of %u%s: %zu shards (%zu written, %zu kept), %s -> %s, %.2f s\n", worker, workers,
                mpi.active() ? " (MPI)" : "", report.shards.size(), written, report.shards.size() - written,
                human_bytes(double(report.raw_bytes)).c_str(), human_bytes(double(report.archive_bytes)).c_str(), report.seconds);
  std::fflush(stdout);

  const bool all_ok = mpi.all_ok(error.empty());
  const double mine[] = {report.seconds};
  const auto seconds = mpi.gather(mine);
  // Under MPI rank 0 writes the index once every rank is done; array tasks (and ranks without MPI)
  // each try, and whichever finds every shard in place writes it.
  if (!all_ok || !job || (mpi.active() && mpi.rank() != 0)) return all_ok ? kOk : kDataError;
  const auto index = job->write_index_if_complete();
  if (!index) {
    if (!quiet) std::printf("tezip batch: worker %u: other shards are still missing; the last worker writes the index\n", worker);
    return status;
  }
  if (!quiet)
    print_summary(summarize(job->plan(), *index, mpi.active() && workers == unsigned(std::max(1, mpi.size())) ? std::span<const double>(seconds)
                                                                                          : std::span<const double>()),
                  job->index_path());
  return status;
}

int run_decompress(int argc, char** argv) {
  cxxopts::Options options("tezip decompress", "Restore the frames of a tezip archive.");
  add_common(options);
  options.add_options()("input", "archive", cxxopts::value<std::string>())("o,output", "folder to create", cxxopts::value<std::string>())(
      "format", "original (the input's file types where they are lossless) or png",
      cxxopts::value<std::string>()->default_value("original"))("f,force", "replace an existing output folder")(
      "model", "the PredNet model the archive was written with (default: found by its SHA-256 in $TEZIP_MODEL_PATH and models/)",
      cxxopts::value<std::string>());
  options.parse_positional({"input"});
  const auto args = parse(options, argc, argv, "IN.tzp -o DIR");
  if (!args.count("input") || !args.count("output")) throw UsageError("decompress needs IN.tzp and -o DIR");
  DecompressOptions decompress;
  const auto format = args["format"].as<std::string>();
  if (format == "original") decompress.format = OutputFormat::Original;
  else if (format == "png") decompress.format = OutputFormat::Png;
  else throw UsageError("--format must be original or png");
  decompress.threads = threads_of(args);
  if (args.count("model")) decompress.model = args["model"].as<std::string>();
  decompress.overwrite = args.count("force") > 0;
  const bool quiet = args.count("quiet") > 0;
  ProgressBar bar("decompress", !quiet);
  decompress.progress = [&](std::uint64_t done, std::uint64_t total) { bar.update(done, total); };
  const auto report = tezip::decompress(args["input"].as<std::string>(), args["output"].as<std::string>(), decompress);
  if (!quiet)
    std::printf("%s: %llu frames, %s, %.1f MB/s\n", args["output"].as<std::string>().c_str(), (unsigned long long)report.frames,
                human_bytes(double(report.raw_bytes)).c_str(), double(report.raw_bytes) / report.seconds / 1e6);
  return kOk;
}

void print_settings(const ArchiveSettings& s) {
  std::printf("mode:       %s\n", codecs::describe(s.coding.bound).c_str());
  std::printf("predictor:  %s%s%s\n", s.predictor.kind.c_str(), s.predictor.configuration.empty() ? "" : " ",
              s.predictor.configuration.c_str());
  if (!s.predictor.weights_sha256.empty()) std::printf("weights:    sha256 %s\n", s.predictor.weights_sha256.c_str());
  if (!s.predictor.arithmetic.empty())
    std::printf("arithmetic: %s (fingerprint %s)\n", s.predictor.arithmetic.c_str(), s.predictor.fingerprint.c_str());
  std::printf("quantizer:  %s\n", s.coding.quantizer == QuantizerKind::Linear ? "linear" : "interval");
  if (s.gop.kind == GopKind::Static) std::printf("gop:        static, %llu frames\n", (unsigned long long)s.gop.size);
  else std::printf("gop:        dynamic, mse threshold %g, at most %llu frames\n", s.gop.mse_threshold, (unsigned long long)s.gop.size);
  std::string coders;
  if (s.coding.rans_coder) coders += ", rANS";
  if (s.coding.adaptive_coder) coders += ", adaptive";
  if (s.coding.lzma_coder) coders += ", LZMA";
  std::printf("coding:     zstd level %d%s%s\n", s.coding.zstd_level, coders.c_str(), coders.empty() ? "" : " coders");
}

// What `decompress` gives back as files, by recorded format (format/file_format.hpp): said
// exactly, since pixels that are equal do not make files that are.
void print_restoration(const ArchiveIndex& index) {
  std::map<std::string, std::uint64_t> formats;
  for (const auto& s : index.sequences)
    for (const auto& f : s.frames) ++formats[f.format];
  std::string line;
  for (const auto& [format, count] : formats) line += (line.empty() ? "" : ", ") + std::to_string(count) + " " + format;
  std::printf("files:      %s\n", line.c_str());
  bool all_same = true;
  for (const auto& [format, count] : formats)
    if (const auto note = restoration_note(parse_file_format(format)); !note.empty()) {
      std::printf("  %s: %s\n", format.c_str(), note.c_str());
      all_same = false;
    }
  std::printf("  %s as the same kind of file: pixel values, type, bit depth, channels, PNM maxval; not byte for byte "
              "(compression settings, metadata and comments are not kept)\n", all_same ? "all restored" : "the others restored");
}

// A batch job's output: the shards as the index lists them, with the settings of the first.
int print_dataset_info(const std::filesystem::path& input, bool verbose) {
  const auto index = read_dataset_index(input);
  const auto paths = archive_paths(input);
  std::uint64_t raw = 0, bytes = 0, frames = 0, sequences = 0;
  for (const auto& e : index.shards) raw += e.raw_bytes, bytes += e.size, frames += e.frames, sequences += e.sequences.size();
  std::printf("dataset:    %s (%zu shards, %s)\n", input.c_str(), index.shards.size(), human_bytes(double(bytes)).c_str());
  if (!paths.empty()) {
    const ArchiveReader first(paths.front());
    std::printf("written by: %s\n", first.index().settings.writer.c_str());
    print_settings(first.index().settings);
  }
  std::printf("sequences:  %llu, frames: %llu\n", (unsigned long long)sequences, (unsigned long long)frames);
  std::printf("raw:        %s, ratio %.3f\n", human_bytes(double(raw)).c_str(), double(raw) / double(std::max<std::uint64_t>(1, bytes)));
  if (index.model)
    std::printf("model:      %s (%s, adapted by the batch job; counted in no shard)\n", index.model->path.c_str(),
                human_bytes(double(index.model->size)).c_str());
  std::printf("  %-24s %9s %9s %12s %12s %8s\n", "shard", "sequences", "frames", "raw", "bytes", "ratio");
  for (std::size_t i = 0; i < index.shards.size(); ++i) {
    const auto& e = index.shards[i];
    if (i >= 20 && !verbose) {
      std::printf("  ... %zu more shards (-v lists all)\n", index.shards.size() - i);
      break;
    }
    std::printf("  %-24s %9zu %9llu %12s %12s %8.3f\n", e.path.c_str(), e.sequences.size(), (unsigned long long)e.frames,
                human_bytes(double(e.raw_bytes)).c_str(), human_bytes(double(e.size)).c_str(),
                double(e.raw_bytes) / double(std::max<std::uint64_t>(1, e.size)));
    if (verbose)
      for (const auto& name : e.sequences) std::printf("      sequence '%s'\n", name.c_str());
  }
  return kOk;
}

int run_info(int argc, char** argv) {
  cxxopts::Options options("tezip info", "Describe a tezip archive.");
  add_common(options);
  options.add_options()("input", "archive", cxxopts::value<std::string>());
  options.parse_positional({"input"});
  const auto args = parse(options, argc, argv, "IN.tzp");
  if (!args.count("input")) throw UsageError("info needs IN.tzp");
  const std::filesystem::path input = args["input"].as<std::string>();
  const bool verbose = args.count("verbose") > 0;
  if (is_dataset_index(input)) return print_dataset_info(input, verbose);
  const ArchiveReader reader(input);
  const auto& index = reader.index();
  const auto& s = index.settings;
  std::printf("archive:    %s (%s, written by %s)\n", input.c_str(), human_bytes(double(reader.file_size())).c_str(),
              s.writer.c_str());
  print_settings(s);
  std::printf("sequences:  %zu, frames: %llu, chunks: %zu\n", index.sequences.size(), (unsigned long long)index.frame_count(),
              index.chunks.size());
  std::printf("raw:        %s, ratio %.3f\n", human_bytes(double(index.raw_bytes())).c_str(),
              double(index.raw_bytes()) / double(reader.file_size()));
  for (std::size_t i = 0; i < index.sequences.size(); ++i) {
    const auto& q = index.sequences[i];
    if (i >= 20 && !verbose) {
      std::printf("  ... %zu more sequences (-v lists all)\n", index.sequences.size() - i);
      break;
    }
    std::printf("  sequence '%s': %zu frames, %ux%u, %u channel%s, %s\n", q.name.c_str(), q.frames.size(), q.geometry.width,
                q.geometry.height, q.geometry.channels, q.geometry.channels == 1 ? "" : "s", to_string(q.geometry.type).c_str());
  }
  print_restoration(index);
  std::map<codecs::EntropyCoderKind, std::size_t> coders;
  std::size_t pixel_chunks = 0;
  for (const auto& c : index.chunks) c.stats.pixels ? ++pixel_chunks : ++coders[c.stats.coder];
  std::string counts;
  for (const auto kind : codecs::entropy_coders())
    counts += (counts.empty() ? "" : ", ") + std::to_string(coders[kind]) + " " + codecs::coder_name(kind);
  counts += ", " + std::to_string(pixel_chunks) + " pixel-domain (pixels or sparse)";
  std::printf("chunks:     %s\n", counts.c_str());
  // Groups of short sequences: each group's raw bytes, on its first chunk's line.
  std::vector<std::uint64_t> group_raw(index.chunks.size(), 0);
  std::size_t groups = 0, grouped = 0;
  for (std::size_t i = 0; i < index.chunks.size(); ++i) {
    const auto& c = index.chunks[i];
    if (!c.stats.grouped) continue;
    ++grouped, groups += c.stats.member == 0;
    group_raw[i - c.stats.member] += index.sequences[c.sequence].geometry.raw_bytes() * c.frame_count;
  }
  if (groups > 0) std::printf("groups:     %zu, of %zu short sequences (each group in its first chunk)\n", groups, grouped);
  // What each chunk is: a pixel or sparse chunk, or the predictor its GOP took (auto's choice),
  // from its first bytes; the classical predictors are known without a model.
  std::unique_ptr<Predictor> classical;
  try {
    classical = make_classical_predictor(s.predictor.kind);
  } catch (const std::invalid_argument&) {
  }
  std::printf("  %5s %-20s %7s %10s %8s %10s %9s %-13s %s\n", "chunk", "sequence", "frames", "bytes", "ratio", "symbols", "runs",
              "coder", "coded as");
  for (std::size_t i = 0; i < index.chunks.size(); ++i) {
    if (i >= 20 && !verbose) {
      std::printf("  ... %zu more chunks (-v lists all)\n", index.chunks.size() - i);
      break;
    }
    const auto& c = index.chunks[i];
    const auto& q = index.sequences[c.sequence];
    const double raw = c.stats.grouped ? double(group_raw[i]) : double(q.geometry.raw_bytes() * c.frame_count);
    const std::string kind = classical ? chunk_kind(*classical, reader.read_chunk_head(i, kChunkHeadBytes), q.geometry.channels)
                             : c.stats.grouped ? "group" : c.stats.pixels ? "pixels or sparse" : s.predictor.kind;
    char ratio[32] = "-";  // a group's later members: their frames are in its first chunk
    if (raw > 0) std::snprintf(ratio, sizeof ratio, "%.3f", raw / double(c.size));
    std::printf("  %5zu %-20s %3llu-%-3llu %10llu %8s %10llu %9llu %-13s %s\n", i, q.name.empty() ? "." : q.name.c_str(),
                (unsigned long long)c.first_frame, (unsigned long long)(c.first_frame + c.frame_count - 1),
                (unsigned long long)c.size, ratio, (unsigned long long)c.stats.symbol_bytes,
                (unsigned long long)c.stats.run_bytes, codecs::coder_name(c.stats.coder), kind.c_str());
  }
  return kOk;
}

// `tezip convert-model`: a version-1 model file (weights as a torch::save stream, which only
// libtorch reads) rewritten as version 2 (a tensor list), the same float32 values bit for bit; with
// --compact, any model rewritten as version 3 (the compact list), rounded to BITS bits first unless 0.
int run_convert_model(int argc, char** argv) {
  cxxopts::Options options("tezip convert-model",
                           "Rewrite a version-1 PredNet model file as version 2, which tezip reads without libtorch, "
                           "or any model file as version 3, compact.");
  options.add_options()("h,help", "show this help")("q,quiet", "no summary")(
      "input", "model file, or an archive that carries its model", cxxopts::value<std::string>())(
      "o,output", "the model file to write", cxxopts::value<std::string>())("f,force", "overwrite the output")(
      "compact", "write version 3, each weight rounded to BITS significant bits of its channel's scale (2..16; 0: exact)",
      cxxopts::value<int>(), "BITS");
  options.parse_positional({"input"});
  const auto args = parse(options, argc, argv, "IN.tzm -o OUT.tzm [--compact BITS]");
  if (!args.count("input") || !args.count("output")) throw UsageError("convert-model needs IN.tzm and -o OUT.tzm");
  const bool compact = args.count("compact") > 0;
  const int bits = compact ? args["compact"].as<int>() : 0;
  if (compact && bits != 0 && (bits < 2 || bits > 16)) throw UsageError("--compact takes 0 (exact) or 2..16 bits");
  const std::filesystem::path input = args["input"].as<std::string>(), output = args["output"].as<std::string>();
  ModelFile model;
  bool from_archive = false;
  try {
    char magic[8] = {};
    std::ifstream(input, std::ios::binary).read(magic, 8);
    from_archive = std::memcmp(magic, "TZMODEL\n", 8) != 0 && std::filesystem::is_regular_file(input);
    if (from_archive) {  // an archive that carries its model (written with --adapt): extract it
      const auto bytes = ArchiveReader(input).read_embedded_model();
      if (bytes.empty()) throw InputError(input.string() + ": this archive carries no model (archives written with --adapt do)");
      model = parse_model(bytes, input.string() + " (its embedded model)");
    } else {
      model = load_model_file(input);
    }
  } catch (const ModelError& e) {
    throw InputError(e.what());
  }
  if (model.version >= 2 && !compact && !from_archive) {
    if (!args.count("quiet")) std::printf("%s is already model format %u; nothing written\n", input.string().c_str(), model.version);
    return kOk;
  }
  const std::filesystem::path inputs[] = {input};
  check_output_apart(output, inputs);
  check_file_output(output, args.count("force") > 0);
  ModelFile converted;
  try {
    converted = compact ? compact_model(upgrade_model(model, input.string()), bits, input.string())
                        : upgrade_model(model, input.string());  // an embedded model is version 2 or 3 already
  } catch (const ModelError& e) {
    throw InputError(e.what());
  }
  const auto bytes = converted.serialize();
  write_file_atomically(output, bytes);
  if (args.count("quiet")) return kOk;
  if (from_archive && !compact)
    std::printf("%s: the model embedded in %s (format %u), weights sha256 %s\n", output.string().c_str(), input.string().c_str(),
                converted.version, converted.weights_sha256.c_str());
  else if (compact)
    std::printf("%s: model format %u -> 3 (%s), %zu -> %zu bytes of weights, weights sha256 %s\n", output.string().c_str(),
                model.version, bits ? ("weights rounded to " + std::to_string(bits) + " bits").c_str() : "exact",
                model.weights.size(), converted.weights.size(), converted.weights_sha256.c_str());
  else
    std::printf("%s: model format 1 -> 2, weights sha256 %s (archives that name %s find it too)\n",
                output.string().c_str(), converted.weights_sha256.c_str(), converted.weights_sha256_v1.c_str());
  return kOk;
}

int run_verify(int argc, char** argv) {
  cxxopts::Options options("tezip verify", "Check a tezip archive, and its error bound against the original.");
  add_common(options);
  options.add_options()("input", "archive", cxxopts::value<std::string>())(
      "against", "the original input, to measure errors", cxxopts::value<std::string>())(
      "model", "the PredNet model the archive was written with (default: found by its SHA-256)", cxxopts::value<std::string>());
  add_source_options(options);
  options.parse_positional({"input"});
  const auto args = parse(options, argc, argv, "IN.tzp [--against INPUT]");
  if (!args.count("input")) throw UsageError("verify needs IN.tzp");
  std::optional<std::filesystem::path> against;
  if (args.count("against")) against = args["against"].as<std::string>();
  const bool quiet = args.count("quiet") > 0;
  ProgressBar bar("verify", !quiet);
  const auto report = tezip::verify(args["input"].as<std::string>(), against, threads_of(args),
                                    [&](std::uint64_t done, std::uint64_t total) { bar.update(done, total); },
                                    args.count("model") ? std::filesystem::path(args["model"].as<std::string>()) : std::filesystem::path(),
                                    source_options(args));
  for (const auto& f : report.failures) std::fprintf(stderr, "tezip: %s\n", f.c_str());
  if (!quiet || !report.ok()) {
    std::printf("%s: %llu chunks, %llu frames, checksums %s", args["input"].as<std::string>().c_str(),
                (unsigned long long)report.chunks, (unsigned long long)report.frames, report.failures.empty() ? "ok" : "FAILED");
    // Frames that failed to decode were not compared: a bound met by the others is not "holds".
    if (report.compared)
      std::printf(", max_error=%g psnr=%.2f bound %s (%llu pixels out of bound)", report.max_error, report.psnr,
                  report.pixels_out_of_bound != 0 ? "VIOLATED"
                  : report.failures.empty()       ? "holds"
                                                  : "UNCHECKED where frames failed",
                  (unsigned long long)report.pixels_out_of_bound);
    std::printf("\n");
  }
  return report.ok() ? kOk : kDataError;
}

int dispatch(int argc, char** argv) {
  if (argc < 2) throw UsageError("no command given");
  const std::string command = argv[1];
  if (command == "-h" || command == "--help" || command == "help") {
    std::cout << kUsageText;
    return kOk;
  }
  if (command == "--version") {
    std::cout << "tezip 0.1\n";
    return kOk;
  }
  if (command != "train") use_single_threaded_torch();  // see predictor/learned_predictor.hpp
  if (command == "compress") return run_compress(argc - 1, argv + 1);
  if (command == "decompress") return run_decompress(argc - 1, argv + 1);
  if (command == "info") return run_info(argc - 1, argv + 1);
  if (command == "verify") return run_verify(argc - 1, argv + 1);
  if (command == "batch") return run_batch(argc - 1, argv + 1);
  if (command == "train") return run_train(argc - 1, argv + 1);
  if (command == "convert-model") return run_convert_model(argc - 1, argv + 1);
  throw UsageError("unknown command '" + command + "'");
}

}  // namespace
}  // namespace tezip::cli

int main(int argc, char** argv) {
  using namespace tezip;
  // First, before any thread starts: the threads inherit the blocked signals.
  const cli::InterruptCleanup cleanup;
  // Coding allocates a GOP's buffers (up to hundreds of MB) again and again: keep freed memory in
  // the heap for the next GOP instead of returning it to the kernel and faulting it in anew
  // (measured: page faults were 20% of `verify -T 1` and 26% of compressing vtest). glibc serves
  // blocks above 32 MiB with mmap whatever the threshold, so mmap is turned off. glibc only; the
  // library leaves the process's allocator alone. The heap is not marked for transparent huge
  // pages any more: on a fresh VM each 2 MiB fault took about 10 ms of system time (the host
  // backing the page), 8-10 s of a 10 s compression (docs/performance.md, "No huge pages").
#ifdef M_MMAP_MAX
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);  // an int: at most 2 GiB kept
#endif
  try {
    // A TEZIP_SIMD this CPU cannot run is one error line here, not one per GOP later.
    try {
      codecs::simd_path();
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "tezip: %s\n", e.what());
      return cli::kUsage;
    }
    return cli::dispatch(argc, argv);
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "tezip: %s\n%s", e.what(), cli::kUsageText);
    return cli::kUsage;
  } catch (const InputError& e) {
    std::fprintf(stderr, "tezip: %s\n", e.what());
  } catch (const DataError& e) {
    std::fprintf(stderr, "tezip: %s\n", e.what());
  } catch (const OutputError& e) {
    std::fprintf(stderr, "tezip: %s\n", e.what());
  } catch (const codecs::CodecError& e) {
    std::fprintf(stderr, "tezip: corrupt data: %s\n", e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tezip: out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tezip: %s\n", e.what());
  }
  return cli::kDataError;
}
