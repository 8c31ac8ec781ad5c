#include <catch2/catch.hpp>

#include "support/temp_dir.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>
#include <random>
#include <string>
#include <vector>

#include "format/errors.hpp"
#include "io/source.hpp"

namespace fs = std::filesystem;
using namespace tezip;

namespace {

using tezip::test::TempDir;

// A deterministic image with every channel different, so a channel mix-up shows.
cv::Mat pattern(int w, int h, int channels, int depth, int seed) {
  cv::Mat m(h, w, CV_MAKETYPE(depth, channels));
  const int max = depth == CV_8U ? 255 : 65535;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c) {
        const int v = (x * 37 + y * 101 + c * 4099 + seed * 7919) % (max + 1);
        if (depth == CV_8U)
          m.ptr<std::uint8_t>(y)[x * channels + c] = std::uint8_t(v);
        else
          m.ptr<std::uint16_t>(y)[x * channels + c] = std::uint16_t(v);
      }
  return m;
}

Pixels planar(const cv::Mat& m) {
  const int c = m.channels();
  const std::size_t plane = std::size_t(m.rows) * m.cols;
  Pixels out(plane * c);
  for (int y = 0; y < m.rows; ++y)
    for (int x = 0; x < m.cols; ++x)
      for (int k = 0; k < c; ++k)
        out[k * plane + std::size_t(y) * m.cols + x] = m.depth() == CV_8U ? m.ptr<std::uint8_t>(y)[x * c + k]
                                                                          : m.ptr<std::uint16_t>(y)[x * c + k];
  return out;
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A .npy file by hand: magic, version 1.0, a header padded to a multiple of 64, then `data`.
std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data,
                      bool fortran = false) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + shape + ", }";
  std::size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += char(dict.size() & 0xff);
  out += char(dict.size() >> 8);
  return out + dict + data;
}

std::string u8_data(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = char(i * 7 % 256);
  return s;
}

std::string u16_data(std::size_t n) {
  std::string s(2 * n, '\0');
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t v = std::uint16_t(i * 2531 + 17);
    s[2 * i] = char(v & 0xff);
    s[2 * i + 1] = char(v >> 8);
  }
  return s;
}

std::string error_of(const fs::path& p) {
  try {
    auto sources = open_sources(p);
    for (auto& s : sources)
      for (std::size_t i = 0; i < s->frame_count(); ++i) s->read(i);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("natural_less orders digit runs by value", "[source]") {
  CHECK(natural_less("f2", "f10"));
  CHECK(natural_less("f10", "f100"));
  CHECK_FALSE(natural_less("f10", "f2"));
  CHECK(natural_less("a1b2", "a1b10"));
  CHECK(natural_less("a1b10", "a2b1"));
  CHECK(natural_less("a", "a1"));
  CHECK(natural_less("img_9.png", "img_10.png"));
  CHECK(natural_less("x99999999999999999999999", "x100000000000000000000000"));
  // Equal values with different zero padding still have a total order.
  CHECK(natural_less("f2", "f02"));
  CHECK_FALSE(natural_less("f02", "f2"));
  CHECK_FALSE(natural_less("f2", "f2"));
  std::vector<std::string> names = {"f100", "f2", "f10", "f1", "f02", "g", "a1b2", "a1b10"};
  std::sort(names.begin(), names.end(), natural_less);
  CHECK(names == std::vector<std::string>{"a1b2", "a1b10", "f1", "f2", "f02", "f10", "f100", "g"});
}

TEST_CASE("folder sources read every lossless format exactly", "[source]") {
  struct Case {
    const char* ext;
    int channels;
    int depth;
    const char* format;
  };
  const Case cases[] = {
      {"png", 1, CV_8U, "png"},   {"png", 3, CV_8U, "png"},   {"png", 1, CV_16U, "png"},
      {"png", 3, CV_16U, "png"},  {"pgm", 1, CV_8U, "pgm"},   {"pgm", 1, CV_16U, "pgm"},
      {"ppm", 3, CV_8U, "ppm"},   {"ppm", 3, CV_16U, "ppm"},  {"bmp", 1, CV_8U, "bmp"},
      {"bmp", 3, CV_8U, "bmp"},   {"tiff", 1, CV_16U, "tiff"}, {"tif", 3, CV_16U, "tiff"},
      {"TIF", 3, CV_8U, "tiff"},  {"pnm", 1, CV_8U, "pgm"},   {"PNG", 3, CV_8U, "png"},
  };
  for (const Case& c : cases) {
    INFO(c.ext << " channels " << c.channels << " depth " << c.depth);
    TempDir dir;
    std::vector<cv::Mat> images;
    for (int i : {10, 2, 1}) {
      images.push_back(pattern(13, 7, c.channels, c.depth, i));
      REQUIRE(cv::imwrite((dir.path() / ("f" + std::to_string(i) + "." + c.ext)).string(), images.back()));
    }
    write_bytes(dir.path() / "notes.txt", "not an image");
    write_bytes(dir.path() / ".hidden.png", "ignored");
    auto sources = open_sources(dir.path());
    REQUIRE(sources.size() == 1);
    SequenceSource& s = *sources[0];
    CHECK(s.name() == "");
    REQUIRE(s.frame_count() == 3);
    CHECK(s.geometry().width == 13);
    CHECK(s.geometry().height == 7);
    CHECK(s.geometry().channels == std::uint32_t(c.channels));
    CHECK(s.geometry().type == (c.depth == CV_8U ? PixelType::U8 : PixelType::U16));
    const int order[] = {2, 1, 0};  // f1, f2, f10
    for (std::size_t i = 0; i < 3; ++i) {
      Frame f = s.read(i);
      CHECK(f.format == c.format);
      CHECK(f.pixels == planar(images[order[i]]));
    }
    CHECK(s.read(0).name == std::string("f1.") + c.ext);
    CHECK(s.read(2).name == std::string("f10.") + c.ext);
  }
}

TEST_CASE("jpeg frames keep their geometry", "[source]") {
  TempDir dir;
  REQUIRE(cv::imwrite((dir.path() / "a.jpg").string(), pattern(16, 8, 3, CV_8U, 0)));
  REQUIRE(cv::imwrite((dir.path() / "b.JPEG").string(), pattern(16, 8, 3, CV_8U, 1)));
  auto sources = open_sources(dir.path());
  REQUIRE(sources.size() == 1);
  CHECK(sources[0]->geometry() == Geometry{16, 8, 3, PixelType::U8});
  Frame f = sources[0]->read(1);
  CHECK(f.format == "jpeg");
  CHECK(f.name == "b.JPEG");
  CHECK(f.pixels.size() == 16u * 8 * 3);
}

TEST_CASE("a dataset folder's sub-folders are sequences", "[source]") {
  TempDir dir;
  for (const char* sub : {"cam10", "cam2", "group/cam1", "empty"}) fs::create_directories(dir.path() / sub);
  cv::imwrite((dir.path() / "cam10" / "0.png").string(), pattern(4, 3, 1, CV_8U, 0));
  cv::imwrite((dir.path() / "cam2" / "0.png").string(), pattern(5, 3, 3, CV_16U, 0));
  cv::imwrite((dir.path() / "cam2" / "1.png").string(), pattern(5, 3, 3, CV_16U, 1));
  cv::imwrite((dir.path() / "group" / "cam1" / "x.pgm").string(), pattern(6, 3, 1, CV_8U, 0));
  write_bytes(dir.path() / "README", "text");
  auto sources = open_sources(dir.path());
  REQUIRE(sources.size() == 3);
  CHECK(sources[0]->name() == "cam2");
  CHECK(sources[0]->frame_count() == 2);
  CHECK(sources[0]->geometry() == Geometry{5, 3, 3, PixelType::U16});
  CHECK(sources[1]->name() == "cam10");
  CHECK(sources[1]->frame_count() == 1);
  CHECK(sources[2]->name() == "group/cam1");
  CHECK(sources[2]->read(0).pixels == planar(pattern(6, 3, 1, CV_8U, 0)));
}

TEST_CASE("frames that do not match the sequence name the file", "[source]") {
  TempDir dir;
  cv::imwrite((dir.path() / "img_1.png").string(), pattern(32, 24, 1, CV_8U, 0));
  cv::imwrite((dir.path() / "img_12.png").string(), pattern(64, 48, 1, CV_8U, 0));
  std::string e = error_of(dir.path());
  CHECK_THAT(e, Catch::Contains("img_12.png") && Catch::Contains("64x48") && Catch::Contains("32x24"));

  TempDir depth;
  cv::imwrite((depth.path() / "a1.png").string(), pattern(8, 8, 1, CV_8U, 0));
  cv::imwrite((depth.path() / "a2.png").string(), pattern(8, 8, 1, CV_16U, 0));
  CHECK_THAT(error_of(depth.path()), Catch::Contains("a2.png") && Catch::Contains("uint16"));

  TempDir channels;
  cv::imwrite((channels.path() / "a1.png").string(), pattern(8, 8, 1, CV_8U, 0));
  cv::imwrite((channels.path() / "a2.png").string(), pattern(8, 8, 3, CV_8U, 0));
  CHECK_THAT(error_of(channels.path()), Catch::Contains("a2.png") && Catch::Contains("3 channels"));
}

TEST_CASE("unusable inputs raise InputError naming them", "[source]") {
  TempDir dir;
  cv::imwrite((dir.path() / "f1.png").string(), pattern(8, 8, 1, CV_8U, 0));
  write_bytes(dir.path() / "f2.png", "garbage, not a png at all");
  CHECK_THAT(error_of(dir.path()), Catch::Contains("f2.png"));

  TempDir first_bad;
  write_bytes(first_bad.path() / "f1.png", "garbage");
  CHECK_THAT(error_of(first_bad.path()), Catch::Contains("f1.png"));

  CHECK_THAT(error_of(dir.path() / "missing"), Catch::Contains("missing") && Catch::Contains("no such file"));

  TempDir empty;
  fs::create_directories(empty.path() / "sub");
  write_bytes(empty.path() / "sub" / "a.txt", "x");
  CHECK_THAT(error_of(empty.path()), Catch::Contains(empty.path().string()));

  TempDir rgba;
  cv::imwrite((rgba.path() / "a.png").string(), pattern(8, 8, 4, CV_8U, 0));
  CHECK_THAT(error_of(rgba.path()), Catch::Contains("a.png") && Catch::Contains("4-channel"));

  TempDir video;
  write_bytes(video.path() / "clip.avi", "not a video");
  CHECK_THAT(error_of(video.path() / "clip.avi"), Catch::Contains("clip.avi"));
}

TEST_CASE("npy arrays of every supported shape", "[source]") {
  TempDir dir;
  SECTION("(T,H,W) uint8") {
    const std::string data = u8_data(3 * 4 * 5);
    write_bytes(dir.path() / "a.npy", npy_bytes("|u1", "(3, 4, 5)", data));
    auto sources = open_sources(dir.path() / "a.npy");
    REQUIRE(sources.size() == 1);
    CHECK(sources[0]->name() == "");
    CHECK(sources[0]->frame_count() == 3);
    CHECK(sources[0]->geometry() == Geometry{5, 4, 1, PixelType::U8});
    Frame f = sources[0]->read(2);
    CHECK(f.format == "npy");
    CHECK(f.name == "frame_000002");
    for (std::size_t i = 0; i < 20; ++i) CHECK(f.pixels[i] == std::uint8_t(data[40 + i]));
    CHECK(sources[0]->read(0).pixels[0] == 0);
  }
  SECTION("(T,H,W,3) uint16 colour is made planar") {
    const std::string data = u16_data(2 * 2 * 3 * 3);
    write_bytes(dir.path() / "c.npy", npy_bytes("<u2", "(2, 2, 3, 3)", data));
    auto sources = open_sources(dir.path() / "c.npy");
    REQUIRE(sources.size() == 1);
    CHECK(sources[0]->geometry() == Geometry{3, 2, 3, PixelType::U16});
    Frame f = sources[0]->read(1);
    REQUIRE(f.pixels.size() == 18);
    for (std::size_t p = 0; p < 6; ++p)
      for (std::size_t c = 0; c < 3; ++c) {
        const std::size_t e = 18 + p * 3 + c;
        CHECK(f.pixels[c * 6 + p] == std::uint16_t(e * 2531 + 17));
      }
  }
  SECTION("(T,H,W,1) is gray") {
    write_bytes(dir.path() / "g.npy", npy_bytes("|u1", "(2, 3, 4, 1)", u8_data(24)));
    auto sources = open_sources(dir.path() / "g.npy");
    REQUIRE(sources.size() == 1);
    CHECK(sources[0]->geometry() == Geometry{4, 3, 1, PixelType::U8});
  }
  SECTION("(N,T,H,W) is N sequences") {
    const std::string data = u16_data(3 * 2 * 4 * 5);
    write_bytes(dir.path() / "n.npy", npy_bytes("<u2", "(3, 2, 4, 5)", data));
    auto sources = open_sources(dir.path() / "n.npy");
    REQUIRE(sources.size() == 3);
    CHECK(sources[0]->name() == "seq_00000");
    CHECK(sources[2]->name() == "seq_00002");
    CHECK(sources[2]->frame_count() == 2);
    CHECK(sources[2]->geometry() == Geometry{5, 4, 1, PixelType::U16});
    Frame f = sources[2]->read(1);
    const std::size_t first = (2 * 2 + 1) * 20;
    for (std::size_t i = 0; i < 20; ++i) CHECK(f.pixels[i] == std::uint16_t((first + i) * 2531 + 17));
  }
  SECTION("version 2 headers") {
    std::string v1 = npy_bytes("|u1", "(1, 2, 2)", u8_data(4));
    const std::size_t len = std::uint8_t(v1[8]) | (std::uint8_t(v1[9]) << 8);
    std::string v2("\x93NUMPY\x02\x00", 8);
    v2 += std::string{char(len & 0xff), char(len >> 8), 0, 0};
    v2 += v1.substr(10);
    write_bytes(dir.path() / "v2.npy", v2);
    auto sources = open_sources(dir.path() / "v2.npy");
    CHECK(sources[0]->read(0).pixels == Pixels{0, 7, 14, 21});
  }
}

TEST_CASE("bad npy files raise InputError naming the file", "[source]") {
  TempDir dir;
  const fs::path p = dir.path() / "bad.npy";
  auto error_for = [&](const std::string& bytes) {
    write_bytes(p, bytes);
    return error_of(p);
  };
  CHECK_THAT(error_for(npy_bytes("<f4", "(1, 2, 2)", std::string(16, '\0'))),
             Catch::Contains("bad.npy") && Catch::Contains("<f4"));
  CHECK_THAT(error_for(npy_bytes(">u2", "(1, 2, 2)", std::string(8, '\0'))), Catch::Contains(">u2"));
  CHECK_THAT(error_for(npy_bytes("|u1", "(2, 2, 2)", u8_data(7))), Catch::Contains("bad.npy"));
  CHECK_THAT(error_for(npy_bytes("|u1", "(2, 2, 2)", u8_data(9))), Catch::Contains("bad.npy"));
  CHECK_THAT(error_for(npy_bytes("|u1", "(2, 2, 2)", u8_data(8), true)), Catch::Contains("Fortran"));
  CHECK_THAT(error_for("\x93NUMPX\x01\x00\x10\x00{}"), Catch::Contains("bad.npy") && Catch::Contains("magic"));
  CHECK_THAT(error_for("\x93NUM"), Catch::Contains("bad.npy"));
  CHECK_THAT(error_for(npy_bytes("|u1", "(2, 4)", u8_data(8))), Catch::Contains("2-D"));
  CHECK_THAT(error_for(npy_bytes("|u1", "(1, 1, 1, 1, 1)", u8_data(1))), Catch::Contains("dimensions"));
  CHECK_THAT(error_for(npy_bytes("|u1", "(0, 2, 2)", "")), Catch::Contains("empty"));
  CHECK_THAT(error_for(npy_bytes("|u1", "(99999999999, 99999999999, 99999999999)", "")),
             Catch::Contains("too large"));
  std::string bad_len = npy_bytes("|u1", "(1, 1, 1)", "x");
  bad_len[8] = char(0xff);
  bad_len[9] = char(0xff);
  CHECK_THAT(error_for(bad_len), Catch::Contains("bad.npy"));
  // Keys NumPy does not write, or a dict cut short.
  std::string header = "{'descr': '|u1', 'shape': (1, 1, 1), }";
  CHECK_THAT(error_for(std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' + header + "x"),
             Catch::Contains("fortran_order"));
}

TEST_CASE("videos are read frame by frame", "[source]") {
  TempDir dir;
  const fs::path path = dir.path() / "clip.avi";
  cv::VideoWriter writer;
  const int fourccs[] = {cv::VideoWriter::fourcc('F', 'F', 'V', '1'), cv::VideoWriter::fourcc('M', 'J', 'P', 'G')};
  bool lossless = false;
  for (int fourcc : fourccs) {
    if (writer.open(path.string(), fourcc, 10.0, cv::Size(32, 16), true)) {
      lossless = fourcc == fourccs[0];
      break;
    }
  }
  REQUIRE(writer.isOpened());
  std::vector<cv::Mat> frames;
  for (int i = 0; i < 7; ++i) {
    frames.push_back(pattern(32, 16, 3, CV_8U, i));
    writer.write(frames.back());
  }
  writer.release();

  auto sources = open_sources(path);
  REQUIRE(sources.size() == 1);
  SequenceSource& s = *sources[0];
  CHECK(s.frame_count() == 7);
  CHECK(s.geometry() == Geometry{32, 16, 3, PixelType::U8});
  Frame f0 = s.read(0);
  CHECK(f0.name == "frame_000000");
  CHECK(f0.format == "video");
  Frame f5 = s.read(5);  // skips forwards
  CHECK(f5.name == "frame_000005");
  CHECK(f5.pixels.size() == 32u * 16 * 3);
  if (lossless) {
    CHECK(f5.pixels == planar(frames[5]));
  }
  CHECK(s.read(1).pixels.size() == 32u * 16 * 3);  // going back reopens the video
}

#ifdef TEZIP_SOURCE_DIR
TEST_CASE("the bundled sample opens as a dataset of three sequences", "[source]") {
  auto sources = open_sources(fs::path(TEZIP_SOURCE_DIR) / "datasets" / "sample");
  REQUIRE(sources.size() == 3);
  CHECK(sources[0]->name() == "castle16");
  CHECK(sources[0]->geometry() == Geometry{160, 120, 1, PixelType::U16});
  CHECK(sources[0]->frame_count() == 8);
  CHECK(sources[1]->name() == "mire");
  CHECK(sources[1]->geometry() == Geometry{160, 120, 1, PixelType::U8});
  CHECK(sources[1]->frame_count() == 16);
  CHECK(sources[2]->name() == "vtest");
  CHECK(sources[2]->geometry() == Geometry{160, 120, 3, PixelType::U8});
  CHECK(sources[2]->frame_count() == 16);
  for (auto& s : sources) {
    for (std::size_t i = 0; i < s->frame_count(); ++i) CHECK(s->read(i).pixels.size() == s->geometry().pixel_count());
  }
  CHECK(sources[2]->read(0).name == "vtest_0240.png");
}
#endif
