// PredNet coding with exact arithmetic needs no libtorch (issue 12): in either build, archives
// written by the torch engine before it moved into the core decode bit for bit, compress,
// decompress and verify run with the learned module out of reach, and what does need libtorch
// (training, float32, version-1 model files) says so. Runs in the torch-free build too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "codecs/simd.hpp"
#include "compressor/decoder.hpp"
#include "format/archive.hpp"
#include "predictor/model_file.hpp"
#include "predictor/prednet_exact.hpp"
#include "support/cli_run.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace tezip {
namespace {

const fs::path kSamples = fs::path(TEZIP_SOURCE_DIR) / "datasets/sample";
const fs::path kFixtures = fs::path(TEZIP_SOURCE_DIR) / "tests/data";
const fs::path kShippedModel = fs::path(TEZIP_SOURCE_DIR) / "models/prednet-small.tzm";
// The SHA-256 of the shipped model's weights as model format 1 stored them (torch::save): what
// every archive written with it before version 2 records.
const std::string kShippedV1Sha = "bb67849296b6d850a5bfe36030e8fa1aff9aff28dcec8825e1d789fdae6e479c";

// The learned module out of reach: whatever this does, it does without libtorch.
std::string no_libtorch(const test::TempDir& dir) { return "TEZIP_LEARNED_MODULE=" + test::quote(dir / "none.so"); }

void write_bytes(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

}  // namespace

TEST_CASE("the shipped model is model format 2 and answers to its version-1 SHA-256", "[exact][model]") {
  const ModelFile model = load_model_file(kShippedModel);
  CHECK(model.version == 2);
  CHECK(model.weights_sha256_v1 == kShippedV1Sha);
  CHECK(model.has_weights(kShippedV1Sha));
  CHECK(model.has_weights(model.weights_sha256));
  const auto weights = prednet_weights(model, kShippedModel.string());
  std::size_t parameters = 0;
  for (const auto& t : weights) parameters += t.values.size();
  CHECK(parameters == 48458);  // models/prednet-small.md
}

TEST_CASE("archives written by the torch engine of tezip 7e1b983 decode bit for bit without libtorch", "[exact][cli]") {
  // tests/data/README.md says how they were made: the shipped model as model format 1, closed
  // loop on gray frames and open loop (warm-up 2) on colour ones, two GOPs per network call.
  struct Fixture {
    const char* archive;
    const char* original;
    double bound;
  };
  test::TempDir dir;
  for (const Fixture f : {Fixture{"mire-closed-abs2.tzp", "mire", 2}, Fixture{"vtest-window-abs8.tzp", "vtest", 8}}) {
    INFO(f.archive);
    const fs::path archive = kFixtures / f.archive, original = kSamples / f.original;
    const PredictorIdentity predictor = ArchiveReader(archive).index().settings.predictor;
    REQUIRE(predictor.kind == "prednet");
    REQUIRE(predictor.arithmetic == "exact");
    REQUIRE(predictor.weights_sha256 == kShippedV1Sha);  // found through the converted model's alias
    // In this process (the per-frame checksums catch any forecast that differs by one level).
    const auto report = verify(archive, original, 2);
    for (const auto& failure : report.failures) UNSCOPED_INFO(failure);
    CHECK(report.failures.empty());
    CHECK(report.frames == 16);
    CHECK(report.pixels_out_of_bound == 0);
    CHECK(report.max_error <= f.bound);
    CHECK(report.max_error > 0);  // lossy: the forecast shaped what was stored
    // And by the command line with no libtorch to be had, on each convolution kernel.
    std::vector<std::string> kernels = {""};
    for (const auto kernel : exact::supported_kernels())
      kernels.push_back(std::string("TEZIP_EXACT_KERNEL=") + exact::kernel_name(kernel));
    for (const auto& kernel : kernels) {
      const auto run = test::tezip_cli("verify " + test::quote(archive) + " --against " + test::quote(original) + " -T 2",
                                       no_libtorch(dir) + " " + kernel);
      CHECK(run.code == 0);
      CHECK_THAT(run.output, Contains("checksums ok") && Contains("bound holds"));
    }
  }
}

TEST_CASE("archives of chunk versions 4, 5 (channel deltas), 6 and 7 still decode bit for bit", "[exact][cli]") {
  // tests/data/README.md: the first 4 frames of the vtest sample, by tezip 853e7c0 (version 4: six-
  // neighbour striped contexts; lossless) and 881fd4c (version 5: channel-delta flags, which chunk
  // version 6 replaced by channel plans; abs 2) and 3b1373a (version 6: coded motion without spatial
  // blocks; abs 2) and 5cf1655 (version 7: striped streams without column halves; lossless). All
  // are colour: the delta flags of 4 and 5 decode as plans.
  test::TempDir dir;
  const fs::path frames = dir / "frames";
  fs::create_directories(frames);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kSamples / "vtest")) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 4);
  for (std::size_t i = 0; i < 4; ++i) fs::copy_file(files[i], frames / files[i].filename());
  for (const auto& [name, max_error] : {std::pair{"vtest4-chunk4-lossless.tzp", 0}, std::pair{"vtest4-chunk5-abs2.tzp", 2},
                                            std::pair{"vtest4-chunk6-abs2.tzp", 2}, std::pair{"vtest4-chunk7-lossless.tzp", 0}}) {
    INFO(name);
    const fs::path archive = kFixtures / name;
    const auto report = verify(archive, frames, 1);
    for (const auto& failure : report.failures) UNSCOPED_INFO(failure);
    CHECK(report.failures.empty());  // each frame's checksum: the writer's reconstruction, bit for bit
    CHECK(report.frames == 4);
    CHECK(report.pixels_out_of_bound == 0);
    CHECK(report.max_error <= max_error);
    std::vector<std::string> paths;
    for (const auto path : codecs::supported_simd_paths()) paths.push_back(std::string("TEZIP_SIMD=") + codecs::simd_name(path));
    for (const auto& path : paths) {
      const auto run = test::tezip_cli("verify " + test::quote(archive) + " --against " + test::quote(frames), path);
      CHECK(run.code == 0);
      CHECK_THAT(run.output, Contains("checksums ok") && Contains("bound holds"));
    }
  }
}

TEST_CASE("compress, decompress and verify --predictor prednet need no libtorch", "[exact][cli]") {
  test::TempDir dir;
  const std::string env = no_libtorch(dir);
  const auto mire = kSamples / "mire";
  const std::string archive = test::quote(dir / "p.tzp");
  auto run = test::tezip_cli("compress " + test::quote(mire) + " -o " + archive + " --predictor prednet --gop 8 -q", env);
  REQUIRE(run.code == 0);
  run = test::tezip_cli("info " + archive, env);
  CHECK_THAT(run.output, Contains("arithmetic: exact") && Contains(load_model_file(kShippedModel).weights_sha256));
  run = test::tezip_cli("verify " + archive + " --against " + test::quote(mire), env);
  CHECK(run.code == 0);
  CHECK_THAT(run.output, Contains("max_error=0"));
  run = test::tezip_cli("decompress " + archive + " -o " + test::quote(dir / "out") + " -q", env);
  REQUIRE(run.code == 0);
  for (const auto& entry : fs::directory_iterator(mire))
    CHECK(test::read_file(dir / "out" / entry.path().filename()).size() > 0);
  // Open loop with a warm-up, colour frames (each channel a sample of the gray model), lossy.
  run = test::tezip_cli("compress " + test::quote(kSamples / "vtest") + " -o " + test::quote(dir / "w.tzp") +
                            " --predictor prednet --window 5 --warmup 2 --mode abs --bound 3 --batch 2 -q",
                        env);
  REQUIRE(run.code == 0);
  run = test::tezip_cli("verify " + test::quote(dir / "w.tzp") + " --against " + test::quote(kSamples / "vtest") + " -T 1", env);
  CHECK(run.code == 0);
  CHECK_THAT(run.output, Contains("bound holds"));
}

TEST_CASE("what needs libtorch says so when it is missing", "[exact][cli]") {
  test::TempDir dir;
  const std::string env = no_libtorch(dir);
  const auto mire = kSamples / "mire";
  auto run = test::tezip_cli("compress " + test::quote(mire) + " -o " + test::quote(dir / "f.tzp") +
                                 " --predictor prednet --arithmetic float32 -q",
                             env);
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("--arithmetic float32 needs libtorch"));
  CHECK_FALSE(fs::exists(dir / "f.tzp"));

  run = test::tezip_cli("train " + test::quote(mire) + " -o " + test::quote(dir / "m.tzm") + " --epochs 1 --steps 1 -q", env);
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("tezip train needs libtorch"));
  CHECK_FALSE(fs::exists(dir / "m.tzm"));

  // A version-1 model file: its weights are a torch::save stream (these bytes are never parsed).
  ModelFile v1 = load_model_file(kShippedModel);
  v1.version = 1;
  v1.weights_sha256_v1.clear();
  v1.weights = {'P', 'K', 3, 4};
  write_bytes(dir / "old.tzm", v1.serialize());
  run = test::tezip_cli("compress " + test::quote(mire) + " -o " + test::quote(dir / "v1.tzp") + " --predictor prednet --model " +
                            test::quote(dir / "old.tzm") + " -q",
                        env);
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("model format 1") && Contains("needs libtorch") && Contains("tezip convert-model"));
  run = test::tezip_cli("convert-model " + test::quote(dir / "old.tzm") + " -o " + test::quote(dir / "new.tzm"), env);
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("needs libtorch"));
  CHECK_FALSE(fs::exists(dir / "new.tzm"));
  // A version-2 file needs no conversion.
  run = test::tezip_cli("convert-model " + test::quote(kShippedModel) + " -o " + test::quote(dir / "copy.tzm"), env);
  CHECK(run.code == 0);
  CHECK_THAT(run.output, Contains("already model format 2"));
  CHECK_FALSE(fs::exists(dir / "copy.tzm"));
  // --compact: version 3, rounded to 8 bits, under a third of the size; archives written with it
  // decode bit for bit without libtorch.
  run = test::tezip_cli("convert-model " + test::quote(kShippedModel) + " -o " + test::quote(dir / "small.tzm") + " --compact 8", env);
  REQUIRE(run.code == 0);
  CHECK_THAT(run.output, Contains("model format 2 -> 3") && Contains("8 bits"));
  CHECK(load_model_file(dir / "small.tzm").version == 3);
  CHECK(fs::file_size(dir / "small.tzm") * 3 < fs::file_size(kShippedModel));
  run = test::tezip_cli("compress " + test::quote(mire) + " -o " + test::quote(dir / "v3.tzp") + " --predictor prednet --model " +
                            test::quote(dir / "small.tzm") + " --mode abs --bound 2 -q",
                        env);
  REQUIRE(run.code == 0);
  run = test::tezip_cli("verify " + test::quote(dir / "v3.tzp") + " --model " + test::quote(dir / "small.tzm") + " --against " +
                            test::quote(mire),
                        env);
  CHECK(run.code == 0);
  CHECK_THAT(run.output, Contains("bound holds"));
  // Its output is never its input, and an archive without a model has none to give.
  const auto small = test::quote(dir / "small.tzm");
  run = test::tezip_cli("convert-model " + small + " -o " + small + " --compact 8 -f", env);
  CHECK(run.code != 0);
  CHECK(load_model_file(dir / "small.tzm").version == 3);
  run = test::tezip_cli("convert-model " + test::quote(dir / "v3.tzp") + " -o " + test::quote(dir / "none.tzm"), env);
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("carries no model"));
  CHECK_FALSE(fs::exists(dir / "none.tzm"));

  // The usage text names what needs libtorch (and, in a build without it, that it is absent).
  run = test::tezip_cli("--help");
  CHECK_THAT(run.output, Contains("needs no libtorch") && Contains("train") && Contains("--arithmetic float32"));
#ifndef TEZIP_HAVE_TORCH
  CHECK_THAT(run.output, Contains("built without libtorch"));
#else
  CHECK_THAT(run.output, !Contains("built without libtorch"));
#endif
}

}  // namespace tezip
