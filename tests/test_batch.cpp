#include <catch2/catch.hpp>

#include "support/temp_dir.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "format/archive.hpp"
#include "batch/batch.hpp"
#include "format/dataset_index.hpp"
#include "compressor/decoder.hpp"
#include "compressor/encoder.hpp"
#include "format/errors.hpp"

namespace fs = std::filesystem;
using namespace tezip;

namespace {

using tezip::test::TempDir;

struct SequenceSpec {
  std::string name;  // sub-folder, may be nested
  int width, height, frames, channels, depth;
  std::string ext;
};

// A gradient with a moving square and seeded noise: neither constant nor random.
cv::Mat frame_image(const SequenceSpec& s, int t, unsigned seed) {
  cv::Mat f(s.height, s.width, CV_MAKETYPE(s.depth, s.channels));
  const int max = s.depth == CV_8U ? 255 : 65535;
  cv::RNG random(seed * 7919u + unsigned(t));
  for (int y = 0; y < s.height; ++y)
    for (int x = 0; x < s.width; ++x)
      for (int c = 0; c < s.channels; ++c) {
        int v = (x * max) / (2 * s.width) + (y * max) / (4 * s.height) + c * max / 8 + random.uniform(0, max / 40 + 1);
        if (x >= 4 + t && x < 12 + t && y >= 4 && y < 12) v = max - 5;
        v = std::min(v, max);
        if (s.depth == CV_8U) f.ptr<std::uint8_t>(y)[x * s.channels + c] = std::uint8_t(v);
        else f.ptr<std::uint16_t>(y)[x * s.channels + c] = std::uint16_t(v);
      }
  return f;
}

void write_dataset(const fs::path& root, const std::vector<SequenceSpec>& specs) {
  unsigned seed = 1;
  for (const auto& s : specs) {
    fs::create_directories(root / s.name);
    for (int t = 0; t < s.frames; ++t) {
      char name[32];
      std::snprintf(name, sizeof name, "f%03d.%s", t, s.ext.c_str());
      REQUIRE(cv::imwrite((root / s.name / name).string(), frame_image(s, t, seed)));
    }
    ++seed;
  }
}

// Sequences of different sizes, depths, channel counts and formats, one of them nested.
std::vector<SequenceSpec> mixed_dataset() {
  return {{"cam_a", 48, 32, 12, 1, CV_8U, "png"},  {"cam_b", 64, 48, 9, 1, CV_16U, "pgm"},
          {"cam_c", 40, 24, 20, 3, CV_8U, "png"},  {"day2/cam1", 32, 32, 7, 1, CV_8U, "pgm"},
          {"day2/cam2", 56, 40, 10, 1, CV_8U, "png"}, {"zeta", 24, 16, 30, 1, CV_16U, "png"}};
}

std::uint64_t total_raw(const fs::path& input) {
  std::uint64_t total = 0;
  for (const auto& s : open_sources(input)) total += s->geometry().raw_bytes() * s->frame_count();
  return total;
}

CompressOptions test_options() {
  CompressOptions o;
  o.threads = 2;
  return o;
}

BatchOptions batch_options(std::uint64_t shard_size, unsigned workers) {
  BatchOptions b;
  b.compress = test_options();
  b.shard_size = shard_size;
  b.workers = workers;
  return b;
}

// Runs worker `w` of `workers` as its own job, as a separate array task would.
WorkerReport run_task(const fs::path& input, const fs::path& out, std::uint64_t shard_size, unsigned w, unsigned workers) {
  BatchJob job(input, out, batch_options(shard_size, workers));
  auto report = job.run_worker(w);
  job.write_index_if_complete();
  return report;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Sequence name -> frame names, each with the decoded-frames hash of its chunk, over every archive
// an input names.
std::map<std::string, std::vector<std::pair<std::string, std::uint64_t>>> frame_hashes(const fs::path& input) {
  std::map<std::string, std::vector<std::pair<std::string, std::uint64_t>>> out;
  for (const auto& path : archive_paths(input)) {
    const ArchiveReader reader(path);
    const auto& index = reader.index();
    for (const auto& s : index.sequences) {
      INFO("sequence " << s.name);
      REQUIRE(out.count(s.name) == 0);  // every sequence exactly once
      out[s.name];
    }
    for (const auto& c : index.chunks) {
      const auto& s = index.sequences[c.sequence];
      REQUIRE(c.frames_hash != 0);
      for (std::uint64_t k = 0; k < c.frame_count; ++k) out[s.name].emplace_back(s.frames[c.first_frame + k].name, c.frames_hash);
    }
  }
  return out;
}

std::vector<std::string> hidden_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().starts_with(".")) out.push_back(e.path().filename().string());
  return out;
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

int run_command(const std::string& command) {
  const int status = std::system((command + " >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Starts the tezip binary with `args`, without waiting; output goes to /dev/null.
pid_t spawn_tezip(const std::vector<std::string>& args) {
  std::vector<std::string> all{TEZIP_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

bool same_pixels(const cv::Mat& a, const cv::Mat& b) {
  if (a.size() != b.size() || a.type() != b.type()) return false;
  cv::Mat diff;
  cv::absdiff(a.reshape(1), b.reshape(1), diff);
  return cv::countNonZero(diff) == 0;
}

}  // namespace

TEST_CASE("plan: every sequence in exactly one shard, balanced, the same for any worker count", "[batch]") {
  std::vector<SequenceSize> sizes;
  for (int i = 0; i < 23; ++i) sizes.push_back({"s" + std::to_string(i), 10, std::uint64_t(1000 + (i * 7919) % 5000)});
  std::uint64_t total = 0;
  for (const auto& s : sizes) total += s.raw_bytes;
  const auto plan = plan_batch(sizes, total / 5, 3);
  REQUIRE(plan.shards.size() == 5 + (total % (total / 5) != 0));
  std::vector<int> seen(sizes.size(), 0);
  std::uint64_t lightest = ~std::uint64_t(0), heaviest = 0;
  for (std::size_t i = 0; i < plan.shards.size(); ++i) {
    const auto& s = plan.shards[i];
    CHECK(s.file == "shard-0000" + std::to_string(i) + ".tzp");
    CHECK(std::is_sorted(s.sequences.begin(), s.sequences.end()));
    for (const auto q : s.sequences) ++seen[q];
    lightest = std::min(lightest, s.raw_bytes);
    heaviest = std::max(heaviest, s.raw_bytes);
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  CHECK(heaviest - lightest <= 6000);  // within the largest sequence
  // Shards depend on the shard size only; workers share them all.
  for (unsigned workers : {1u, 2u, 3u, 7u, 40u}) {
    const auto other = plan_batch(sizes, total / 5, workers);
    REQUIRE(other.shards.size() == plan.shards.size());
    std::size_t assigned = 0;
    for (std::size_t i = 0; i < plan.shards.size(); ++i) CHECK(other.shards[i].sequences == plan.shards[i].sequences);
    for (unsigned w = 0; w < workers; ++w) assigned += other.shards_of(w).size();
    CHECK(assigned == plan.shards.size());
  }
  // A tiny shard size gives one shard per sequence; a huge one a single shard.
  CHECK(plan_batch(sizes, 1, 2).shards.size() == sizes.size());
  CHECK(plan_batch(sizes, total * 10, 2).shards.size() == 1);
  CHECK(plan_batch({}, 100, 2).shards.empty());
}

TEST_CASE("dataset index: round trip, detection and malformed files", "[batch]") {
  TempDir dir;
  DatasetIndex index;
  index.shards.push_back({"shard-00000.tzp", 1234, 0xfedcba9876543210ull, {"a", "b/c"}, 12, 4096});
  index.shards.push_back({"shard-00001.tzp", 99, 7, {""}, 3, 300});
  const auto path = dir.path() / "index.json";
  write_dataset_index(path, index);
  CHECK(hidden_files(dir.path()).empty());
  REQUIRE(is_dataset_index(path));
  const auto back = read_dataset_index(path);
  REQUIRE(back.shards.size() == 2);
  CHECK(back.shards[0].path == "shard-00000.tzp");
  CHECK(back.shards[0].hash == 0xfedcba9876543210ull);
  CHECK(back.shards[0].sequences == std::vector<std::string>{"a", "b/c"});
  CHECK(back.shards[1].raw_bytes == 300);
  const auto paths = archive_paths(path);
  REQUIRE(paths.size() == 2);
  CHECK(paths[1] == fs::absolute(dir.path() / "shard-00001.tzp").lexically_normal());

  auto malformed = [&](const std::string& text) {
    std::ofstream(dir.path() / "bad.json") << text;
    return dir.path() / "bad.json";
  };
  CHECK_THROWS_AS(read_dataset_index(malformed("{\"format\": \"tezip-dataset\", ")), DataError);
  CHECK_THROWS_AS(read_dataset_index(malformed("{\"format\": \"other\", \"version\": 1, \"shards\": []}")), DataError);
  CHECK_THROWS_AS(read_dataset_index(malformed("{\"format\": \"tezip-dataset\", \"version\": 9, \"shards\": []}")), DataError);
  const std::string shard = R"({"size": 1, "xxh64": "0000000000000001", "frames": 1, "raw_bytes": 1, )";
  CHECK_THROWS_AS(read_dataset_index(malformed(R"({"format": "tezip-dataset", "version": 1, "shards": [)" + shard +
                                               R"("path": "../etc/x", "sequences": ["a"]}]})")),
                  DataError);
  CHECK_THROWS_AS(read_dataset_index(malformed(R"({"format": "tezip-dataset", "version": 1, "shards": [)" + shard +
                                               R"("path": "/etc/x", "sequences": ["a"]}]})")),
                  DataError);
  CHECK_THROWS_AS(read_dataset_index(malformed(R"({"format": "tezip-dataset", "version": 1, "shards": [)" + shard +
                                               R"("path": "x", "sequences": ["a"]}, )" + shard +
                                               R"("path": "y", "sequences": ["a"]}]})")),
                  DataError);
  CHECK_THROWS_AS(read_dataset_index(malformed(R"({"format": "tezip-dataset", "version": 1, "shards": [{"path": "x"}]})")),
                  DataError);
  CHECK_THROWS_AS(read_dataset_index(dir.path() / "missing.json"), InputError);
  std::ofstream(dir.path() / "not-json.tzp") << "TZIP....";
  CHECK_FALSE(is_dataset_index(dir.path() / "not-json.tzp"));
  CHECK_FALSE(is_dataset_index(dir.path()));
}

TEST_CASE("batch: lossless, equal to a serial run, the same for any number of array tasks", "[batch]") {
  TempDir dir;
  const auto input = dir.path() / "data";
  write_dataset(input, mixed_dataset());
  const std::uint64_t shard_size = total_raw(input) / 4;

  compress(input, dir.path() / "serial.tzp", test_options());
  const auto one = dir.path() / "one";
  const auto three = dir.path() / "three";
  const auto first = run_task(input, one, shard_size, 0, 1);
  CHECK(first.shards.size() >= 4);
  for (const auto& r : first.shards) CHECK_FALSE(r.kept);
  REQUIRE(fs::exists(one / "index.json"));
  // Array tasks one after another: only the last one, seeing every shard, writes the index.
  for (unsigned t = 0; t < 3; ++t) {
    CHECK_FALSE(fs::exists(three / "index.json"));
    run_task(input, three, shard_size, t, 3);
  }
  REQUIRE(fs::exists(three / "index.json"));
  CHECK(read_text(one / "index.json") == read_text(three / "index.json"));
  for (const auto& shard : read_dataset_index(one / "index.json").shards)
    CHECK(read_text(one / shard.path) == read_text(three / shard.path));
  CHECK(hidden_files(one).empty());
  CHECK(hidden_files(three).empty());

  // The same sequences and frame checksums as one archive of the whole dataset.
  CHECK(frame_hashes(one / "index.json") == frame_hashes(dir.path() / "serial.tzp"));
  const auto report = verify(one / "index.json", input, 2);
  CHECK(report.failures.empty());
  CHECK(report.ok());
  CHECK(report.max_error == 0);

  // Restored frame for frame, in the dataset's folders.
  DecompressOptions d;
  d.threads = 2;
  decompress(one / "index.json", dir.path() / "restored", d);
  std::size_t frames = 0;
  for (const auto& spec : mixed_dataset())
    for (const auto& e : fs::directory_iterator(input / spec.name)) {
      const auto restored = dir.path() / "restored" / spec.name / e.path().filename();
      INFO(restored);
      REQUIRE(fs::exists(restored));
      CHECK(same_pixels(cv::imread(e.path().string(), cv::IMREAD_UNCHANGED), cv::imread(restored.string(), cv::IMREAD_UNCHANGED)));
      ++frames;
    }
  CHECK(frames == 88);

  const auto summary = summarize(BatchJob(input, one, batch_options(shard_size, 2)).plan(), read_dataset_index(one / "index.json"));
  CHECK(summary.workers.size() == 2);
  CHECK(summary.workers[0].raw_bytes + summary.workers[1].raw_bytes == total_raw(input));
  CHECK(summary.planned_imbalance >= 1.0);
}

TEST_CASE("batch rerun: keeps complete shards, redoes damaged and missing ones, rewrites the index", "[batch]") {
  TempDir dir;
  const auto input = dir.path() / "data";
  write_dataset(input, mixed_dataset());
  const std::uint64_t shard_size = total_raw(input) / 4;
  const auto out = dir.path() / "out";
  run_task(input, out, shard_size, 0, 1);
  const std::string original_index = read_text(out / "index.json");
  const auto index = read_dataset_index(out / "index.json");
  REQUIRE(index.shards.size() >= 3);

  // Nothing to do on a complete output.
  for (const auto& r : run_task(input, out, shard_size, 0, 1).shards) CHECK(r.kept);

  // One shard damaged in its middle, one gone, the index gone, a killed writer's leftovers.
  {
    std::fstream f(out / index.shards[0].path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(index.shards[0].size / 2));
    f.put('\x5a' ^ char(f.peek()));
  }
  CHECK(verify(out / "index.json", std::nullopt, 2).failures.size() >= 1);
  fs::remove(out / index.shards[1].path);
  fs::remove(out / "index.json");
  std::ofstream(out / ("." + index.shards[1].path + ".unverified.tmp-1-2")) << "partial";
  const auto rerun = run_task(input, out, shard_size, 0, 1);
  std::size_t redone = 0;
  for (const auto& r : rerun.shards) {
    CHECK(r.kept == (r.shard >= 2));
    if (r.shard == 0) CHECK_FALSE(r.redone.empty());
    redone += r.kept ? 0 : 1;
  }
  CHECK(redone == 2);
  CHECK(read_text(out / "index.json") == original_index);
  CHECK(hidden_files(out).empty());
  CHECK(verify(out / "index.json", input, 2).ok());

  // A shard written with other settings is not this job's: redone.
  BatchOptions lossy = batch_options(shard_size, 1);
  lossy.compress.coding.zstd_level = 5;
  BatchJob job(input, out, lossy);
  for (const auto& r : job.run_worker(0).shards) CHECK_FALSE(r.kept);
}

TEST_CASE("batch: a task killed midway and rerun leaves every sequence exactly once", "[batch]") {
  TempDir dir;
  const auto input = dir.path() / "data";
  std::vector<SequenceSpec> specs;
  for (int i = 0; i < 8; ++i) specs.push_back({"seq" + std::to_string(i), 192, 160, 24, 1, CV_8U, "pgm"});
  write_dataset(input, specs);
  const auto out = dir.path() / "out";
  const std::string shard_size = std::to_string(total_raw(input) / 8);
  const std::vector<std::string> args{"batch", input.string(), "-o", out.string(), "--shard-size", shard_size,
                                      "-T", "1", "--task-id", "0", "--num-tasks", "1"};
  const pid_t child = spawn_tezip(args);
  // Killed as soon as its first shard is in place.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(out / "shard-00000.tzp") && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) FAIL("tezip batch exited before its first shard was written");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
  std::size_t done = 0;
  for (int i = 0; i < 8; ++i) done += fs::exists(out / ("shard-0000" + std::to_string(i) + ".tzp")) ? 1 : 0;
  CHECK(done >= 1);
  CHECK(done < 8);  // midway
  CHECK_FALSE(fs::exists(out / "index.json"));

  const pid_t rerun = spawn_tezip(args);
  ::waitpid(rerun, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(fs::exists(out / "index.json"));
  CAPTURE(hidden_files(out));
  CHECK(hidden_files(out).empty());
  const auto hashes = frame_hashes(out / "index.json");  // fails on a sequence seen twice
  CHECK(hashes.size() == specs.size());
  CHECK(verify(out / "index.json", input, 2).ok());

  // The command accepts the index like an archive.
  const auto index = quote((out / "index.json").string());
  CHECK(run_command(quote(TEZIP_BINARY) + " info " + index) == 0);
  CHECK(run_command(quote(TEZIP_BINARY) + " verify " + index + " --against " + quote(input.string())) == 0);
  CHECK(run_command(quote(TEZIP_BINARY) + " decompress " + index + " -o " + quote((dir.path() / "dec").string())) == 0);
  CHECK(fs::exists(dir.path() / "dec" / "seq7" / "f023.pgm"));
  fs::resize_file(out / "shard-00003.tzp", fs::file_size(out / "shard-00003.tzp") - 1);
  CHECK(run_command(quote(TEZIP_BINARY) + " verify " + index) == 2);
}

#ifdef TEZIP_MPIEXEC
// Open MPI lives in the MPI module, loaded only by a process that an MPI launcher started: every
// other process starts without mapping it (some 5 ms of CPU each; docs/performance.md, "The process
// start"). A rank whose module is missing stops with one line that names it, and writes nothing.
TEST_CASE("the MPI module: loaded only under an MPI launcher; a missing one is one clear error", "[batch]") {
  TempDir dir;
  const auto input = dir.path() / "data";
  write_dataset(input, mixed_dataset());
  const auto log = dir.path() / "log";
  const auto run = [&](const std::string& env, const std::string& args) {
    const int status = std::system((env + " " + quote(TEZIP_BINARY) + " " + args + " >" + quote(log.string()) + " 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  const auto out = dir.path() / "out";
  REQUIRE(run("LD_DEBUG=files", "batch " + quote(input.string()) + " -o " + quote(out.string()) + " -q") == 0);
  const std::string loaded = read_text(log);
  CHECK(loaded.find("libtezip.so") != std::string::npos);  // LD_DEBUG names what is loaded
  CHECK(loaded.find("libmpi") == std::string::npos);
  CHECK(loaded.find("libtezip_mpi") == std::string::npos);

  const auto ranked = dir.path() / "ranked";
  CHECK(run("OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 TEZIP_MPI_MODULE=" + quote((dir.path() / "none.so").string()),
            "batch " + quote(input.string()) + " -o " + quote(ranked.string())) == 2);
  const std::string said = read_text(log);
  CHECK(said.find("needs MPI") != std::string::npos);
  CHECK(said.find("none.so") != std::string::npos);
  CHECK(std::count(said.begin(), said.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(ranked));
}

// Registered with ctest only when tezip is built with MPI (tests/CMakeLists.txt).
TEST_CASE("batch under mpirun -np 2 equals array tasks run one after another", "[.mpi]") {
  TempDir dir;
  const auto input = dir.path() / "data";
  write_dataset(input, mixed_dataset());
  const std::string shard_size = std::to_string(total_raw(input) / 4);
  const auto mpi = dir.path() / "mpi";
  const auto array = dir.path() / "array";
  REQUIRE(run_command(quote(TEZIP_MPIEXEC) + " --allow-run-as-root --oversubscribe -np 2 " + quote(TEZIP_BINARY) + " batch " +
                      quote(input.string()) + " -o " + quote(mpi.string()) + " --shard-size " + shard_size) == 0);
  for (int t = 0; t < 2; ++t)
    REQUIRE(run_command(quote(TEZIP_BINARY) + " batch " + quote(input.string()) + " -o " + quote(array.string()) +
                        " --shard-size " + shard_size + " --task-id " + std::to_string(t) + " --num-tasks 2") == 0);
  REQUIRE(fs::exists(mpi / "index.json"));
  CHECK(read_text(mpi / "index.json") == read_text(array / "index.json"));
  for (const auto& shard : read_dataset_index(mpi / "index.json").shards)
    CHECK(read_text(mpi / shard.path) == read_text(array / shard.path));
  CHECK(verify(mpi / "index.json", input, 2).ok());
  compress(input, dir.path() / "serial.tzp", test_options());
  CHECK(frame_hashes(mpi / "index.json") == frame_hashes(dir.path() / "serial.tzp"));
  // A rerun under MPI has nothing left to do and keeps the index as it is.
  const auto before = read_text(mpi / "index.json");
  REQUIRE(run_command(quote(TEZIP_MPIEXEC) + " --allow-run-as-root --oversubscribe -np 2 " + quote(TEZIP_BINARY) + " batch " +
                      quote(input.string()) + " -o " + quote(mpi.string()) + " --shard-size " + shard_size) == 0);
  CHECK(read_text(mpi / "index.json") == before);
}
#endif

TEST_CASE("worker_place: every MPI rank of every array task is one worker", "[batch]") {
  for (const char* v : {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN"}) ::unsetenv(v);
  CHECK(worker_place(std::nullopt, std::nullopt, 0, 1).workers == 1);
  const auto p = worker_place(2u, 4u, 1, 3);  // task 2 of 4, rank 1 of 3
  CHECK(p.worker == 7);
  CHECK(p.workers == 12);
  CHECK_THROWS_AS(worker_place(4u, 4u, 0, 1), std::invalid_argument);
  CHECK_THROWS_AS(worker_place(1u, std::nullopt, 0, 1), std::invalid_argument);
  // Slurm's variables, numbered from --array's first index.
  ::setenv("SLURM_ARRAY_TASK_ID", "5", 1);
  ::setenv("SLURM_ARRAY_TASK_COUNT", "4", 1);
  ::setenv("SLURM_ARRAY_TASK_MIN", "3", 1);
  const auto s = worker_place(std::nullopt, std::nullopt, 0, 1);
  CHECK(s.worker == 2);
  CHECK(s.workers == 4);
  ::setenv("SLURM_ARRAY_TASK_ID", "x", 1);
  CHECK_THROWS_AS(worker_place(std::nullopt, std::nullopt, 0, 1), std::invalid_argument);
  // Explicit options win over the environment.
  CHECK(worker_place(0u, 2u, 0, 1).worker == 0);
  for (const char* v : {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN"}) ::unsetenv(v);
}
