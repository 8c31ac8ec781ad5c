// Coding with PredNet (issue 4, 7): round trips on a real sample, every arithmetic and loop mode,
// and the determinism guard: a decoder that cannot reproduce the forecasts refuses to decode.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "format/archive.hpp"
#include "compressor/decoder.hpp"
#include "compressor/encoder.hpp"
#include "format/errors.hpp"
#include "io/source.hpp"
#include "predictor/learned/prednet.hpp"
#include "predictor/learned_predictor.hpp"
#include "support/cli_run.hpp"
#include "support/temp_dir.hpp"

#include <sstream>

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace tezip {
namespace {

const fs::path kMire = fs::path(TEZIP_SOURCE_DIR) / "datasets/sample/mire";
const fs::path kVtest = fs::path(TEZIP_SOURCE_DIR) / "datasets/sample/vtest";

// A small PredNet with fixed random weights; `perturb` changes one weight (the forecast's bias).
fs::path write_model(const fs::path& path, float perturb = 0) {
  torch::manual_seed(11);
  PredNetOptions options;
  options.a_channels = {1, 8, 16};
  PredNet net(options);
  {
    // Untrained, the forecast is mostly relu(negative) = 0; a bias makes it depend on the input.
    torch::NoGradGuard no_grad;
    net->ahat[0]->bias.fill_(0.3f + perturb);
  }
  auto model = make_model_file(net, "{}");
  const auto bytes = model.serialize();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}

CompressOptions prednet_options(const fs::path& model, const std::string& arithmetic) {
  CompressOptions o;
  o.predictor = "prednet";
  o.learned.model = model;
  o.learned.arithmetic = arithmetic;
  o.threads = 2;
  return o;
}

// Decodes `archive` and compares every pixel with the original frames under `bound`.
void require_within(const fs::path& archive, const fs::path& original, const fs::path& model, double max_error) {
  const auto report = verify(archive, original, 2, {}, model);
  INFO(archive.string());
  for (const auto& f : report.failures) INFO(f);
  REQUIRE(report.failures.empty());
  REQUIRE(report.pixels_out_of_bound == 0);
  REQUIRE(report.max_error <= max_error);
}

}  // namespace

TEST_CASE("PredNet coding round trips bit for bit and within bounds on a real sample", "[prednet]") {
  test::TempDir dir;
  const auto model = write_model(dir / "m.tzm");
  for (const std::string arithmetic : {"float32", "exact"}) {
    SECTION(arithmetic) {
      auto options = prednet_options(model, arithmetic);
      compress(kMire, dir / "lossless.tzp", options);
      require_within(dir / "lossless.tzp", kMire, model, 0);
      const ArchiveReader reader(dir / "lossless.tzp");
      CHECK(reader.index().settings.predictor.kind == "prednet");
      CHECK(reader.index().settings.predictor.arithmetic.rfind(arithmetic, 0) == 0);
      CHECK(reader.index().settings.predictor.fingerprint.size() == 64);

      options.coding.bound = codecs::ErrorBound{codecs::BoundMode::Abs, 2, 0};
      compress(kMire, dir / "abs2.tzp", options);
      require_within(dir / "abs2.tzp", kMire, model, 2);

      options.coding.bound = codecs::ErrorBound{codecs::BoundMode::PwRel, 0, 0.05};
      compress(kMire, dir / "pwrel.tzp", options);
      require_within(dir / "pwrel.tzp", kMire, model, 255 * 0.05);
    }
  }
}

TEST_CASE("PredNet open-loop windows with warm-up frames round trip, on colour frames too", "[prednet]") {
  test::TempDir dir;
  const auto model = write_model(dir / "m.tzm");
  auto options = prednet_options(model, "exact");
  options.learned.open_loop = true;
  options.learned.warmup = 2;
  options.gop.size = 5;
  compress(kMire, dir / "window.tzp", options);
  require_within(dir / "window.tzp", kMire, model, 0);
  // TEZIP's dynamic window (DWP): open loop, a key frame when the forecast's MSE passes T.
  options.gop.kind = GopKind::Dynamic;
  options.gop.mse_threshold = 0.001;
  options.gop.size = 16;
  compress(kMire, dir / "dynamic.tzp", options);
  require_within(dir / "dynamic.tzp", kMire, model, 0);
  CHECK(ArchiveReader(dir / "dynamic.tzp").index().chunks.size() > 1);
  options.gop = {};
  options.learned.open_loop = false;
  options.coding.bound = codecs::ErrorBound{codecs::BoundMode::Abs, 2, 0};
  compress(kVtest, dir / "colour.tzp", options);
  require_within(dir / "colour.tzp", kVtest, model, 2);
}

TEST_CASE("the archive does not depend on the PredNet batch size or thread count", "[prednet]") {
  test::TempDir dir;
  const auto model = write_model(dir / "m.tzm");
  auto options = prednet_options(model, "exact");
  options.gop.size = 4;  // 4 GOPs: batches of 1, 2 or 4
  options.learned.batch = 1;
  options.threads = 1;
  compress(kMire, dir / "b1.tzp", options);
  options.learned.batch = 8;
  options.threads = 2;
  compress(kMire, dir / "b8.tzp", options);
  REQUIRE(test::read_file(dir / "b1.tzp") == test::read_file(dir / "b8.tzp"));
}

TEST_CASE("a changed weight or arithmetic is caught before decoding", "[prednet]") {
  test::TempDir dir;
  const auto model = write_model(dir / "m.tzm");
  const auto changed = write_model(dir / "changed.tzm", 0.5f);
  compress(kMire, dir / "a.tzp", prednet_options(model, "float32"));
  const PredictorIdentity recorded = ArchiveReader(dir / "a.tzp").index().settings.predictor;

  // The decoder finds the model by its weights' SHA-256: another model is refused by name.
  REQUIRE_THROWS_WITH(ArchiveDecoder(dir / "a.tzp", changed), Contains("is a different model"));
  REQUIRE_THROWS_WITH(ArchiveDecoder(dir / "a.tzp", dir / "missing.tzm"), Contains("--model"));

  // Same weights hash claimed, different weights or arithmetic: the fingerprint differs.
  PredictorIdentity forged = recorded;
  forged.weights_sha256 = load_model_file(changed).weights_sha256;
  REQUIRE_THROWS_AS(prednet_predictor_for(forged, changed), DeterminismError);
  forged = recorded;
  forged.configuration.replace(forged.configuration.find("float32"), 7, "exact");
  REQUIRE_THROWS_WITH(prednet_predictor_for(forged, model), Contains("cannot reproduce"));
  // The recorded identity itself rebuilds.
  REQUIRE_NOTHROW(prednet_predictor_for(recorded, model));
}

TEST_CASE("archives written with a version-1 model decode with its converted file, and it converts by the CLI", "[prednet][cli]") {
  test::TempDir dir;
  // A version-1 file (weights as a torch::save stream), as tezip wrote before model format 2.
  torch::manual_seed(11);
  PredNetOptions options;
  options.a_channels = {1, 8, 16};
  PredNet net(options);
  {
    torch::NoGradGuard no_grad;
    net->ahat[0]->bias.fill_(0.3f);
  }
  ModelFile v1 = make_model_file(net, "{}");
  v1.version = 1;
  {
    std::ostringstream out;
    torch::save(net, out);
    const std::string bytes = out.str();
    v1.weights.assign(bytes.begin(), bytes.end());
  }
  const auto v1_bytes = v1.serialize();
  std::ofstream(dir / "v1.tzm", std::ios::binary).write(reinterpret_cast<const char*>(v1_bytes.data()), std::streamsize(v1_bytes.size()));
  for (const std::string arithmetic : {"exact", "float32"}) {
    auto o = prednet_options(dir / "v1.tzm", arithmetic);
    o.coding.bound = codecs::ErrorBound{codecs::BoundMode::Abs, 1, 0};
    compress(kMire, dir / (arithmetic + ".tzp"), o);
  }
  auto run = test::tezip_cli("convert-model " + test::quote(dir / "v1.tzm") + " -o " + test::quote(dir / "v2.tzm"));
  REQUIRE(run.code == 0);
  CHECK_THAT(run.output, Contains(v1.weights_sha256));
  const ModelFile v2 = load_model_file(dir / "v2.tzm");
  CHECK(v2.version == 2);
  CHECK(v2.weights_sha256_v1 == v1.weights_sha256);
  CHECK(v2.metadata_json == v1.metadata_json);
  CHECK(v2.weights == make_model_file(net, "{}").weights);  // the same tensors as the network's
  // The converted file is found by the archives' recorded (version-1) SHA-256, and its forecasts
  // are the old file's bit for bit: exact and float32 archives decode.
  for (const std::string arithmetic : {"exact", "float32"}) {
    INFO(arithmetic);
    require_within(dir / (arithmetic + ".tzp"), kMire, dir / "v2.tzm", 1);
    run = test::tezip_cli("verify " + test::quote(dir / (arithmetic + ".tzp")) + " -q", "TEZIP_MODEL_PATH=" + test::quote(dir / "v2.tzm"));
    CHECK(run.code == 0);
  }
  // An output that exists needs -f; the input is never touched.
  run = test::tezip_cli("convert-model " + test::quote(dir / "v1.tzm") + " -o " + test::quote(dir / "v2.tzm"));
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("exists"));
  CHECK(test::read_file(dir / "v1.tzm") == v1_bytes);
}

TEST_CASE("bad PredNet models give clear errors", "[prednet]") {
  test::TempDir dir;
  auto options = prednet_options(dir / "none.tzm", "exact");
  REQUIRE_THROWS_AS(compress(kMire, dir / "x.tzp", options), InputError);
  {
    std::ofstream(dir / "junk.tzm") << "not a model";
  }
  options.learned.model = dir / "junk.tzm";
  REQUIRE_THROWS_WITH(compress(kMire, dir / "x.tzp", options), Contains("not a usable tezip model"));
  REQUIRE_FALSE(fs::exists(dir / "x.tzp"));
}

TEST_CASE("an exact-arithmetic archive decodes bit for bit under every CPU kernel setting", "[prednet][cli]") {
  test::TempDir dir;
  const auto model = write_model(dir / "m.tzm");
  const std::string archive = test::quote(dir / "e.tzp");
  REQUIRE(test::tezip_cli("compress " + test::quote(kMire) + " -o " + archive + " --predictor prednet --model " +
                          test::quote(model) + " --gop 4 --batch 8 -q")
              .code == 0);
  // The exact engine is the core's and loads no libtorch, so even a capability this CPU lacks
  // (avx512 on an AVX2 machine, which would crash libtorch) decodes.
  std::vector<std::string> settings = {"ATEN_CPU_CAPABILITY=default", "ATEN_CPU_CAPABILITY=avx2", "ATEN_CPU_CAPABILITY=avx512",
                                       "DNNL_MAX_CPU_ISA=SSE41", "OMP_NUM_THREADS=1", "TEZIP_EXACT_KERNEL=portable"};
  for (const auto& env : settings)
    for (const char* threads : {"1", "2"}) {
      const auto run = test::tezip_cli("verify " + archive + " --model " + test::quote(model) + " -T " + threads + " --against " +
                                           test::quote(kMire) + " -q",
                                       env);
      CHECK(run.code == 0);
    }
}

}  // namespace tezip

namespace tezip {

TEST_CASE("a float32 archive decoded with other CPU kernels is refused by name, never mis-decoded", "[prednet][cli]") {
  test::TempDir dir;
  const auto model = write_model(dir / "m.tzm");
  const std::string archive = test::quote(dir / "f.tzp");
  REQUIRE(test::tezip_cli("compress " + test::quote(kMire) + " -o " + archive + " --predictor prednet --arithmetic float32 --model " +
                          test::quote(model) + " -q")
              .code == 0);
  REQUIRE(test::tezip_cli("verify " + archive + " --model " + test::quote(model) + " -q").code == 0);
  for (const std::string env : {"ATEN_CPU_CAPABILITY=default", "DNNL_MAX_CPU_ISA=SSE41"}) {
    const auto run = test::tezip_cli("verify " + archive + " --model " + test::quote(model) + " -q", env);
    // Where these kernels give the same bits the archive decodes; elsewhere the fingerprint or the
    // recorded kernels refuse it before any frame is decoded.
    if (run.code != 0) CHECK_THAT(run.output, Contains("cannot reproduce"));
    CHECK_THAT(run.output, !Contains("checksum mismatch"));
  }
}

}  // namespace tezip
