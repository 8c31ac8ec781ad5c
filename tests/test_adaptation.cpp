// `tezip compress --predictor prednet --adapt` (predictor/adaptation.hpp): the sample of frames it
// trains on, the time budget, and the archive it writes, which carries the adapted model and
// decodes without it anywhere else. Training needs libtorch: without it --adapt says so.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "compressor/decoder.hpp"
#include "format/archive.hpp"
#include "predictor/adaptation.hpp"
#include "predictor/model_file.hpp"
#include "support/cli_run.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace tezip {
namespace {

const fs::path kSamples = fs::path(TEZIP_SOURCE_DIR) / "datasets/sample";

}  // namespace

TEST_CASE("adapt_sample keeps every frame that fits, else evenly spaced windows", "[adapt]") {
  // Fits: whole sequences.
  auto w = adapt_sample({30, 5}, {100, 100}, 10000);
  REQUIRE(w.size() == 2);
  CHECK(w[0].size() == 1);
  CHECK(w[0][0].first == 0);
  CHECK(w[0][0].count == 30);
  CHECK(w[1][0].count == 5);
  // A long sequence, a tenth of it allowed: windows of 20 frames from start to end, within it.
  w = adapt_sample({1000}, {50}, 5000);
  REQUIRE(w[0].size() == 5);
  std::size_t kept = 0;
  for (const auto& window : w[0]) {
    CHECK(window.count == 20);
    CHECK(window.first + window.count <= 1000);
    kept += window.count;
  }
  CHECK(w[0].front().first == 0);
  CHECK(w[0].back().first + 20 == 1000);
  CHECK(kept * 50 <= 5000);
  // Too little allowed: still one window, from the middle.
  w = adapt_sample({1000}, {50}, 10);
  REQUIRE(w[0].size() == 1);
  CHECK(w[0][0].first == 490);
  // The auto budget grows with the data, within [5, 600] seconds.
  CHECK(auto_adapt_seconds(1000, 2) == 5.0);
  CHECK(auto_adapt_seconds(std::uint64_t(1) << 40, 2) == 600.0);
  CHECK(auto_adapt_seconds(std::uint64_t(2200) * 1000 * 1000, 2) > auto_adapt_seconds(std::uint64_t(1100) * 1000 * 1000, 2));
}

TEST_CASE("compress --adapt needs libtorch, and says so", "[adapt][cli]") {
  test::TempDir dir;
  const std::string env = "TEZIP_LEARNED_MODULE=" + test::quote(dir / "none.so");
  auto run = test::tezip_cli("compress " + test::quote(kSamples / "mire") + " -o " + test::quote(dir / "a.tzp") +
                                 " --predictor prednet --adapt 5 -q",
                             env);
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("--adapt") && Contains("needs libtorch"));
  CHECK_FALSE(fs::exists(dir / "a.tzp"));
  run = test::tezip_cli("compress " + test::quote(kSamples / "mire") + " -o " + test::quote(dir / "a.tzp") + " --adapt 5");
  CHECK(run.code == 1);
  CHECK_THAT(run.output, Contains("--adapt needs --predictor prednet"));
  run = test::tezip_cli("compress " + test::quote(kSamples / "mire") + " -o " + test::quote(dir / "a.tzp") +
                        " --predictor prednet --adapt soon");
  CHECK(run.code == 1);
  CHECK_THAT(run.output, Contains("--adapt must be auto or a number of seconds"));
}

#ifdef TEZIP_HAVE_TORCH
TEST_CASE("compress --adapt fine-tunes within its budget, embeds the model, and the archive decodes without it", "[adapt][cli][torch]") {
  test::TempDir dir;
  const auto mire = kSamples / "mire";
  const auto start = std::chrono::steady_clock::now();
  auto run = test::tezip_cli("compress " + test::quote(mire) + " -o " + test::quote(dir / "a.tzp") +
                             " --predictor prednet --adapt 4 --gop 8 -T 1 --keep-adapted");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(run.code == 0);
  CHECK_THAT(run.output, Contains("adapt: epoch 0") && Contains("adapted PredNet in") && Contains("embedded"));
  CHECK(seconds < 60);  // 4 s of training, one epoch's validation past it, and the coding
  const ArchiveReader reader(dir / "a.tzp");
  REQUIRE(reader.index().model.size > 0);
  const ModelFile model = parse_model(reader.read_embedded_model(), "embedded");
  CHECK(model.options.residual);                                   // the default forecast
  CHECK(model.options.a_channels == std::vector<int>{1, 4, 8, 16});  // the shipped stack, fine-tuned
  CHECK(reader.index().settings.predictor.weights_sha256 == model.weights_sha256);
  CHECK(model.weights_sha256 != load_model_file(fs::path(TEZIP_SOURCE_DIR) / "models/prednet-small.tzm").weights_sha256);
  // It travels compact: version 3, its weights rounded to 8 bits (a quarter of the shipped file's 199,628 bytes).
  CHECK(model.version == 3);
  CHECK(reader.index().model.size < 60000);
  for (const auto& t : tensor_weights(model, "embedded")) {
    auto rounded = std::vector<WeightTensor>{t};
    round_weights(rounded, 8);
    CHECK(rounded[0].values == t.values);  // already on the 8-bit grid
  }
  // The model comes out of the archive as it went in, for --model elsewhere.
  run = test::tezip_cli("convert-model " + test::quote(dir / "a.tzp") + " -o " + test::quote(dir / "a.tzm"));
  REQUIRE(run.code == 0);
  CHECK_THAT(run.output, Contains("the model embedded in"));
  CHECK(load_model_file(dir / "a.tzm").weights_sha256 == model.weights_sha256);
  // Decoded without libtorch and without the model anywhere on disk.
  run = test::tezip_cli("verify " + test::quote(dir / "a.tzp") + " --against " + test::quote(mire),
                        "TEZIP_LEARNED_MODULE=" + test::quote(dir / "none.so"));
  CHECK(run.code == 0);
  CHECK_THAT(run.output, Contains("max_error=0"));

  // From scratch, a chosen stack, lossy.
  run = test::tezip_cli("compress " + test::quote(kSamples / "castle16") + " -o " + test::quote(dir / "s.tzp") +
                        " --predictor prednet --adapt 3 --stack 1,4,8 --mode abs --bound 2 -T 1 -q --keep-adapted");
  REQUIRE(run.code == 0);
  const ModelFile scratch = parse_model(ArchiveReader(dir / "s.tzp").read_embedded_model(), "embedded");
  CHECK(scratch.options.a_channels == std::vector<int>{1, 4, 8});
  run = test::tezip_cli("verify " + test::quote(dir / "s.tzp") + " --against " + test::quote(kSamples / "castle16"));
  CHECK(run.code == 0);
  CHECK_THAT(run.output, Contains("bound holds"));
}

TEST_CASE("compress --adapt keeps --predictor auto's archive where it is smaller than the adapted one", "[adapt][cli][torch]") {
  test::TempDir dir;
  for (const auto* sample : {"castle16", "mire"}) {
    const auto input = kSamples / sample;
    auto run = test::tezip_cli("compress " + test::quote(input) + " -o " + test::quote(dir / "a.tzp") +
                               " --predictor prednet --adapt 3 --gop 8 -T 1 -f");
    REQUIRE(run.code == 0);
    const auto classical = "compress " + test::quote(input) + " -o " + test::quote(dir / "auto.tzp") + " --gop 8 -T 1 -q -f";
    REQUIRE(test::tezip_cli(classical).code == 0);
    const auto adapted = test::read_file(dir / "a.tzp"), auto_bytes = test::read_file(dir / "auto.tzp");
    if (run.output.find("kept --predictor auto's archive") != std::string::npos) {
      CHECK(adapted == auto_bytes);  // auto's archive, byte for byte
      CHECK(ArchiveReader(dir / "a.tzp").index().model.size == 0);
    } else {
      CHECK_THAT(run.output, Contains("smaller than --predictor auto's"));
      CHECK(adapted.size() < auto_bytes.size());
      CHECK(ArchiveReader(dir / "a.tzp").index().model.size > 0);
    }
    // Only the output and auto's archive: the losing candidate is gone.
    CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 2);
    run = test::tezip_cli("verify " + test::quote(dir / "a.tzp") + " --against " + test::quote(input));
    CHECK(run.code == 0);
    CHECK_THAT(run.output, Contains("max_error=0"));
  }
}
#endif

}  // namespace tezip
