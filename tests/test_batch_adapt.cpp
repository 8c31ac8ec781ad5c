// `tezip batch --predictor prednet`, with and without `--adapt` (batch/batch.hpp, docs/batch.md,
// "Adapting PredNet to the dataset"): one worker adapts, every worker codes with its model, which
// lies once beside the shards and is listed in index.json; the shards find it there, a rerun reuses
// it, and a missing or damaged model is named in one clear error. Everything but the training itself
// runs in the torch-free build: there the adapted model is stood in for by a perturbed shipped model.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "batch/batch.hpp"
#include "compressor/decoder.hpp"
#include "format/archive.hpp"
#include "format/dataset_index.hpp"
#include "format/errors.hpp"
#include "predictor/model_file.hpp"
#include "support/cli_run.hpp"
#include "support/shipped_model.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace tezip {
namespace {

const fs::path kMire = fs::path(TEZIP_SOURCE_DIR) / "datasets/sample/mire";
using test::kShippedModel;

// The real sample split in two sequences of 8 frames: two shards of one sequence each.
fs::path two_sequences(const fs::path& dir) {
  std::vector<fs::path> frames;
  for (const auto& e : fs::directory_iterator(kMire)) frames.push_back(e.path());
  std::sort(frames.begin(), frames.end());
  REQUIRE(frames.size() == 16);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const auto seq = dir / "data" / (i < 8 ? "a" : "b");
    fs::create_directories(seq);
    fs::copy_file(frames[i], seq / frames[i].filename());
  }
  return dir / "data";
}

BatchOptions prednet_batch(unsigned workers) {
  BatchOptions b;
  b.compress.predictor = "prednet";
  b.compress.learned.model = kShippedModel;
  b.compress.gop.size = 8;
  b.compress.threads = 1;
  b.shard_size = 1;  // one sequence a shard
  b.workers = workers;
  return b;
}

BatchOptions adapting_batch(unsigned workers, std::uint64_t seed = 1) {
  BatchOptions b = prednet_batch(workers);
  b.compress.adapt.seconds = 3;
  b.compress.adapt.seed = seed;
  return b;
}

// What worker 0 would write, without training: the shipped model with a bias moved, recorded as
// made for `job`'s request.
fs::path stand_in_model(const BatchJob& job, const fs::path& out, float delta) {
  ModelFile model =
      test::perturbed_model(delta, nlohmann::json{{"trainer", "test"}, {"batch_request", job.adapt_request()}}.dump());
  const auto bytes = model.serialize();
  const auto path = out / dataset_model_name(model.weights_sha256);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}

std::vector<std::string> model_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".tzm") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("batch --predictor prednet codes every shard with the model, and a rerun keeps them", "[batch][prednet]") {
  test::TempDir dir;
  const auto input = two_sequences(dir.path());
  const auto out = dir.path() / "out";
  {
    BatchJob job(input, out, prednet_batch(1));
    REQUIRE(job.plan().shards.size() == 2);
    for (const auto& r : job.run_worker(0).shards) CHECK_FALSE(r.kept);
    const auto index = job.write_index_if_complete();
    REQUIRE(index);
    CHECK_FALSE(index->model);
  }
  const auto report = verify(out / "index.json", input, 1);
  CHECK(report.failures.empty());
  CHECK(report.max_error == 0);
  CHECK(ArchiveReader(out / "shard-00000.tzp").index().settings.predictor.kind == "prednet");
  // Before, the shard check knew only classical predictors: every shard failed it.
  BatchJob again(input, out, prednet_batch(1));
  for (const auto& r : again.run_worker(0).shards) CHECK(r.kept);
}

TEST_CASE("an adapted batch: one model beside the shards, found by SHA-256, reused, and named when missing or damaged",
          "[batch][prednet][adapt]") {
  test::TempDir dir;
  const auto input = two_sequences(dir.path());
  const auto out = dir.path() / "out";
  fs::path model;
  {
    BatchJob first(input, out, adapting_batch(2));
    REQUIRE(first.adapts());
    CHECK_FALSE(first.find_adapted_model());
    CHECK_THROWS_AS(first.run_worker(0), std::logic_error);  // not without the model
    // Worker 1 waits for worker 0's model, and says so when it does not come.
    try {
      first.wait_for_adapted_model(0.3, 0.1);
      FAIL("no model, yet the wait ended");
    } catch (const OutputError& e) {
      CHECK_THAT(e.what(), Contains("worker 0 has not written") && Contains("run array task 0"));
    }
    // A model that is not this request's is not taken: the shipped one under the name, or
    // one made for another seed.
    const auto shipped = load_model_file(kShippedModel);
    fs::copy_file(kShippedModel, out / dataset_model_name(shipped.weights_sha256));
    CHECK_FALSE(first.find_adapted_model());
    CHECK_THROWS_AS(first.use_adapted_model(out / dataset_model_name(shipped.weights_sha256)), DataError);
    const BatchJob other_seed(input, out, adapting_batch(2, 7));
    CHECK(other_seed.adapt_request() != first.adapt_request());
    stand_in_model(other_seed, out, 0.25f);
    CHECK_FALSE(first.find_adapted_model());
    model = stand_in_model(first, out, 0.5f);
    REQUIRE(first.find_adapted_model() == model);
    CHECK(first.wait_for_adapted_model(0.3, 0.1) == model);
  }
  // Two workers, each its own job as two array tasks are.
  for (unsigned w = 0; w < 2; ++w) {
    BatchJob job(input, out, adapting_batch(2));
    job.use_adapted_model(*job.find_adapted_model());
    for (const auto& r : job.run_worker(w).shards) CHECK_FALSE(r.kept);
    CHECK(job.write_index_if_complete().has_value() == (w == 1));
  }
  const auto index = read_dataset_index(out / "index.json");
  REQUIRE(index.model);
  CHECK(index.model->path == model.filename().string());
  const auto weights = load_model_file(model).weights_sha256;
  CHECK(index.model->weights_sha256 == weights);
  CHECK(index.model->size == fs::file_size(model));
  for (const auto& shard : index.shards) {
    const ArchiveReader reader(out / shard.path);
    CHECK(reader.index().settings.predictor.weights_sha256 == weights);
    CHECK(reader.index().model.size == 0);  // referenced, not embedded
  }
  // Once the index is written, the other seed's model (a batch model no shard references) is
  // removed; the copy of the shipped model, not a batch job's, stays.
  std::vector<std::string> left{dataset_model_name(load_model_file(kShippedModel).weights_sha256), model.filename().string()};
  std::sort(left.begin(), left.end());
  CHECK(model_files(out) == left);
  auto report = verify(out / "index.json", input, 1);
  CHECK(report.failures.empty());
  CHECK(report.max_error == 0);

  // A rerun finds the same model and keeps every shard.
  {
    BatchJob rerun(input, out, adapting_batch(1));
    REQUIRE(rerun.find_adapted_model() == model);
    rerun.use_adapted_model(model);
    for (const auto& r : rerun.run_worker(0).shards) CHECK(r.kept);
  }

  // Damaged: verify names it, decoding refuses it with the file's name.
  const auto good = test::read_file(model);
  auto bad = good;
  bad[bad.size() - 100] ^= 0x40;
  std::ofstream(model, std::ios::binary).write(reinterpret_cast<const char*>(bad.data()), std::streamsize(bad.size()));
  report = verify(out / "index.json", input, 1);
  REQUIRE_FALSE(report.failures.empty());
  CHECK_THAT(report.failures.front(), Contains(model.filename().string()) && Contains("damaged"));
  auto run = test::tezip_cli("decompress " + test::quote(out / "index.json") + " -o " + test::quote(dir.path() / "restored"));
  CHECK(run.code != 0);
  CHECK_THAT(run.output, Contains(model.filename().string()));
  CHECK_FALSE(fs::exists(dir.path() / "restored"));

  // Missing: the error names the weights the shards need, and --model.
  fs::remove(model);
  run = test::tezip_cli("decompress " + test::quote(out / "shard-00001.tzp") + " -o " + test::quote(dir.path() / "restored"));
  CHECK(run.code != 0);
  CHECK_THAT(run.output, Contains(weights.substr(0, 16)) && Contains("--model"));
  // Given back, all decodes again, through the CLI too.
  std::ofstream(model, std::ios::binary).write(reinterpret_cast<const char*>(good.data()), std::streamsize(good.size()));
  run = test::tezip_cli("verify " + test::quote(out / "index.json") + " --against " + test::quote(input));
  CHECK(run.code == 0);
  CHECK_THAT(run.output, Contains("max_error=0"));
  run = test::tezip_cli("info " + test::quote(out / "index.json"));
  CHECK_THAT(run.output, Contains("model:") && Contains(model.filename().string()));
}

TEST_CASE("tezip batch --adapt says what it needs: prednet, and libtorch to train", "[batch][adapt][cli]") {
  test::TempDir dir;
  const auto input = two_sequences(dir.path());
  const std::string common = "batch " + test::quote(input) + " -o " + test::quote(dir.path() / "out") + " --shard-size 1 ";
  auto run = test::tezip_cli(common + "--adapt 3");
  CHECK(run.code == 1);
  CHECK_THAT(run.output, Contains("--adapt needs --predictor prednet"));
  run = test::tezip_cli(common + "--predictor prednet --adapt 3", "TEZIP_LEARNED_MODULE=" + test::quote(dir.path() / "none.so"));
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("tezip batch --adapt") && Contains("needs libtorch"));
  CHECK_FALSE(fs::exists(dir.path() / "out" / "index.json"));
  CHECK(model_files(dir.path() / "out").empty());
}

TEST_CASE("dataset index: the adapted model's entry round trips and is checked", "[batch]") {
  test::TempDir dir;
  DatasetIndex index;
  index.shards.push_back({"shard-00000.tzp", 10, 1, {"a"}, 1, 100});
  index.model = ModelEntry{"prednet-0123456789abcdef.tzm", 2048, 0x1234, std::string(64, 'a')};
  write_dataset_index(dir.path() / "index.json", index);
  const auto back = read_dataset_index(dir.path() / "index.json");
  REQUIRE(back.model);
  CHECK(back.model->path == index.model->path);
  CHECK(back.model->size == 2048);
  CHECK(back.model->hash == 0x1234);
  CHECK(back.model->weights_sha256 == index.model->weights_sha256);
  // Only a .tzm file name beside the index, with a real SHA-256: the shards look for it there.
  for (const std::string path : {"../x.tzm", "sub/x.tzm", "/etc/x.tzm", "x.json", ""}) {
    INFO(path);
    index.model->path = path;
    CHECK_THROWS_AS(write_dataset_index(dir.path() / "bad.json", index), DataError);
  }
  index.model->path = "x.tzm";
  index.model->weights_sha256 = "abc";
  CHECK_THROWS_AS(write_dataset_index(dir.path() / "bad.json", index), DataError);
  std::ofstream(dir.path() / "bad.json") << R"({"format": "tezip-dataset", "version": 1, "shards": [], "model": {"path": "../m.tzm", )"
                                         << R"("size": 1, "xxh64": "0000000000000001", "weights_sha256": ")" << std::string(64, 'a')
                                         << "\"}}";
  CHECK_THROWS_AS(read_dataset_index(dir.path() / "bad.json"), DataError);
  std::ofstream(dir.path() / "bad.json") << R"({"format": "tezip-dataset", "version": 1, "shards": [], "model": 3})";
  CHECK_THROWS_AS(read_dataset_index(dir.path() / "bad.json"), DataError);
}

#ifdef TEZIP_HAVE_TORCH
TEST_CASE("tezip batch --adapt: task 0 adapts, task 1 codes with its model, a rerun reuses it, decoding needs no libtorch",
          "[batch][adapt][cli][torch]") {
  test::TempDir dir;
  const auto input = two_sequences(dir.path());
  const auto out = dir.path() / "out";
  const std::string common = "batch " + test::quote(input) + " -o " + test::quote(out) +
                             " --predictor prednet --adapt 3 --gop 8 --shard-size 1 -T 1 --num-tasks 2 --task-id ";
  auto run = test::tezip_cli(common + "0");
  REQUIRE(run.code == 0);
  CHECK_THAT(run.output, Contains("adapt: epoch 0") && Contains("worker 0: adapted PredNet in"));
  const auto models = model_files(out);
  REQUIRE(models.size() == 1);
  const auto model = out / models.front();
  const auto bytes = test::read_file(model);
  CHECK_FALSE(fs::exists(out / "index.json"));  // task 1's shard is still missing
  run = test::tezip_cli(common + "1");
  REQUIRE(run.code == 0);
  CHECK_THAT(run.output, Contains("adapted by an earlier run") && Contains("ratio"));
  CHECK_THAT(run.output, !Contains("adapt: epoch"));
  const auto index = read_dataset_index(out / "index.json");
  REQUIRE(index.model);
  CHECK(index.model->path == models.front());
  for (const auto& shard : index.shards)
    CHECK(ArchiveReader(out / shard.path).index().settings.predictor.weights_sha256 == index.model->weights_sha256);
  // The exact engine decodes it without libtorch and without any model path.
  run = test::tezip_cli("verify " + test::quote(out / "index.json") + " --against " + test::quote(input),
                        "TEZIP_LEARNED_MODULE=" + test::quote(dir.path() / "none.so") + " TEZIP_MODEL_PATH=" + test::quote(dir.path()));
  CHECK(run.code == 0);
  CHECK_THAT(run.output, Contains("max_error=0"));

  // A rerun trains nothing and rewrites nothing.
  run = test::tezip_cli(common + "0");
  REQUIRE(run.code == 0);
  CHECK_THAT(run.output, Contains("adapted by an earlier run") && Contains("1 kept"));
  CHECK(test::read_file(model) == bytes);

  // Another seed is another request: a new model, every shard redone, the old model removed.
  run = test::tezip_cli("batch " + test::quote(input) + " -o " + test::quote(out) +
                        " --predictor prednet --adapt 3 --gop 8 --shard-size 1 -T 1 --seed 2");
  REQUIRE(run.code == 0);
  CHECK_THAT(run.output, Contains("adapted PredNet in") && Contains("2 written"));
  const auto after = model_files(out);
  REQUIRE(after.size() == 1);
  CHECK(after.front() != models.front());
  CHECK(read_dataset_index(out / "index.json").model->path == after.front());
}

#ifdef TEZIP_MPIEXEC
TEST_CASE("tezip batch --adapt under mpirun -np 2: rank 0 adapts, both ranks code with its model", "[.mpi]") {
  test::TempDir dir;
  const auto input = two_sequences(dir.path());
  const auto out = dir.path() / "out";
  const auto run = test::tezip_cli("batch " + test::quote(input) + " -o " + test::quote(out) +
                                       " --predictor prednet --adapt 3 --gop 8 --shard-size 1 -q",
                                   test::quote(TEZIP_MPIEXEC) + " --allow-run-as-root --oversubscribe -np 2");
  INFO(run.output);
  REQUIRE(run.code == 0);
  REQUIRE(model_files(out).size() == 1);
  const auto index = read_dataset_index(out / "index.json");
  REQUIRE(index.model);
  REQUIRE(index.shards.size() == 2);
  for (const auto& shard : index.shards)
    CHECK(ArchiveReader(out / shard.path).index().settings.predictor.weights_sha256 == index.model->weights_sha256);
  const auto report = verify(out / "index.json", input, 1);
  CHECK(report.failures.empty());
  CHECK(report.max_error == 0);
}
#endif
#endif

}  // namespace tezip
