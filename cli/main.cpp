// The tezip command: parses options, reports progress, maps errors to exit codes
// (0 ok, 1 usage, 2 input or data error). All the work happens in compressor/.
#include <cxxopts.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/progress_bar.hpp"
#include "codecs/codec_error.hpp"
#include "compressor/decoder.hpp"
#include "compressor/encoder.hpp"
#include "compressor/errors.hpp"

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
  // Measured in docs/quantizers.md: the linear quantizer wins in every mode on camera and video data.
  (void)mode;
  return QuantizerKind::Linear;
}

int run_compress(int argc, char** argv) {
  cxxopts::Options options("tezip compress", "Compress a sequence or dataset of frames into a tezip archive.");
  add_common(options);
  options.add_options()("input", "folder of frames, dataset folder, video or .npy", cxxopts::value<std::string>())(
      "o,output", "archive to write", cxxopts::value<std::string>())(
      "mode", "lossless, abs, rel, absrel or pwrel", cxxopts::value<std::string>()->default_value("lossless"))(
      "bound", "E (abs), R (rel, pwrel) or E,R (absrel)", cxxopts::value<std::string>()->default_value(""))(
      "predictor", "intra, previous or linear", cxxopts::value<std::string>()->default_value("previous"))(
      "quantizer", "linear (SZ-style) or interval (TEZIP's); default by mode", cxxopts::value<std::string>())(
      "gop", "frames per GOP (static window); the longest GOP with --mse-threshold",
      cxxopts::value<std::uint64_t>()->default_value("16"))(
      "mse-threshold", "dynamic window: a new key frame when the forecast's MSE passes T", cxxopts::value<double>())(
      "level", "zstd level 1-22", cxxopts::value<int>()->default_value("3"))(
      "coder", "auto (smaller of zstd and the adaptive coder, per chunk) or zstd", cxxopts::value<std::string>()->default_value("auto"))(
      "f,force", "overwrite the output");
  options.parse_positional({"input"});
  const auto args = parse(options, argc, argv, "INPUT -o OUT.tzp");
  if (!args.count("input") || !args.count("output")) throw UsageError("compress needs INPUT and -o OUT.tzp");

  CompressOptions compress;
  compress.coding.bound = parse_bound(args["mode"].as<std::string>(), args["bound"].as<std::string>());
  compress.coding.quantizer = default_quantizer(compress.coding.bound.mode);
  if (args.count("quantizer")) {
    const auto q = args["quantizer"].as<std::string>();
    if (q == "linear") compress.coding.quantizer = QuantizerKind::Linear;
    else if (q == "interval") compress.coding.quantizer = QuantizerKind::Interval;
    else throw UsageError("--quantizer must be linear or interval");
  }
  compress.coding.zstd_level = args["level"].as<int>();
  if (compress.coding.zstd_level < 1 || compress.coding.zstd_level > 22) throw UsageError("--level must be 1-22");
  const auto coder = args["coder"].as<std::string>();
  if (coder != "auto" && coder != "zstd") throw UsageError("--coder must be auto or zstd");
  compress.coding.adaptive_coder = coder == "auto";
  compress.predictor = args["predictor"].as<std::string>();
  if (compress.predictor != "intra" && compress.predictor != "previous" && compress.predictor != "linear")
    throw UsageError("--predictor must be intra, previous or linear");
  compress.gop.size = args["gop"].as<std::uint64_t>();
  if (compress.gop.size == 0) throw UsageError("--gop must be at least 1");
  if (args.count("mse-threshold")) {
    compress.gop.kind = GopKind::Dynamic;
    compress.gop.mse_threshold = args["mse-threshold"].as<double>();
    if (!(compress.gop.mse_threshold >= 0)) throw UsageError("--mse-threshold must be >= 0");
    if (!args["gop"].count()) compress.gop.size = 64;
  }
  compress.threads = args["threads"].as<unsigned>();
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
  }
  return kOk;
}

int run_decompress(int argc, char** argv) {
  cxxopts::Options options("tezip decompress", "Restore the frames of a tezip archive.");
  add_common(options);
  options.add_options()("input", "archive", cxxopts::value<std::string>())("o,output", "folder to create", cxxopts::value<std::string>())(
      "format", "original (the input's file types where they are lossless) or png",
      cxxopts::value<std::string>()->default_value("original"))("f,force", "replace an existing output folder");
  options.parse_positional({"input"});
  const auto args = parse(options, argc, argv, "IN.tzp -o DIR");
  if (!args.count("input") || !args.count("output")) throw UsageError("decompress needs IN.tzp and -o DIR");
  DecompressOptions decompress;
  const auto format = args["format"].as<std::string>();
  if (format == "original") decompress.format = OutputFormat::Original;
  else if (format == "png") decompress.format = OutputFormat::Png;
  else throw UsageError("--format must be original or png");
  decompress.threads = args["threads"].as<unsigned>();
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

int run_info(int argc, char** argv) {
  cxxopts::Options options("tezip info", "Describe a tezip archive.");
  add_common(options);
  options.add_options()("input", "archive", cxxopts::value<std::string>());
  options.parse_positional({"input"});
  const auto args = parse(options, argc, argv, "IN.tzp");
  if (!args.count("input")) throw UsageError("info needs IN.tzp");
  const ArchiveReader reader(args["input"].as<std::string>());
  const auto& index = reader.index();
  const auto& s = index.settings;
  const bool verbose = args.count("verbose") > 0;
  std::printf("archive:    %s (%s, written by %s)\n", args["input"].as<std::string>().c_str(),
              human_bytes(double(reader.file_size())).c_str(), s.writer.c_str());
  std::printf("mode:       %s\n", codecs::describe(s.coding.bound).c_str());
  std::printf("predictor:  %s%s%s\n", s.predictor.kind.c_str(), s.predictor.configuration.empty() ? "" : " ",
              s.predictor.configuration.c_str());
  std::printf("quantizer:  %s\n", s.coding.quantizer == QuantizerKind::Linear ? "linear" : "interval");
  if (s.gop.kind == GopKind::Static) std::printf("gop:        static, %llu frames\n", (unsigned long long)s.gop.size);
  else std::printf("gop:        dynamic, mse threshold %g, at most %llu frames\n", s.gop.mse_threshold, (unsigned long long)s.gop.size);
  std::printf("coding:     zstd level %d%s\n", s.coding.zstd_level, s.coding.adaptive_coder ? ", adaptive coder allowed" : "");
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
  std::map<codecs::EntropyCoderKind, std::size_t> coders;
  for (const auto& c : index.chunks) ++coders[c.stats.coder];
  std::printf("chunks:     %zu zstd, %zu adaptive\n", coders[codecs::EntropyCoderKind::Zstd], coders[codecs::EntropyCoderKind::Adaptive]);
  std::printf("  %5s %-20s %7s %10s %8s %10s %9s %8s\n", "chunk", "sequence", "frames", "bytes", "ratio", "symbols", "runs", "coder");
  for (std::size_t i = 0; i < index.chunks.size(); ++i) {
    if (i >= 20 && !verbose) {
      std::printf("  ... %zu more chunks (-v lists all)\n", index.chunks.size() - i);
      break;
    }
    const auto& c = index.chunks[i];
    const auto& q = index.sequences[c.sequence];
    const double raw = double(q.geometry.raw_bytes() * c.frame_count);
    std::printf("  %5zu %-20s %3llu-%-3llu %10llu %8.3f %10llu %9llu %8s\n", i, q.name.empty() ? "." : q.name.c_str(),
                (unsigned long long)c.first_frame, (unsigned long long)(c.first_frame + c.frame_count - 1),
                (unsigned long long)c.size, raw / double(c.size), (unsigned long long)c.stats.symbol_bytes,
                (unsigned long long)c.stats.run_bytes, c.stats.coder == codecs::EntropyCoderKind::Zstd ? "zstd" : "adaptive");
  }
  return kOk;
}

int run_verify(int argc, char** argv) {
  cxxopts::Options options("tezip verify", "Check a tezip archive, and its error bound against the original.");
  add_common(options);
  options.add_options()("input", "archive", cxxopts::value<std::string>())(
      "against", "the original input, to measure errors", cxxopts::value<std::string>());
  options.parse_positional({"input"});
  const auto args = parse(options, argc, argv, "IN.tzp [--against INPUT]");
  if (!args.count("input")) throw UsageError("verify needs IN.tzp");
  std::optional<std::filesystem::path> against;
  if (args.count("against")) against = args["against"].as<std::string>();
  const bool quiet = args.count("quiet") > 0;
  ProgressBar bar("verify", !quiet);
  const auto report = tezip::verify(args["input"].as<std::string>(), against, args["threads"].as<unsigned>(),
                                    [&](std::uint64_t done, std::uint64_t total) { bar.update(done, total); });
  for (const auto& f : report.failures) std::fprintf(stderr, "tezip: %s\n", f.c_str());
  if (!quiet || !report.ok()) {
    std::printf("%s: %llu chunks, %llu frames, checksums %s", args["input"].as<std::string>().c_str(),
                (unsigned long long)report.chunks, (unsigned long long)report.frames, report.failures.empty() ? "ok" : "FAILED");
    if (report.compared)
      std::printf(", max_error=%g psnr=%.2f bound %s (%llu pixels out of bound)", report.max_error, report.psnr,
                  report.pixels_out_of_bound == 0 ? "holds" : "VIOLATED", (unsigned long long)report.pixels_out_of_bound);
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
  if (command == "compress") return run_compress(argc - 1, argv + 1);
  if (command == "decompress") return run_decompress(argc - 1, argv + 1);
  if (command == "info") return run_info(argc - 1, argv + 1);
  if (command == "verify") return run_verify(argc - 1, argv + 1);
  throw UsageError("unknown command '" + command + "'");
}

}  // namespace
}  // namespace tezip::cli

int main(int argc, char** argv) {
  using namespace tezip;
  try {
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
