#include <catch2/catch.hpp>

#include "support/temp_dir.hpp"

#include <filesystem>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>
#include <string>
#include <vector>

#include "format/errors.hpp"
#include "io/frame_writer.hpp"
#include "io/source.hpp"

namespace fs = std::filesystem;
using namespace tezip;

namespace {

using tezip::test::TempDir;

// Values spread over the whole range, extremes included, so a truncating encoder is caught.
Frame make_frame(const std::string& name, const std::string& format, const Geometry& g) {
  Frame f;
  f.name = name;
  f.format = format;
  f.pixels.resize(g.pixel_count());
  std::mt19937 rng(42);
  for (auto& v : f.pixels) v = std::uint16_t(rng() % (g.max_value() + 1));
  f.pixels[0] = 0;
  f.pixels.back() = std::uint16_t(g.max_value());
  return f;
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("write_frame round-trips lossless formats exactly", "[writer]") {
  struct Case {
    const char* ext;
    const char* format;
    std::uint32_t channels;
    PixelType type;
    const char* written_ext;
  };
  const Case cases[] = {
      {"png", "png", 1, PixelType::U8, "png"},     {"png", "png", 3, PixelType::U8, "png"},
      {"png", "png", 1, PixelType::U16, "png"},    {"png", "png", 3, PixelType::U16, "png"},
      {"pgm", "pgm", 1, PixelType::U8, "pgm"},     {"pgm", "pgm", 1, PixelType::U16, "pgm"},
      {"ppm", "ppm", 3, PixelType::U8, "ppm"},     {"ppm", "ppm", 3, PixelType::U16, "ppm"},
      {"pnm", "pgm", 1, PixelType::U16, "pnm"},    {"bmp", "bmp", 1, PixelType::U8, "bmp"},
      {"bmp", "bmp", 3, PixelType::U8, "bmp"},     {"bmp", "bmp", 1, PixelType::U16, "png"},
      {"tiff", "tiff", 1, PixelType::U8, "tiff"},  {"tif", "tiff", 3, PixelType::U8, "tif"},
      {"tiff", "tiff", 1, PixelType::U16, "tiff"}, {"tiff", "tiff", 3, PixelType::U16, "tiff"},
      {"jpg", "jpeg", 3, PixelType::U8, "png"},    {"JPEG", "jpeg", 1, PixelType::U8, "png"},
  };
  for (const Case& c : cases) {
    INFO(c.ext << " channels " << c.channels << " " << to_string(c.type));
    TempDir dir;
    const Geometry g{17, 9, c.channels, c.type};
    const Frame frame = make_frame(std::string("img_7.") + c.ext, c.format, g);
    const fs::path written = write_frame(dir.path(), frame, g, OutputFormat::Original);
    CHECK(written == dir.path() / (std::string("img_7.") + c.written_ext));
    CHECK(listing(dir.path()) == std::vector<std::string>{written.filename().string()});
    auto sources = open_sources(dir.path());
    REQUIRE(sources.size() == 1);
    CHECK(sources[0]->geometry() == g);
    CHECK(sources[0]->read(0).pixels == frame.pixels);
  }
}

TEST_CASE("container and PNG-forced frames are written as PNG", "[writer]") {
  TempDir dir;
  const Geometry g{8, 4, 3, PixelType::U8};
  CHECK(write_frame(dir.path(), make_frame("frame_000003", "video", g), g, OutputFormat::Original) ==
        dir.path() / "frame_000003.png");
  CHECK(write_frame(dir.path(), make_frame("frame_000004", "npy", g), g, OutputFormat::Original) ==
        dir.path() / "frame_000004.png");
  const Frame ppm = make_frame("a.ppm", "ppm", g);
  CHECK(write_frame(dir.path() / "sub" / "seq", ppm, g, OutputFormat::Png) == dir.path() / "sub" / "seq" / "a.png");
  auto sources = open_sources(dir.path() / "sub" / "seq");
  CHECK(sources[0]->read(0).pixels == ppm.pixels);
  // Overwrites an existing file in place.
  CHECK(write_frame(dir.path(), make_frame("frame_000003", "video", g), g, OutputFormat::Png) ==
        dir.path() / "frame_000003.png");
  CHECK(listing(dir.path()) == std::vector<std::string>{"frame_000003.png", "frame_000004.png", "sub"});
}

TEST_CASE("write_frame refuses bad frames and leaves nothing behind", "[writer]") {
  TempDir dir;
  const Geometry g{8, 4, 1, PixelType::U8};
  Frame short_frame = make_frame("a.png", "png", g);
  short_frame.pixels.pop_back();
  CHECK_THROWS_AS(write_frame(dir.path(), short_frame, g, OutputFormat::Original), OutputError);
  Frame too_big = make_frame("a.png", "png", g);
  too_big.pixels[3] = 256;
  CHECK_THROWS_AS(write_frame(dir.path(), too_big, g, OutputFormat::Original), OutputError);
  for (const char* name : {"../evil.png", "a/b.png", "", "..", "/abs.png"}) {
    CHECK_THROWS_AS(write_frame(dir.path(), make_frame(name, "png", g), g, OutputFormat::Original), OutputError);
  }
  const Geometry four{8, 4, 4, PixelType::U8};
  CHECK_THROWS_AS(write_frame(dir.path(), make_frame("a.png", "png", four), four, OutputFormat::Original),
                  OutputError);
  CHECK(listing(dir.path()).empty());

  // A target that cannot be replaced (a folder of that name): the error names it, no temporary is left.
  fs::create_directories(dir.path() / "b.png" / "x");
  try {
    write_frame(dir.path(), make_frame("b.png", "png", g), g, OutputFormat::Original);
    FAIL("expected OutputError");
  } catch (const OutputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("b.png"));
  }
  CHECK(listing(dir.path()) == std::vector<std::string>{"b.png"});
}

TEST_CASE("colour .npy frames (R, G, B planes) are written as correct-colour PNG", "[writer]") {
  TempDir dir;
  const Geometry g{4, 2, 3, PixelType::U8};
  Frame f{"frame_000000", "npy", Pixels(g.pixel_count(), 0)};
  std::fill_n(f.pixels.begin(), g.plane_size(), std::uint16_t(200));  // red plane only
  const auto path = write_frame(dir.path(), f, g, OutputFormat::Original);
  const cv::Mat image = cv::imread(path.string(), cv::IMREAD_UNCHANGED);
  REQUIRE(image.channels() == 3);
  CHECK(image.at<cv::Vec3b>(1, 2) == cv::Vec3b(0, 0, 200));  // OpenCV's B, G, R: red is last
}
