// The tezip command end to end: the real binary on synthetic frames, checked by exit code, output
// and the pixels it gives back.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <opencv2/imgcodecs.hpp>
#include <regex>
#include <string>
#include <vector>

#include "support/synthetic.hpp"
#include "codecs/simd.hpp"
#include "support/cli_run.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using tezip::test::quote;
using tezip::test::read_file;
using tezip::test::tezip_cli;

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Every frame under `original` comes back under `restored` with the same relative path (or the
// same stem and `.png` when `as_png`) and identical pixels.
void require_identical_tree(const fs::path& original, const fs::path& restored, bool as_png = false) {
  std::size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(original)) {
    if (!e.is_regular_file()) continue;
    fs::path relative = e.path().lexically_relative(original);
    if (as_png) relative.replace_extension(".png");
    CAPTURE(relative.string());
    REQUIRE(fs::exists(restored / relative));
    const cv::Mat a = cv::imread(e.path().string(), cv::IMREAD_UNCHANGED);
    const cv::Mat b = cv::imread((restored / relative).string(), cv::IMREAD_UNCHANGED);
    REQUIRE_FALSE(a.empty());
    CHECK(tezip::test::same_pixels(a, b));
    ++files;
  }
  std::size_t restored_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(restored)) restored_files += e.is_regular_file() ? 1 : 0;
  CHECK(restored_files == files);
  CHECK(files > 0);
}

double max_error_of(const std::string& verify_output) {
  std::smatch m;
  const std::regex pattern("max_error=([0-9.eE+-]+)");
  REQUIRE(std::regex_search(verify_output, m, pattern));
  return std::stod(m[1].str());
}

}  // namespace

TEST_CASE("lossless round trip through the CLI", "[cli]") {
  struct Variant {
    const char* ext;
    int channels, bits;
  };
  const auto v = GENERATE(Variant{"png", 1, 8}, Variant{"png", 3, 8}, Variant{"png", 1, 16}, Variant{"png", 3, 16},
                          Variant{"pgm", 1, 8}, Variant{"pgm", 1, 16}, Variant{"ppm", 3, 8}, Variant{"tiff", 3, 16});
  CAPTURE(v.ext, v.channels, v.bits);
  tezip::test::TempDir dir("tezip-test-cli");
  tezip::test::SyntheticSpec spec;
  spec.ext = v.ext, spec.channels = v.channels, spec.bits = v.bits, spec.frames = 7, spec.width = 33, spec.height = 21;
  tezip::test::write_synthetic_sequence(dir / "in", spec);

  const auto archive = dir / "a.tzp";
  REQUIRE(tezip_cli("compress " + quote(dir / "in") + " -o " + quote(archive) + " --gop 3 -T 2").code == 0);
  REQUIRE(tezip_cli("decompress " + quote(archive) + " -o " + quote(dir / "out")).code == 0);
  CHECK(listing(dir / "out") == listing(dir / "in"));
  require_identical_tree(dir / "in", dir / "out");

  const auto info = tezip_cli("info " + quote(archive));
  CHECK(info.code == 0);
  CHECK_THAT(info.output, Contains("frames: 7"));
  CHECK_THAT(info.output, Contains("lossless"));
  CHECK_THAT(info.output, Contains(std::to_string(spec.width) + "x" + std::to_string(spec.height)));

  const auto verify = tezip_cli("verify " + quote(archive));
  CHECK(verify.code == 0);
  CHECK_THAT(verify.output, Contains("checksums ok"));
  const auto against = tezip_cli("verify " + quote(archive) + " --against " + quote(dir / "in"));
  CHECK(against.code == 0);
  CHECK_THAT(against.output, Contains("bound holds"));
  CHECK(max_error_of(against.output) == 0);
}

TEST_CASE("a dataset of sequences comes back folder by folder", "[cli]") {
  tezip::test::TempDir dir("tezip-test-cli");
  tezip::test::SyntheticSpec spec;
  spec.frames = 5;
  tezip::test::write_synthetic_sequence(dir / "data" / "day1" / "cam_a", spec);
  spec.channels = 3, spec.seed = 2, spec.frames = 4;
  tezip::test::write_synthetic_sequence(dir / "data" / "day1" / "cam_b", spec);
  spec.channels = 1, spec.bits = 16, spec.ext = "pgm", spec.seed = 3, spec.width = 17;
  tezip::test::write_synthetic_sequence(dir / "data" / "day2", spec);

  REQUIRE(tezip_cli("compress " + quote(dir / "data") + " -o " + quote(dir / "d.tzp") + " -q").code == 0);
  const auto info = tezip_cli("info " + quote(dir / "d.tzp"));
  CHECK_THAT(info.output, Contains("sequences:  3"));
  CHECK_THAT(info.output, Contains("day1/cam_a"));
  REQUIRE(tezip_cli("decompress " + quote(dir / "d.tzp") + " -o " + quote(dir / "out") + " -q").code == 0);
  require_identical_tree(dir / "data", dir / "out");
  CHECK(tezip_cli("verify " + quote(dir / "d.tzp") + " --against " + quote(dir / "data")).code == 0);
}

TEST_CASE("decompress --format png writes PNG files with the same pixels", "[cli]") {
  tezip::test::TempDir dir("tezip-test-cli");
  tezip::test::SyntheticSpec spec;
  spec.ext = "pgm", spec.bits = 16;
  tezip::test::write_synthetic_sequence(dir / "in", spec);
  REQUIRE(tezip_cli("compress " + quote(dir / "in") + " -o " + quote(dir / "a.tzp")).code == 0);
  REQUIRE(tezip_cli("decompress " + quote(dir / "a.tzp") + " -o " + quote(dir / "out") + " --format png").code == 0);
  for (const auto& name : listing(dir / "out")) CHECK(fs::path(name).extension() == ".png");
  require_identical_tree(dir / "in", dir / "out", true);
}

TEST_CASE("lossy modes keep their bound", "[cli]") {
  const int bits = GENERATE(8, 16);
  const int channels = GENERATE(1, 3);
  CAPTURE(bits, channels);
  tezip::test::TempDir dir("tezip-test-cli");
  tezip::test::SyntheticSpec spec;
  spec.bits = bits, spec.channels = channels, spec.frames = 6, spec.noise = 4;
  tezip::test::write_synthetic_sequence(dir / "in", spec);

  SECTION("abs 2.5") {
    REQUIRE(tezip_cli("compress " + quote(dir / "in") + " -o " + quote(dir / "a.tzp") + " --mode abs --bound 2.5").code == 0);
    const auto verify = tezip_cli("verify " + quote(dir / "a.tzp") + " --against " + quote(dir / "in"));
    CHECK(verify.code == 0);
    CHECK_THAT(verify.output, Contains("bound holds"));
    CHECK(max_error_of(verify.output) <= 2.5);
    REQUIRE(tezip_cli("decompress " + quote(dir / "a.tzp") + " -o " + quote(dir / "out")).code == 0);
    for (const auto& name : listing(dir / "in")) {
      const cv::Mat x = cv::imread((dir / "in" / name).string(), cv::IMREAD_UNCHANGED);
      const cv::Mat y = cv::imread((dir / "out" / name).string(), cv::IMREAD_UNCHANGED);
      REQUIRE(x.type() == y.type());
      CHECK(tezip::test::max_abs_difference(x, y) <= 2.5);
    }
  }
  SECTION("pwrel 0.05") {
    REQUIRE(tezip_cli("compress " + quote(dir / "in") + " -o " + quote(dir / "a.tzp") + " --mode pwrel --bound 0.05").code == 0);
    const auto verify = tezip_cli("verify " + quote(dir / "a.tzp") + " --against " + quote(dir / "in"));
    CHECK(verify.code == 0);
    CHECK_THAT(verify.output, Contains("bound holds"));
    CHECK(max_error_of(verify.output) <= 0.05 * (bits == 8 ? 255 : 65535));
    REQUIRE(tezip_cli("decompress " + quote(dir / "a.tzp") + " -o " + quote(dir / "out")).code == 0);
    std::size_t violations = 0;
    bool lossy = false;
    for (const auto& name : listing(dir / "in")) {
      cv::Mat x, y;
      cv::imread((dir / "in" / name).string(), cv::IMREAD_UNCHANGED).reshape(1).convertTo(x, CV_64F);
      cv::imread((dir / "out" / name).string(), cv::IMREAD_UNCHANGED).reshape(1).convertTo(y, CV_64F);
      REQUIRE(x.size() == y.size());
      for (int r = 0; r < x.rows; ++r)
        for (int c = 0; c < x.cols; ++c) {
          const double a = x.at<double>(r, c), b = y.at<double>(r, c);
          violations += std::abs(b - a) > 0.05 * a ? 1 : 0;
          lossy = lossy || a != b;
        }
    }
    CHECK(violations == 0);
    CHECK(lossy);  // the bound was used, or the test proves nothing
  }
}

TEST_CASE("info tells what each chunk was coded as: auto's choice, or a sparse chunk", "[cli][sparse]") {
  tezip::test::TempDir dir("tezip-test-cli");
  // Dense frames: predictive chunks, each with auto's choice.
  tezip::test::SyntheticSpec spec;
  spec.frames = 6;
  tezip::test::write_synthetic_sequence(dir / "dense", spec);
  REQUIRE(tezip_cli("compress " + quote(dir / "dense") + " -o " + quote(dir / "d.tzp") + " --gop 3").code == 0);
  const auto dense = tezip_cli("info " + quote(dir / "d.tzp"));
  REQUIRE(dense.code == 0);
  CHECK_THAT(dense.output, Contains("coded as"));
  const std::regex choice(R"(\d+ +(zstd|rans|rans-striped|adaptive) +(previous|intra|linear|bidirectional)\n)");
  CHECK(std::regex_search(dense.output, choice));
  // 16-bit depth maps in miniature: an empty background, a noisy tilted patch that moves.
  fs::create_directories(dir / "depth");
  std::uint32_t state = 7;
  for (int t = 0; t < 5; ++t) {
    cv::Mat f(48, 64, CV_16UC1, cv::Scalar(0));
    for (int y = 10; y < 30; ++y)
      for (int x = 8 + t; x < 36 + t; ++x) {
        state = state * 1103515245u + 12345u;
        f.at<std::uint16_t>(y, x) = std::uint16_t(20000 + 40 * x + 25 * y + (state >> 16) % 3);
      }
    REQUIRE(cv::imwrite((dir / "depth" / ("d_" + std::to_string(t) + ".png")).string(), f));
  }
  REQUIRE(tezip_cli("compress " + quote(dir / "depth") + " -o " + quote(dir / "s.tzp")).code == 0);
  const auto sparse = tezip_cli("info " + quote(dir / "s.tzp"));
  REQUIRE(sparse.code == 0);
  CHECK_THAT(sparse.output, Contains(" sparse\n"));
  const auto against = tezip_cli("verify " + quote(dir / "s.tzp") + " --against " + quote(dir / "depth"));
  CHECK(against.code == 0);
  CHECK(max_error_of(against.output) == 0);
  REQUIRE(tezip_cli("decompress " + quote(dir / "s.tzp") + " -o " + quote(dir / "out")).code == 0);
  require_identical_tree(dir / "depth", dir / "out");
}

TEST_CASE("the strong settings (coder best, profile max) round trip and say what they tried", "[cli]") {
  tezip::test::TempDir dir("tezip-test-cli");
  tezip::test::SyntheticSpec spec;
  spec.channels = 3, spec.frames = 6, spec.width = 40, spec.height = 24;
  tezip::test::write_synthetic_sequence(dir / "in", spec);
  for (const std::string options : {"--coder best", "--profile max", "--profile max --coder fast", "--profile default"}) {
    CAPTURE(options);
    const auto archive = dir / "a.tzp";
    REQUIRE(tezip_cli("compress " + quote(dir / "in") + " -o " + quote(archive) + " -f --gop 3 " + options).code == 0);
    const auto info = tezip_cli("info " + quote(archive));
    REQUIRE(info.code == 0);
    const bool strong = options == "--coder best" || options == "--profile max";
    CHECK((info.output.find("adaptive, LZMA coders") != std::string::npos) == strong);
    const auto against = tezip_cli("verify " + quote(archive) + " --against " + quote(dir / "in"));
    CHECK(against.code == 0);
    CHECK(max_error_of(against.output) == 0);
    fs::remove_all(dir / "out");
    REQUIRE(tezip_cli("decompress " + quote(archive) + " -o " + quote(dir / "out")).code == 0);
    require_identical_tree(dir / "in", dir / "out");
  }
}

TEST_CASE("the fast profile codes with previous, no motion and zstd level 1, unless told otherwise", "[cli]") {
  tezip::test::TempDir dir("tezip-test-cli");
  tezip::test::SyntheticSpec spec;
  spec.channels = 3, spec.frames = 6, spec.width = 40, spec.height = 24;
  tezip::test::write_synthetic_sequence(dir / "in", spec);
  struct Case {
    std::string options, predictor, level;
  };
  for (const Case& c : {Case{"--profile fast", "previous", "zstd level 1,"},
                        Case{"--profile fast --predictor auto --level 9", "auto", "zstd level 9,"},
                        Case{"--profile fast --mode abs --bound 2", "previous", "zstd level 1,"},
                        Case{"--profile default", "auto", "zstd level 9,"}}) {
    CAPTURE(c.options);
    const auto archive = dir / "a.tzp";
    REQUIRE(tezip_cli("compress " + quote(dir / "in") + " -o " + quote(archive) + " -f --gop 3 " + c.options).code == 0);
    const auto info = tezip_cli("info " + quote(archive));
    REQUIRE(info.code == 0);
    CHECK_THAT(info.output, Contains("predictor:  " + c.predictor + "\n"));
    CHECK_THAT(info.output, Contains(c.level));
    const auto against = tezip_cli("verify " + quote(archive) + " --against " + quote(dir / "in"));
    CHECK(against.code == 0);
    CHECK(max_error_of(against.output) == (c.options.find("abs") != std::string::npos ? 2 : 0));
  }
}

TEST_CASE("usage errors exit with 1", "[cli]") {
  tezip::test::TempDir dir("tezip-test-cli");
  tezip::test::write_synthetic_sequence(dir / "in", {});
  const std::string in = quote(dir / "in"), out = quote(dir / "a.tzp");
  const std::string bad = GENERATE_COPY(as<std::string>{}, "", "frobnicate", "compress " + in + " -o " + out + " --mode bogus",
                                        "compress " + in, "compress -o " + out, "compress " + in + " -o " + out + " --mode abs",
                                        "compress " + in + " -o " + out + " --mode pwrel --bound 0.1,0.2",
                                        "compress " + in + " -o " + out + " --mode lossless --bound 1",
                                        "compress " + in + " -o " + out + " --mode abs --bound -1",
                                        "compress " + in + " -o " + out + " --gop 0", "compress " + in + " -o " + out + " --nope",
                                        "compress " + in + " -o " + out + " --level 99",
                                        "compress " + in + " -o " + out + " --predictor oracle",
                                        "compress " + in + " -o " + out + " --profile fastest",
                                        "compress " + in + " -o " + out + " --coder lzma", "decompress " + out,
                                        "decompress " + out + " -o x --format jpeg", "info", "verify");
  const auto run = tezip_cli(bad);
  CHECK(run.code == 1);
  CHECK_THAT(run.output, Contains("usage"));
  CHECK_FALSE(fs::exists(dir / "a.tzp"));
}

TEST_CASE("help and version exit with 0", "[cli]") {
  CHECK(tezip_cli("--help").code == 0);
  CHECK(tezip_cli("--version").code == 0);
  const auto help = tezip_cli("compress --help");
  CHECK(help.code == 0);
  CHECK_THAT(help.output, Contains("--bound"));
}

TEST_CASE("input, data and output errors exit with 2", "[cli]") {
  tezip::test::TempDir dir("tezip-test-cli");
  tezip::test::SyntheticSpec spec;
  spec.frames = 8, spec.width = 40, spec.height = 30;
  tezip::test::write_synthetic_sequence(dir / "in", spec);
  const auto archive = dir / "a.tzp";
  REQUIRE(tezip_cli("compress " + quote(dir / "in") + " -o " + quote(archive) + " --gop 2 -q").code == 0);

  SECTION("a missing input") {
    const auto run = tezip_cli("compress " + quote(dir / "absent") + " -o " + quote(dir / "b.tzp"));
    CHECK(run.code == 2);
    CHECK_THAT(run.output, Contains("absent"));
    CHECK_FALSE(fs::exists(dir / "b.tzp"));
    CHECK(tezip_cli("info " + quote(dir / "absent.tzp")).code == 2);
    CHECK(tezip_cli("verify " + quote(dir / "absent.tzp")).code == 2);
    CHECK(tezip_cli("decompress " + quote(dir / "absent.tzp") + " -o " + quote(dir / "out")).code == 2);
  }
  SECTION("a file that is not an archive") {
    const auto run = tezip_cli("info " + quote(dir / "in" / "frame_0000.png"));
    CHECK(run.code == 2);
    CHECK_THAT(run.output, Contains("tezip:"));
  }
  SECTION("a corrupted archive") {
    auto bytes = read_file(archive);
    bytes[bytes.size() / 2] ^= 0x01;
    const auto damaged = dir / "damaged.tzp";
    std::ofstream(damaged, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    const auto verify = tezip_cli("verify " + quote(damaged));
    CHECK(verify.code == 2);
    CHECK_THAT(verify.output, Contains("tezip: "));
    CHECK_THAT(verify.output, Contains("checksum"));
    CHECK_THAT(verify.output, Contains("FAILED"));
    // Against the original, the frames that failed are not said to hold the bound.
    const auto against = tezip_cli("verify " + quote(damaged) + " --against " + quote(dir / "in"));
    CHECK(against.code == 2);
    CHECK_THAT(against.output, !Contains("bound holds") && Contains("UNCHECKED"));
    const auto quiet = tezip_cli("verify -q " + quote(damaged));
    CHECK(quiet.code == 2);
    CHECK_FALSE(quiet.output.empty());  // -q silences progress, not the failure
    const auto decompress = tezip_cli("decompress " + quote(damaged) + " -o " + quote(dir / "out"));
    CHECK(decompress.code == 2);
    CHECK_FALSE(fs::exists(dir / "out"));
    CHECK(listing(dir.path()) == std::vector<std::string>{"a.tzp", "damaged.tzp", "in"});
  }
  SECTION("a truncated archive") {
    auto bytes = read_file(archive);
    bytes.resize(bytes.size() - 5);
    const auto cut = dir / "cut.tzp";
    std::ofstream(cut, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    const auto info = tezip_cli("info " + quote(cut));
    CHECK(info.code == 2);
    CHECK_THAT(info.output, Contains("truncated"));
  }
  SECTION("no overwrite without -f") {
    const auto before = read_file(archive);
    const auto again = tezip_cli("compress " + quote(dir / "in") + " -o " + quote(archive) + " --mode abs --bound 3");
    CHECK(again.code == 2);
    CHECK_THAT(again.output, Contains("already exists"));
    CHECK(read_file(archive) == before);
    CHECK(tezip_cli("compress " + quote(dir / "in") + " -o " + quote(archive) + " --mode abs --bound 3 -f -q").code == 0);
    CHECK(read_file(archive) != before);
    CHECK_THAT(tezip_cli("info " + quote(archive)).output, Contains("abs"));

    REQUIRE(tezip_cli("decompress -q " + quote(archive) + " -o " + quote(dir / "out")).code == 0);
    std::ofstream(dir / "out" / "marker") << "x";
    const auto decompress = tezip_cli("decompress " + quote(archive) + " -o " + quote(dir / "out"));
    CHECK(decompress.code == 2);
    CHECK_THAT(decompress.output, Contains("already exists"));
    CHECK(fs::exists(dir / "out" / "marker"));
    CHECK(tezip_cli("decompress -q -f " + quote(archive) + " -o " + quote(dir / "out")).code == 0);
    CHECK_FALSE(fs::exists(dir / "out" / "marker"));
    CHECK(listing(dir / "out") == listing(dir / "in"));
  }
  SECTION("an archive that does not match --against") {
    tezip::test::SyntheticSpec other = spec;
    other.seed = 9;
    tezip::test::write_synthetic_sequence(dir / "other", other);
    const auto run = tezip_cli("verify " + quote(archive) + " --against " + quote(dir / "other"));
    CHECK(run.code == 2);
    CHECK_THAT(run.output, Contains("VIOLATED"));
  }
}

TEST_CASE("quiet mode (-q) prints nothing on success", "[cli]") {
  tezip::test::TempDir dir("tezip-test-cli");
  tezip::test::write_synthetic_sequence(dir / "in", {});
  const auto compress = tezip_cli("compress -q " + quote(dir / "in") + " -o " + quote(dir / "a.tzp"));
  CHECK(compress.code == 0);
  CHECK(compress.output.empty());
  const auto decompress = tezip_cli("decompress -q " + quote(dir / "a.tzp") + " -o " + quote(dir / "out"));
  CHECK(decompress.code == 0);
  CHECK(decompress.output.empty());
  const auto verify = tezip_cli("verify -q " + quote(dir / "a.tzp") + " --against " + quote(dir / "in"));
  CHECK(verify.code == 0);
  CHECK(verify.output.empty());
  // Without -q, a summary line (and no progress bar, since stderr is not a terminal).
  const auto loud = tezip_cli("verify " + quote(dir / "a.tzp"));
  CHECK(loud.code == 0);
  CHECK(std::count(loud.output.begin(), loud.output.end(), '\n') == 1);
}

TEST_CASE("the archive does not depend on the thread count", "[cli]") {
  tezip::test::TempDir dir("tezip-test-cli");
  tezip::test::SyntheticSpec spec;
  spec.frames = 13;
  tezip::test::write_synthetic_sequence(dir / "data" / "a", spec);
  spec.channels = 3, spec.bits = 16, spec.seed = 5, spec.frames = 9;
  tezip::test::write_synthetic_sequence(dir / "data" / "b", spec);
  spec.bits = 8, spec.seed = 6, spec.frames = 7;  // 8-bit colour: lossless GOPs try the colour transform
  tezip::test::write_synthetic_sequence(dir / "data" / "c", spec);
  const std::string mode = GENERATE(as<std::string>{}, "", "--mode abs --bound 2.5", "--mode pwrel --bound 0.05 --predictor linear",
                                    "--mse-threshold 20");
  CAPTURE(mode);
  const std::string base = "compress -q " + quote(dir / "data") + " --gop 3 " + mode;
  REQUIRE(tezip_cli(base + " --threads 1 -o " + quote(dir / "t1.tzp")).code == 0);
  REQUIRE(tezip_cli(base + " --threads 2 -o " + quote(dir / "t2.tzp")).code == 0);
  REQUIRE(tezip_cli(base + " -T 5 -o " + quote(dir / "t5.tzp")).code == 0);
  const auto one = read_file(dir / "t1.tzp");
  CHECK(one.size() > 0);
  CHECK(one == read_file(dir / "t2.tzp"));
  CHECK(one == read_file(dir / "t5.tzp"));
}

TEST_CASE("where memory holds fewer GOPs than the threads would code, the archive is the same and a note says so",
          "[cli]") {
  tezip::test::TempDir dir("tezip-test-cli");
  tezip::test::SyntheticSpec spec;
  spec.frames = 12;
  tezip::test::write_synthetic_sequence(dir / "data", spec);
  const std::string base = "compress " + quote(dir / "data") + " --gop 3 -T 2";
  const auto free_run = tezip_cli(base + " -o " + quote(dir / "free.tzp"), "TEZIP_MEMORY_MB=65536");
  REQUIRE(free_run.code == 0);
  CHECK_THAT(free_run.output, !Contains("at a time"));
  // No memory at all: one GOP at a time.
  const auto tight = tezip_cli(base + " -o " + quote(dir / "tight.tzp"), "TEZIP_MEMORY_MB=0");
  REQUIRE(tight.code == 0);
  CHECK_THAT(tight.output, Contains("note: coded 1 GOP batch at a time, not 2 per thread"));
  CHECK(read_file(dir / "tight.tzp") == read_file(dir / "free.tzp"));
  CHECK(tezip_cli("compress -q " + quote(dir / "data") + " --gop 3 -T 2 -o " + quote(dir / "quiet.tzp"), "TEZIP_MEMORY_MB=0")
            .output.empty());
}

TEST_CASE("the forecast's side classes: every kernel path writes and reads the same bytes", "[cli][simd][side]") {
  // The bundled camera sample at abs 2 takes side classes in its striped streams (tests/
  // test_gop_codec.cpp checks that they pay there): the encoder's estimates, the classes of each
  // forecast and their transposition into the decoder's row steps, on every path.
  tezip::test::TempDir dir("tezip-test-cli");
  const fs::path samples = fs::path(TEZIP_SOURCE_DIR) / "datasets/sample/mire";
  std::vector<std::uint8_t> first_archive;
  for (const auto p : tezip::codecs::supported_simd_paths()) {
    const std::string path = tezip::codecs::simd_name(p), env = "TEZIP_SIMD=" + path;
    CAPTURE(path);
    const fs::path archive = dir / (path + ".tzp"), out = dir / ("out-" + path);
    REQUIRE(tezip_cli("compress -q " + quote(samples) + " -o " + quote(archive) + " --mode abs --bound 2", env).code == 0);
    if (first_archive.empty()) first_archive = read_file(archive);
    CHECK(read_file(archive) == first_archive);
    REQUIRE(tezip_cli("decompress -q " + quote(dir / "portable.tzp") + " -o " + quote(out), env).code == 0);
    CHECK(tezip_cli("verify -q " + quote(dir / "portable.tzp") + " --against " + quote(samples), env).code == 0);
    if (path != "portable") require_identical_tree(dir / "out-portable", out);
  }
}

TEST_CASE("every kernel path (TEZIP_SIMD) writes and reads the same bytes", "[cli][simd]") {
  tezip::test::TempDir dir("tezip-test-cli");
  tezip::test::SyntheticSpec spec;
  spec.width = 96, spec.height = 144, spec.frames = 5;  // 144 rows: 16 stripes per plane
  tezip::test::write_synthetic_sequence(dir / "data" / "gray", spec);
  spec.channels = 3, spec.bits = 16, spec.seed = 4, spec.height = 80;  // 8 stripes
  tezip::test::write_synthetic_sequence(dir / "data" / "colour16", spec);
  std::vector<std::string> paths;
  for (const auto path : tezip::codecs::supported_simd_paths()) paths.push_back(tezip::codecs::simd_name(path));
  const std::string mode = GENERATE(as<std::string>{}, "", "--mode abs --bound 2");
  CAPTURE(mode);
  std::vector<std::uint8_t> first_archive;
  for (const auto& path : paths) {
    const std::string env = "TEZIP_SIMD=" + path;
    const fs::path archive = dir / (path + ".tzp"), out = dir / ("out-" + path);
    REQUIRE(tezip_cli("compress -q " + quote(dir / "data") + " -o " + quote(archive) + " -f " + mode, env).code == 0);
    if (first_archive.empty()) first_archive = read_file(archive);
    CHECK(read_file(archive) == first_archive);
    CHECK_THAT(tezip_cli("info " + quote(archive), env).output, Contains("rans-striped"));
    REQUIRE(tezip_cli("decompress -q " + quote(dir / "portable.tzp") + " -o " + quote(out) + " -f", env).code == 0);
    CHECK(tezip_cli("verify -q " + quote(dir / "portable.tzp") + " --against " + quote(dir / "data"), env).code == 0);
    if (mode.empty()) require_identical_tree(dir / "data", out);
    if (path != "portable") require_identical_tree(dir / "out-portable", out);
  }
  const auto bad = tezip_cli("verify " + quote(dir / "portable.tzp"), "TEZIP_SIMD=sse9");
  CHECK(bad.code != 0);
  CHECK_THAT(bad.output, Contains("TEZIP_SIMD=sse9"));
  CHECK(std::count(bad.output.begin(), bad.output.end(), '\n') == 1);
}
