// Reader: random access to frames and clips of an archive or a dataset index, decoding only the
// GOPs a request needs, with a bounded cache, safe from several threads.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "format/archive.hpp"
#include "format/dataset_index.hpp"
#include "loader/reader.hpp"
#include "support/loader_data.hpp"

using namespace tezip;
using namespace tezip::test;

namespace {

// The clip's frame k as an OpenCV image (interleaved), for comparison with the original file.
cv::Mat frame_of(const Clip& clip, std::size_t k) {
  REQUIRE(clip.layout == ClipLayout::Interleaved);
  const auto& g = clip.geometry;
  const int type = CV_MAKETYPE(g.type == PixelType::U8 ? CV_8U : CV_16U, int(g.channels));
  cv::Mat m(int(g.height), int(g.width), type);
  std::memcpy(m.data, clip.data.data() + k * g.raw_bytes(), g.raw_bytes());
  return m;
}

}  // namespace

TEST_CASE("Reader lists sequences and gives back the original frames and clips", "[reader]") {
  const auto data = make_loader_data({7, 10, 5}, 3, /*colour16=*/true);
  const Reader reader(data.archive);
  REQUIRE(reader.num_sequences() == 3);
  for (std::size_t s = 0; s < 3; ++s) {
    CHECK(reader.sequence_name(s) == data.names[s]);
    CHECK(reader.num_frames(s) == data.files[s].size());
  }
  CHECK(reader.geometry(0).channels == 1);
  CHECK(reader.geometry(2).channels == 3);
  CHECK(reader.geometry(2).type == PixelType::U16);

  for (std::size_t s = 0; s < 3; ++s)
    for (std::size_t t = 0; t < reader.num_frames(s); ++t)
      CHECK(same_pixels(frame_of(reader.frame(s, t, ClipLayout::Interleaved), 0), original_frame(data, s, t)));

  // A clip across GOP boundaries (GOPs of 3 frames: 2..7 spans three of them).
  const Clip clip = reader.clip(1, 2, 6, ClipLayout::Interleaved);
  REQUIRE(clip.length == 6);
  for (std::size_t k = 0; k < 6; ++k) CHECK(same_pixels(frame_of(clip, k), original_frame(data, 1, 2 + k)));

  // Planar is the channel planes one after another.
  const Clip planar = reader.clip(2, 1, 2, ClipLayout::Planar);
  const cv::Mat original = original_frame(data, 2, 2);
  const auto& g = planar.geometry;
  std::vector<cv::Mat> planes;
  cv::split(original, planes);
  for (std::size_t c = 0; c < 3; ++c)
    for (std::size_t y = 0; y < g.height; y += 5)
      for (std::size_t x = 0; x < g.width; x += 3)
        CHECK(planar.at(g.pixel_count() + c * g.plane_size() + y * g.width + x) == planes[c].at<std::uint16_t>(int(y), int(x)));
}

TEST_CASE("Reader gives 8-bit colour clips planar and interleaved, from cached and fresh GOPs", "[reader]") {
  // The interleaved and planar clips of an 8-bit colour sequence (across GOPs of 3, from a cached
  // GOP and a fresh one) are its frames.
  TempDir dir("tezip-reader-colour8");
  SyntheticSpec spec;
  spec.frames = 8, spec.width = 21, spec.height = 11, spec.channels = 3, spec.seed = 5;
  const auto files = write_synthetic_sequence(dir.path() / "src" / "c8", spec);
  CompressOptions options;
  options.gop.size = 3;
  options.threads = 1;
  compress(dir.path() / "src", dir.path() / "c8.tzp", options);
  const Reader reader(dir.path() / "c8.tzp");
  REQUIRE(reader.geometry(0).type == PixelType::U8);
  REQUIRE(reader.geometry(0).channels == 3);
  for (const std::size_t start : {1u, 0u}) {
    const Clip clip = reader.clip(0, start, 7, ClipLayout::Interleaved);
    for (std::size_t k = 0; k < 7; ++k)
      CHECK(same_pixels(frame_of(clip, k), cv::imread(files[start + k].string(), cv::IMREAD_UNCHANGED)));
    const Clip planar = reader.clip(0, start, 7, ClipLayout::Planar);
    const auto& g = planar.geometry;
    for (std::size_t k = 0; k < 7; ++k) {
      std::vector<cv::Mat> planes;
      cv::split(cv::imread(files[start + k].string(), cv::IMREAD_UNCHANGED), planes);
      for (std::size_t c = 0; c < 3; ++c)
        for (std::size_t y = 0; y < g.height; ++y)
          for (std::size_t x = 0; x < g.width; ++x)
            REQUIRE(planar.at(k * g.pixel_count() + c * g.plane_size() + y * g.width + x) ==
                    planes[c].at<std::uint8_t>(int(y), int(x)));
    }
  }
}

TEST_CASE("Reader decodes only the GOPs it needs and keeps a bounded cache", "[reader]") {
  const auto data = make_loader_data({12}, 4);
  ReaderOptions options;
  options.cache_gops = 2;
  const Reader reader(data.archive, options);
  REQUIRE(reader.blocks().size() == 3);
  CHECK(reader.block_of(0, 5) == 1);
  (void)reader.frame(0, 0);
  (void)reader.frame(0, 1);
  (void)reader.frame(0, 3);
  CHECK(reader.cache_stats().misses == 1);
  CHECK(reader.cache_stats().hits == 2);
  (void)reader.frame(0, 4);
  (void)reader.frame(0, 8);   // the cache holds two GOPs: GOP 0 goes
  (void)reader.frame(0, 0);
  CHECK(reader.cache_stats().misses == 4);
  (void)reader.clip(0, 2, 10);  // GOPs 0, 1, 2
  CHECK(reader.cache_stats().misses <= 6);
}

TEST_CASE("Reader serves several threads at once", "[reader]") {
  const auto data = make_loader_data({9, 9}, 3);
  ReaderOptions options;
  options.cache_gops = 2;
  const Reader reader(data.archive, options);
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (int i = 0; i < 40; ++i) {
        const std::size_t s = std::size_t((i + w) % 2), t = std::size_t((i * 7 + w) % 9);
        const Clip c = reader.frame(s, t, ClipLayout::Interleaved);
        const cv::Mat o = cv::imread(data.files[s][t].string(), cv::IMREAD_UNCHANGED);
        if (std::memcmp(c.data.data(), o.data, c.data.size()) != 0) ++failures[std::size_t(w)];
      }
    });
  for (auto& t : threads) t.join();
  CHECK(failures == std::vector<int>(4, 0));
}

TEST_CASE("Reader rejects requests outside a sequence", "[reader]") {
  const auto data = make_loader_data({5}, 3);
  const Reader reader(data.archive);
  CHECK_THROWS_AS(reader.frame(0, 5), std::out_of_range);
  CHECK_THROWS_AS(reader.frame(1, 0), std::out_of_range);
  CHECK_THROWS_AS(reader.clip(0, 3, 3), std::out_of_range);
  CHECK_THROWS_AS(reader.clip(0, 0, 0), std::out_of_range);
}

TEST_CASE("Reader opens a dataset index as one dataset", "[reader]") {
  const auto a = make_loader_data({4, 5}, 3);
  const auto b = make_loader_data({6}, 3, false, "b");
  const auto dir = a.dir->path();
  std::filesystem::copy_file(b.archive, dir / "b.tzp");
  DatasetIndex index;
  for (const auto& [file, names] : {std::pair{std::string("data.tzp"), std::vector<std::string>{"s0", "s1"}},
                                    std::pair{std::string("b.tzp"), std::vector<std::string>{"b0"}}}) {
    ShardEntry e;
    e.path = file;
    e.size = std::filesystem::file_size(dir / file);
    const ArchiveReader r(dir / file);
    std::ifstream in(dir / file, std::ios::binary);
    const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    e.hash = hash_bytes(bytes);
    e.sequences = names;
    e.frames = r.index().frame_count();
    e.raw_bytes = r.index().raw_bytes();
    index.shards.push_back(e);
  }
  const auto index_path = dir / "data.tzd";
  write_dataset_index(index_path, index);
  const Reader reader(index_path);
  REQUIRE(reader.num_sequences() == 3);
  CHECK(reader.num_frames(0) == 4);
  CHECK(reader.num_frames(2) == 6);
  const Clip c = reader.frame(2, 5, ClipLayout::Interleaved);
  CHECK(same_pixels(frame_of(c, 0), original_frame(b, 0, 5)));
}
