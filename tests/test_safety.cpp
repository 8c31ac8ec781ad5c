// Issue 11, "Never destroy a user's files": each defect reproduced through the real binary (or the
// library where a file cannot be made to misbehave otherwise), with the user's other files checked
// byte for byte afterwards.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <thread>
#include <vector>

#include "format/archive.hpp"
#include "compressor/encoder.hpp"
#include "format/errors.hpp"
#include "io/output_path.hpp"
#include "io/source.hpp"
#include "io/temporary_files.hpp"
#include "support/cli_run.hpp"
#include "support/npy_file.hpp"
#include "support/synthetic.hpp"
#include "support/temp_dir.hpp"
#include "support/tree_snapshot.hpp"

extern char** environ;

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using tezip::test::quote;
using tezip::test::snapshot_tree;
using tezip::test::temporaries_in;
using tezip::test::write_npy;
using tezip::test::tezip_cli;
using tezip::test::tezip_cli_in;

namespace {

// A folder `in` of small frames and its lossless archive `a.tzp`, in a fresh temporary folder.
struct Workspace {
  tezip::test::TempDir dir{"tezip-test-safety"};
  fs::path in = dir / "in";
  fs::path archive = dir / "a.tzp";
  explicit Workspace(int frames = 5) {
    tezip::test::SyntheticSpec spec;
    spec.frames = frames;
    tezip::test::write_synthetic_sequence(in, spec);
    REQUIRE(tezip_cli("compress -q " + quote(in) + " -o " + quote(archive)).code == 0);
  }
};

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("decompress -o . -f refuses the current folder and leaves it as it was", "[safety]") {
  Workspace w;
  const fs::path work = w.dir / "w";
  fs::create_directories(work / "sub");
  fs::copy_file(w.archive, work / "ll.tzp");
  write_text(work / "precious.txt", "x");
  const auto before = snapshot_tree(w.dir.path());

  // Never "/" here: run against a binary with this bug (TEZIP_TEST_BINARY), it would empty the root
  // folder. The root is checked through the library's check below, which removes nothing.
  for (const std::string target : {".", "./", "..", "../", "sub/.."}) {
    CAPTURE(target);
    const auto run = tezip_cli_in(work, "decompress ll.tzp -o " + target + " -f");
    CHECK(run.code == 2);
    CHECK(std::count(run.output.begin(), run.output.end(), '\n') == 1);  // one line, no usage text
    const auto sub = tezip_cli_in(work / "sub", "decompress ../ll.tzp -o " + target + " -f");
    CHECK(sub.code == 2);
    CHECK(snapshot_tree(w.dir.path()) == before);
  }
  // The archive elsewhere: "." still holds the folder the shell is in.
  fs::rename(work / "ll.tzp", w.dir / "moved.tzp");
  const auto moved = snapshot_tree(w.dir.path());
  const auto run = tezip_cli_in(work, "decompress ../moved.tzp -o . -f");
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("current folder"));
  CHECK(snapshot_tree(w.dir.path()) == moved);
}

TEST_CASE("decompress -o with a trailing slash stages beside the folder, not inside it", "[safety]") {
  Workspace w;
  SECTION("a new folder") {
    const auto run = tezip_cli_in(w.dir.path(), "decompress -q a.tzp -o newdir/");
    CHECK(run.code == 0);
    CHECK(snapshot_tree(w.dir / "newdir") == snapshot_tree(w.in));
    CHECK(temporaries_in(snapshot_tree(w.dir.path())).empty());
  }
  SECTION("an existing folder with -f") {
    write_text(w.dir / "old" / "stale.txt", "stale");
    const auto run = tezip_cli_in(w.dir.path(), "decompress -q a.tzp -o old/ -f");
    CHECK(run.code == 0);
    CHECK(snapshot_tree(w.dir / "old") == snapshot_tree(w.in));
    CHECK(temporaries_in(snapshot_tree(w.dir.path())).empty());
  }
  SECTION("an existing folder without -f") {
    write_text(w.dir / "old" / "stale.txt", "stale");
    const auto before = snapshot_tree(w.dir.path());
    const auto run = tezip_cli_in(w.dir.path(), "decompress a.tzp -o old/");
    CHECK(run.code == 2);
    CHECK_THAT(run.output, Contains("already exists"));
    CHECK(snapshot_tree(w.dir.path()) == before);
  }
}

TEST_CASE("an output that is, holds or lies inside an input is refused with one line", "[safety]") {
  Workspace w;
  fs::copy_file(w.archive, w.in / "inside.tzp");  // an archive inside the input folder, for decompress
  write_npy(w.dir / "frames.npy", {4, 8, 6});
  fs::create_hard_link(w.archive, w.dir / "hard.tzp");
  const auto before = snapshot_tree(w.dir.path());
  const std::string in = quote(w.in), archive = quote(w.archive);
  const std::vector<std::string> commands = {
      "compress " + in + " -o " + quote(w.in / "x.tzp"),                 // inside the input
      "compress " + in + " -o " + in + " -f",                            // the input
      "compress " + in + " -o " + quote(w.dir.path()) + " -f",           // holds the input
      "compress " + quote(w.dir / "frames.npy") + " -o " + quote(w.dir / "frames.npy") + " -f",
      "compress " + quote(w.dir / "in" / ".." / "in") + " -o " + quote(w.in / "sub" / ".." / "y.tzp"),
      "decompress " + archive + " -o " + archive + " -f",                // the archive itself
      "decompress " + archive + " -o " + quote(w.dir / "hard.tzp") + " -f",  // a hard link to it
      "decompress " + quote(w.in / "inside.tzp") + " -o " + in + " -f",  // the folder holding it
      "decompress " + quote(w.in / "inside.tzp") + " -o " + quote(w.in / "inside.tzp" / "x"),
      "batch " + in + " -o " + quote(w.in / "shards"),
      "batch " + in + " -o " + in,
      "batch " + in + " -o " + quote(w.dir.path()),
      "train " + in + " -o " + quote(w.in / "model.tzm") + " --epochs 1 --steps 1",
      "train " + in + " -o " + quote(w.dir / "m.tzm") + " --checkpoint " + quote(w.in / "m.ckpt") + " --epochs 1 --steps 1",
  };
  for (const auto& command : commands) {
    const auto run = tezip_cli(command);
    CAPTURE(command);
    CHECK(run.code == 2);
    CHECK_THAT(run.output, Contains("input"));
    CHECK(std::count(run.output.begin(), run.output.end(), '\n') == 1);
    CHECK(snapshot_tree(w.dir.path()) == before);
  }
}

TEST_CASE("compress refuses what the reader would refuse, before writing anything", "[safety]") {
  tezip::test::TempDir dir("tezip-test-safety");
  // 70000 x 1 is past the reader's 65536 limit on a side.
  for (int t = 0; t < 2; ++t) {
    cv::Mat frame(1, 70000, CV_8UC1, cv::Scalar(t * 10));
    REQUIRE(cv::imwrite((dir / "wide" / ("f" + std::to_string(t) + ".png")).string(),
                        (fs::create_directories(dir / "wide"), frame)));
  }
  const auto before = snapshot_tree(dir.path());
  const auto run = tezip_cli("compress " + quote(dir / "wide") + " -o " + quote(dir / "w.tzp"));
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("invalid size 70000x1"));
  CHECK(snapshot_tree(dir.path()) == before);

  // The limits the writer checks are the reader's own.
  const tezip::ArchiveLimits limits;
  tezip::Geometry g;
  g.width = std::uint32_t(limits.max_dimension), g.height = 1, g.channels = 1;
  CHECK(tezip::geometry_problem(g).empty());
  g.width += 1;
  CHECK_FALSE(tezip::geometry_problem(g).empty());
  g.width = g.height = 16384;  // 2^28 values: one frame per chunk
  CHECK(tezip::max_gop_frames(g) == 1);
  g.width = g.height = 4096;
  CHECK(tezip::max_gop_frames(g) == 16);
}

TEST_CASE("a FIFO, a device or a folder as the archive is refused at once", "[safety]") {
  Workspace w;
  REQUIRE(::mkfifo((w.dir / "f.tzp").c_str(), 0644) == 0);
  REQUIRE(::mkfifo((w.dir / "f.npy").c_str(), 0644) == 0);
  fs::create_directories(w.dir / "folder.tzp");
  const auto before = snapshot_tree(w.dir.path());
  // "timeout" turns a hang into exit 124.
  for (const std::string archive : {"f.tzp", "folder.tzp", "/dev/zero"}) {
    const std::string path = archive.front() == '/' ? archive : (w.dir / archive).string();
    for (const std::string& command : {"info " + quote(path), "verify " + quote(path),
                                      "decompress " + quote(path) + " -o " + quote(w.dir / "out")}) {
      CAPTURE(command);
      const auto run = tezip_cli(command, "timeout 20");
      CHECK(run.code == 2);
      CHECK_THAT(run.output, Contains("not a regular file"));
    }
  }
  const auto npy = tezip_cli("compress " + quote(w.dir / "f.npy") + " -o " + quote(w.dir / "x.tzp"), "timeout 20");
  CHECK(npy.code == 2);
  const auto against = tezip_cli("verify " + quote(w.archive) + " --against " + quote(w.dir / "f.npy"), "timeout 20");
  CHECK(against.code == 2);
  CHECK(snapshot_tree(w.dir.path()) == before);
}

TEST_CASE("a thread count past the limit (-T 100000) is refused with a message and leaves nothing", "[safety]") {
  Workspace w;
  const auto before = snapshot_tree(w.dir.path());
  for (const std::string& command : {"compress " + quote(w.in) + " -o " + quote(w.dir / "b.tzp"),
                                    "decompress " + quote(w.archive) + " -o " + quote(w.dir / "out"),
                                    "verify " + quote(w.archive), "batch " + quote(w.in) + " -o " + quote(w.dir / "s")}) {
    const auto run = tezip_cli(command + " -T 100000");
    CAPTURE(command);
    CHECK(run.code == 1);
    CHECK_THAT(run.output, Contains("at most 1024 threads"));
    CHECK(snapshot_tree(w.dir.path()) == before);
  }
  CHECK(tezip_cli("compress -q " + quote(w.in) + " -o " + quote(w.dir / "b.tzp") + " -T 1024").code == 0);
  CHECK(tezip::resolve_threads(100000) <= tezip::kMaxThreads);
  CHECK(tezip::resolve_threads(100000) <= 4 * std::max(1u, std::thread::hardware_concurrency()));
  CHECK(tezip::resolve_threads(1) == 1);
}

namespace {

// Starts tezip with `args` (stdout and stderr to /dev/null); returns its pid.
pid_t spawn_tezip(const std::vector<std::string>& args) {
  const std::string binary = tezip::test::tezip_binary();
  std::vector<char*> argv{const_cast<char*>(binary.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  return pid;
}

// Waits (at most 60 s) until `ready` holds, or the process ends; true when `ready` held first.
template <class F>
bool wait_until(pid_t pid, F&& ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

int exit_status(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status) + 1000;  // +1000: killed, not exited
}

bool has_temporary(const fs::path& dir, const std::string& prefix, bool nonempty_folder = false) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    if (!nonempty_folder) return true;
    std::error_code e2;
    for (const auto& sub : fs::recursive_directory_iterator(e.path(), e2))
      if (sub.is_regular_file(e2)) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("SIGINT, SIGTERM and SIGHUP mid-way remove tezip's temporary files", "[safety][signal]") {
  tezip::test::TempDir dir("tezip-test-safety");
  tezip::test::SyntheticSpec spec;
  spec.width = 160, spec.height = 120, spec.channels = 3, spec.bits = 16, spec.frames = 48, spec.noise = 40;
  tezip::test::write_synthetic_sequence(dir / "in", spec);
  write_text(dir / "precious.txt", "mine");
  REQUIRE(tezip_cli("compress -q " + quote(dir / "in") + " -o " + quote(dir / "a.tzp") + " --gop 4").code == 0);
  const auto before = snapshot_tree(dir.path());

  const int signal = GENERATE(SIGINT, SIGTERM, SIGHUP);
  CAPTURE(signal);
  SECTION("compress") {
    const pid_t pid = spawn_tezip({"compress", (dir / "in").string(), "-o", (dir / "b.tzp").string(), "--coder", "best",
                                   "--predictor", "motion", "--gop", "4", "-T", "2"});
    const bool caught = wait_until(pid, [&] { return has_temporary(dir.path(), ".b.tzp.tmp-"); });
    if (caught) ::kill(pid, signal);
    const int status = exit_status(pid);
    if (!caught) WARN("compress finished before the signal: nothing to check");
    else CHECK(status == 128 + signal);
    if (caught) CHECK(snapshot_tree(dir.path()) == before);
  }
  SECTION("decompress") {
    const pid_t pid = spawn_tezip({"decompress", (dir / "a.tzp").string(), "-o", (dir / "out").string(), "-T", "2"});
    const bool caught = wait_until(pid, [&] { return has_temporary(dir.path(), ".out.dec.tmp-", true); });
    if (caught) ::kill(pid, signal);
    const int status = exit_status(pid);
    if (!caught) WARN("decompress finished before the signal: nothing to check");
    else CHECK(status == 128 + signal);
    if (caught) CHECK(snapshot_tree(dir.path()) == before);
  }
}

TEST_CASE("a folder holding both images and sub-folders with images is refused by name", "[safety][source]") {
  tezip::test::TempDir dir("tezip-test-safety");
  tezip::test::SyntheticSpec spec;
  spec.frames = 2;
  tezip::test::write_synthetic_sequence(dir / "mixed", spec);
  spec.frames = 4;
  tezip::test::write_synthetic_sequence(dir / "mixed" / "more" / "deeper", spec);
  const auto before = snapshot_tree(dir.path());
  const auto run = tezip_cli("compress " + quote(dir / "mixed") + " -o " + quote(dir / "m.tzp"));
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains((dir / "mixed").string() + ": holds 2 image files of its own"));
  CHECK_THAT(run.output, Contains("deeper"));
  CHECK(snapshot_tree(dir.path()) == before);
  // The same one level down, in a dataset.
  fs::create_directories(dir / "data");
  fs::rename(dir / "mixed", dir / "data" / "cam");
  CHECK_THROWS_WITH(tezip::open_sources(dir / "data"), Contains("cam: holds 2 image files"));
  // Only sub-folders, or only images: fine.
  fs::remove(dir / "data" / "cam" / tezip::test::synthetic_name(spec, 0));
  fs::remove(dir / "data" / "cam" / tezip::test::synthetic_name(spec, 1));
  CHECK(tezip::open_sources(dir / "data").size() == 1);
}

TEST_CASE("the option --npy-layout says how a 4-D array is read", "[safety][source]") {
  tezip::test::TempDir dir("tezip-test-safety");
  const fs::path npy = dir / "a.npy";
  write_npy(npy, {2, 5, 4, 3});  // N=2 sequences of T=5 frames of 4x3, or T=2 frames of 5x4 in colour
  using tezip::NpyLayout;
  const auto automatic = tezip::open_sources(npy);
  REQUIRE(automatic.size() == 1);
  CHECK(automatic[0]->geometry().channels == 3);
  const auto nthw = tezip::open_sources(npy, {NpyLayout::NTHW});
  REQUIRE(nthw.size() == 2);
  CHECK(nthw[1]->name() == "seq_00001");
  CHECK(nthw[0]->frame_count() == 5);
  CHECK(nthw[0]->geometry().width == 3);
  CHECK(nthw[0]->geometry().height == 4);
  CHECK(nthw[0]->geometry().channels == 1);
  CHECK(tezip::open_sources(npy, {NpyLayout::THWC}).size() == 1);
  write_npy(dir / "b.npy", {2, 5, 4, 7});
  CHECK_THROWS_WITH(tezip::open_sources(dir / "b.npy", {NpyLayout::THWC}), Contains("1 or 3"));
  CHECK_THROWS_AS(tezip::parse_npy_layout("tchw"), std::invalid_argument);
  CHECK(tezip::parse_npy_layout("nthw") == NpyLayout::NTHW);

  REQUIRE(tezip_cli("compress -q " + quote(npy) + " --npy-layout NTHW -o " + quote(dir / "a.tzp")).code == 0);
  const auto info = tezip_cli("info " + quote(dir / "a.tzp"));
  CHECK_THAT(info.output, Contains("sequences:  2"));
  CHECK(tezip_cli("verify -q " + quote(dir / "a.tzp") + " --npy-layout nthw --against " + quote(npy)).code == 0);
  CHECK(tezip_cli("verify -q " + quote(dir / "a.tzp") + " --against " + quote(npy)).code == 2);
  CHECK(tezip_cli("compress " + quote(npy) + " --npy-layout CHW -o " + quote(dir / "b.tzp")).code == 1);
}

TEST_CASE("resolved_path normalises what the user typed", "[safety]") {
  tezip::test::TempDir dir("tezip-test-safety");
  fs::create_directories(dir / "a" / "b");
  const auto real = fs::canonical(dir.path());
  CHECK(tezip::resolved_path(dir / "a" / "b" / "") == real / "a" / "b");
  CHECK(tezip::resolved_path(dir / "a" / "b" / "..") == real / "a");
  CHECK(tezip::resolved_path(dir / "a" / ".") == real / "a");
  CHECK(tezip::resolved_path(dir / "a" / "new" / "") == real / "a" / "new");
  CHECK(tezip::resolved_path("/") == "/");
  CHECK_THROWS_WITH(tezip::check_folder_output("/", true), Contains("root folder"));
  CHECK_THROWS_WITH(tezip::check_folder_output("/", false), Contains("root folder"));
  CHECK_THROWS_AS(tezip::resolved_path(""), tezip::OutputError);
  // A symbolic link as the last component is kept, so -f replaces the link, not its target.
  fs::create_directory_symlink(dir / "a", dir / "link");
  CHECK(tezip::resolved_path(dir / "link") == real / "link");
  CHECK(tezip::resolved_path(dir / "link" / "b") == real / "a" / "b");
}

TEST_CASE("temporary paths are registered while they live", "[safety]") {
  const auto before = tezip::registered_temporary_paths();
  {
    tezip::TemporaryPath a("/tmp/x"), b("/tmp/y");
    CHECK(tezip::registered_temporary_paths() == before + 2);
    tezip::TemporaryPath c = std::move(a);
    CHECK(tezip::registered_temporary_paths() == before + 2);
    b.release();
    CHECK(tezip::registered_temporary_paths() == before + 1);
  }
  CHECK(tezip::registered_temporary_paths() == before);
}

namespace {

std::string file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A 2x1 palette PNG (colour type 3), as an editor writes one.
const unsigned char kPalettePng[] = {
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00,
    0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x08, 0x03, 0x00, 0x00, 0x00, 0xc3, 0xfc, 0x8f, 0xb8, 0x00, 0x00, 0x00,
    0x06, 0x50, 0x4c, 0x54, 0x45, 0xff, 0x00, 0x00, 0x00, 0x32, 0xff, 0x81, 0xd1, 0xa9, 0xff, 0x00, 0x00, 0x00,
    0x0b, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x60, 0x60, 0x04, 0x00, 0x00, 0x04, 0x00, 0x02, 0xbf, 0x7a,
    0x3f, 0x4a, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};

}  // namespace

TEST_CASE("lossless decompress restores PNM maxval, plain PNM and 1-bit PNG; info says what it does not", "[safety][cli]") {
  tezip::test::TempDir dir("tezip-test-safety");
  for (int t = 0; t < 3; ++t) {
    const std::string n = std::to_string(t);
    write_text(dir / "m100" / ("a" + n + ".pgm"), std::string("P5\n4 1\n100\n") + char(0) + char(50) + char(100) + char(t));
    write_text(dir / "m4095" / ("a" + n + ".pgm"), std::string("P5\n1 1\n4095\n") + char(0x0f) + char(t));
    write_text(dir / "plain" / ("a" + n + ".ppm"), "P3\n2 1\n255\n1 2 3 4 5 " + n + "\n");
    cv::Mat bits(3, 8, CV_8UC1);
    for (int i = 0; i < 24; ++i) bits.data[i] = ((i + t) % 3) ? 255 : 0;
    fs::create_directories(dir / "bits");
    REQUIRE(cv::imwrite((dir / "bits" / ("b" + n + ".png")).string(), bits, {cv::IMWRITE_PNG_BILEVEL, 1}));
    fs::create_directories(dir / "palette");
    std::ofstream(dir / "palette" / ("p" + n + ".png"), std::ios::binary).write(reinterpret_cast<const char*>(kPalettePng), sizeof kPalettePng);
  }
  for (const std::string name : {"m100", "m4095", "plain", "bits", "palette"}) {
    CAPTURE(name);
    REQUIRE(tezip_cli("compress -q " + quote(dir / name) + " -o " + quote(dir / (name + ".tzp"))).code == 0);
    REQUIRE(tezip_cli("decompress -q " + quote(dir / (name + ".tzp")) + " -o " + quote(dir / ("out_" + name))).code == 0);
    for (const auto& e : fs::directory_iterator(dir / name)) {
      const auto restored = dir / ("out_" + name) / e.path().filename();
      const std::string a = file_text(e.path()), b = file_text(restored);
      if (name == "bits" || name == "palette") {
        REQUIRE(b.size() > 26);
        if (name == "bits") CHECK(int(b[24]) == 1);   // bit depth
        if (name == "bits") CHECK(int(b[25]) == 0);   // gray
        if (name == "palette") CHECK(int(b[25]) == 2);  // RGB: the palette is not kept, as info says
      } else {
        CHECK(a == b);  // PNM: header (maxval, plain or raw) and samples
      }
    }
  }
  CHECK_THAT(tezip_cli("info " + quote(dir / "palette.tzp")).output, Contains("the palette is not kept"));
  CHECK_THAT(tezip_cli("info " + quote(dir / "m100.tzp")).output, Contains("3 pgm:100"));
  CHECK_THAT(tezip_cli("info " + quote(dir / "m100.tzp")).output, Contains("all restored as the same kind of file"));
  // Lossy: samples the bound lets past maxval are clamped to it, so the file stays valid.
  REQUIRE(tezip_cli("compress -q " + quote(dir / "m100") + " --mode abs --bound 20 -o " + quote(dir / "lossy.tzp")).code == 0);
  REQUIRE(tezip_cli("decompress -q " + quote(dir / "lossy.tzp") + " -o " + quote(dir / "out_lossy")).code == 0);
  const std::string lossy = file_text(dir / "out_lossy" / "a0.pgm");
  CHECK(lossy.rfind("P5\n4 1\n100\n", 0) == 0);
  for (std::size_t i = 11; i < lossy.size(); ++i) CHECK(static_cast<unsigned char>(lossy[i]) <= 100);
}

TEST_CASE("batch replaces neither an index.json nor a shard that is not tezip's", "[safety]") {
  Workspace w;
  fs::create_directories(w.dir / "out");
  SECTION("index.json") { write_text(w.dir / "out" / "index.json", "{\"mine\": true}\n"); }
  SECTION("shard") { write_text(w.dir / "out" / "shard-00000.tzp", "my own notes"); }
  const auto before = snapshot_tree(w.dir.path());
  const auto run = tezip_cli("batch -q " + quote(w.in) + " -o " + quote(w.dir / "out"));
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("batch"));
  CHECK(snapshot_tree(w.dir.path()) == before);
}
