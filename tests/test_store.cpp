// ChunkStore: the node-local copy of the chunks a rank owns (DESIGN.md §7), and a Reader over it.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>
#include <set>

#include "format/archive.hpp"
#include "format/dataset_index.hpp"
#include "format/errors.hpp"
#include "loader/chunk_store.hpp"
#include "loader/reader.hpp"
#include "loader/stream.hpp"
#include "support/loader_data.hpp"

using namespace tezip;
using namespace tezip::test;
namespace fs = std::filesystem;

namespace {

// 3 sequences, 28 frames, GOPs of 3: 11 chunks (s0: 0-3, s1: 4-6, s2: 7-10).
const LoaderData& data() {
  static const LoaderData d = make_loader_data({10, 7, 11}, 3);
  return d;
}

std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) out.insert(fs::relative(e.path(), dir).string());
  return out;
}

void flip_byte(const fs::path& file, std::uint64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(offset));
  char c = 0;
  f.read(&c, 1);
  c = char(c ^ 0x5a);
  f.seekp(std::streamoff(offset));
  f.write(&c, 1);
}

std::uint64_t allocated_bytes(const fs::path& file) {
  struct stat st {};
  ::stat(file.c_str(), &st);
  return std::uint64_t(st.st_blocks) * 512;
}

}  // namespace

TEST_CASE("ChunkStore stages chunks verified from the archive; a Reader over it needs no global file", "[store]") {
  TempDir dir("tezip-store");
  const auto source = dir / "global.tzp";
  fs::copy_file(data().archive, source);
  const Reader global(source);
  const std::size_t n = global.blocks().size();
  REQUIRE(n == 11);
  const std::vector<std::size_t> mine{1, 2, 6};
  std::uint64_t chunk_bytes = 0;
  for (auto c : mine) chunk_bytes += global.blocks()[c].bytes;
  {
    ChunkStore store(dir / "store", source);
    CHECK(store.num_chunks() == n);
    CHECK(store.held().empty());
    const auto metadata = store.traffic().source_bytes;
    CHECK(metadata < fs::file_size(source) / 2);  // header, index and footer only
    store.stage(mine);
    CHECK(store.held() == mine);
    CHECK(store.bytes_held() == chunk_bytes);
    // Then the chunks and nothing else (ArchiveReader reads the index once more to open the source).
    const auto staged = store.traffic().source_bytes;
    CHECK(staged == metadata + chunk_bytes);
    store.stage(mine);  // held already: nothing read
    CHECK(store.traffic().source_bytes == staged);
    for (auto c : mine) CHECK(store.read(c).size() == global.blocks()[c].bytes);
  }
  // The global file goes away; the store, reopened from its folder alone, still serves its chunks.
  fs::rename(source, dir / "moved.tzp");
  auto store = std::make_shared<const ChunkStore>(dir / "store");
  CHECK(store->held() == mine);
  const Reader local(store);
  const Reader moved(dir / "moved.tzp");
  REQUIRE(local.num_sequences() == moved.num_sequences());
  for (auto c : mine) {
    const auto& b = moved.blocks()[c];
    CHECK(local.clip(b.sequence, b.first_frame, b.frame_count).data == moved.clip(b.sequence, b.first_frame, b.frame_count).data);
  }
  CHECK(store->traffic().store_bytes == chunk_bytes);
  // What it lacks, it names.
  const auto& lacking = moved.blocks()[3];
  try {
    local.frame(lacking.sequence, lacking.first_frame);
    FAIL("no error for a missing chunk");
  } catch (const ChunkMissing& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("does not hold chunk 3 (sequence 's0' frames 9-9"));
    CHECK_THAT(e.what(), Catch::Matchers::Contains("it holds 3 of 11 chunks"));
  }
  CHECK_THROWS_AS(store->read(0), ChunkMissing);
  // A clip that reads on from a held GOP into a missing one fails too, naming the missing one.
  const auto& held = moved.blocks()[2];  // s0 frames 6-8; frame 9 is chunk 3's
  CHECK_THROWS_WITH(local.clip(held.sequence, held.first_frame, held.frame_count + 1),
                    Catch::Matchers::Contains("does not hold chunk 3"));
}

TEST_CASE("ChunkStore over a dataset index of shards", "[store]") {
  const auto a = make_loader_data({4, 5}, 3);
  const auto b = make_loader_data({6}, 3, false, "b");
  const auto dir = a.dir->path();
  fs::copy_file(b.archive, dir / "b.tzp");
  DatasetIndex index;
  for (const auto& [file, names] : {std::pair{std::string("data.tzp"), std::vector<std::string>{"s0", "s1"}},
                                    std::pair{std::string("b.tzp"), std::vector<std::string>{"b0"}}}) {
    ShardEntry e;
    e.path = file;
    e.size = fs::file_size(dir / file);
    e.hash = hash_file(dir / file);
    e.sequences = names;
    const ArchiveReader r(dir / file);
    e.frames = r.index().frame_count();
    e.raw_bytes = r.index().raw_bytes();
    index.shards.push_back(e);
  }
  write_dataset_index(dir / "data.tzd", index);
  const Reader global(dir / "data.tzd");
  auto store = std::make_shared<ChunkStore>(dir / "store", dir / "data.tzd");
  REQUIRE(store->num_chunks() == global.blocks().size());
  REQUIRE(store->archives().size() == 2);
  const std::size_t last = global.blocks().size() - 1;  // in shard b
  store->stage(std::vector<std::size_t>{0, last});
  CHECK_THAT(store->describe(last), Catch::Matchers::Contains("of shard 1 'b.tzp'"));
  const Reader local{std::shared_ptr<const ChunkStore>(store)};
  CHECK(local.frame(2, 5).data == global.frame(2, 5).data);
  CHECK(local.frame(0, 0).data == global.frame(0, 0).data);
  CHECK_THROWS_AS(local.frame(1, 0), ChunkMissing);
}

TEST_CASE("ChunkStore checks every chunk against its checksum", "[store]") {
  TempDir dir("tezip-store");
  const auto source = dir / "global.tzp";
  fs::copy_file(data().archive, source);
  const ArchiveReader archive(source);
  const auto& bad = archive.index().chunks[4];

  SECTION("a damaged chunk in the source is not staged") {
    flip_byte(source, bad.offset + bad.size / 2);
    ChunkStore store(dir / "store", source);
    CHECK_THROWS_WITH(store.stage(std::vector<std::size_t>{3, 4, 5}), Catch::Matchers::Contains("global.tzp"));
    CHECK_FALSE(store.has(4));
  }
  SECTION("bytes from elsewhere are added only when they match") {
    ChunkStore store(dir / "store", source);
    auto bytes = archive.read_chunk(4);
    bytes[bytes.size() / 2] ^= 1;
    CHECK_THROWS_WITH(store.add(4, bytes), Catch::Matchers::Contains("do not match its checksum"));
    CHECK_THROWS_AS(store.add(4, archive.read_chunk(5)), DataError);
    CHECK_FALSE(store.has(4));
    store.add(4, archive.read_chunk(4));
    store.commit();
    CHECK(store.has(4));
    CHECK(store.traffic().added_bytes == bad.size);
  }
  SECTION("a chunk damaged in the store is reported by read() and by a Reader over it") {
    {
      ChunkStore store(dir / "store", source);
      store.stage(std::vector<std::size_t>{4});
    }
    flip_byte(dir / "store" / "shards" / "00000.tzp", bad.offset + 1);
    auto store = std::make_shared<const ChunkStore>(dir / "store");
    CHECK_THROWS_WITH(store->read(4), Catch::Matchers::Contains("holds a damaged chunk 4"));
    const Reader local(store);
    CHECK_THROWS_AS(local.frame(bad.sequence, bad.first_frame), DataError);
  }
}

TEST_CASE("ChunkStore keeps to its capacity", "[store]") {
  TempDir dir("tezip-store");
  const ArchiveReader archive(data().archive);
  const auto& c = archive.index().chunks;
  ChunkStoreOptions o;
  o.capacity = c[0].size + c[1].size + c[2].size - 1;
  ChunkStore store(dir / "store", data().archive, o);
  const auto before = store.traffic().source_bytes;
  CHECK_THROWS_AS(store.stage(std::vector<std::size_t>{0, 1, 2}), StoreFull);
  CHECK(store.held().empty());
  CHECK(store.traffic().source_bytes == before);  // refused before reading anything
  store.stage(std::vector<std::size_t>{0, 1});
  CHECK_THROWS_WITH(store.add(2, archive.read_chunk(2)), Catch::Matchers::Contains("would pass its capacity"));
  store.drop(std::vector<std::size_t>{0});
  store.add(2, archive.read_chunk(2));
  store.commit();
  CHECK(store.held() == std::vector<std::size_t>{1, 2});
}

TEST_CASE("ChunkStore creates only its own files and touches nothing else", "[store]") {
  TempDir dir("tezip-store");
  SECTION("a folder that is not a store is refused, untouched") {
    fs::create_directories(dir / "user");
    { std::ofstream(dir / "user" / "notes.txt") << "mine"; }
    CHECK_THROWS_WITH(ChunkStore(dir / "user", data().archive), Catch::Matchers::Contains("not a tezip chunk store and not empty"));
    CHECK(listing(dir / "user") == std::set<std::string>{"notes.txt"});
  }
  SECTION("a file is not a store folder") {
    { std::ofstream(dir / "file") << "mine"; }
    CHECK_THROWS_AS(ChunkStore(dir / "file", data().archive), InputError);
    CHECK(fs::file_size(dir / "file") == 4);
  }
  SECTION("no store, no source") { CHECK_THROWS_WITH(ChunkStore(dir / "none"), Catch::Matchers::Contains("no chunk store here")); }
  SECTION("a store of another dataset is refused") {
    const auto other = make_loader_data({5, 5}, 2);
    { ChunkStore store(dir / "store", data().archive); }
    CHECK_THROWS_WITH(ChunkStore(dir / "store", other.archive), Catch::Matchers::Contains("a chunk store of another dataset"));
  }
  SECTION("its files: the manifest and one copy per shard, no temporary left; drops give space back") {
    const auto bigger = make_loader_data({150, 150}, 6);  // chunks large enough to span file system blocks
    ChunkStore store(dir / "store", bigger.archive);
    std::vector<std::size_t> all(store.num_chunks());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    store.stage(all);
    CHECK(listing(dir / "store") == std::set<std::string>{"tezip-store.json", "shards", "shards/00000.tzp"});
    const auto copy = dir / "store" / "shards" / "00000.tzp";
    CHECK(fs::file_size(copy) == fs::file_size(bigger.archive));
    const auto full = allocated_bytes(copy);
    store.drop(std::vector<std::size_t>(all.begin(), all.end() - 1));
    CHECK(allocated_bytes(copy) < full);
    CHECK(store.held() == std::vector<std::size_t>{all.back()});
    store.set_tag("plan=1 epoch=2");
    CHECK_THROWS_WITH(ChunkStore(dir / "store"), Catch::Matchers::Contains("open in another process"));
  }
  SECTION("reopened, it holds what it held") {
    {
      ChunkStore store(dir / "store", data().archive);
      store.stage(std::vector<std::size_t>{4, 7});
      store.set_tag("plan=1 epoch=2");
    }
    const ChunkStore reopened(dir / "store");
    CHECK(reopened.held() == std::vector<std::size_t>{4, 7});
    CHECK(reopened.tag() == "plan=1 epoch=2");
    CHECK(listing(dir / "store").size() == 3);
  }
  SECTION("a damaged manifest is reported") {
    { ChunkStore store(dir / "store", data().archive); }
    { std::ofstream(dir / "store" / "tezip-store.json") << "{\"format\": \"tezip-chunk-store\", \"version\": 1, \"held\": [99]}"; }
    CHECK_THROWS_AS(ChunkStore(dir / "store"), DataError);
  }
}

TEST_CASE("StreamPlan::chunks_needed covers every GOP a rank's clips read", "[store]") {
  const Reader reader(data().archive);
  for (std::size_t clip_len : {1, 2, 5}) {
    StreamOptions o;
    o.clip_len = clip_len, o.world_size = 3, o.exchange = 0.3;
    const StreamPlan plan(reader, o);
    for (std::uint64_t epoch : {0, 1, 2}) {
      const auto needed = plan.chunks_needed(epoch);
      const auto owner = plan.owners(epoch);
      for (std::size_t r = 0; r < 3; ++r) {
        const std::set<std::size_t> have(needed[r].begin(), needed[r].end());
        for (std::size_t b = 0; b < owner.size(); ++b)
          if (owner[b] == r) CHECK(have.count(b));
        for (const auto& s : plan.order(epoch, r).decode)
          for (std::size_t t = s.start; t < s.start + clip_len; ++t) {
            CAPTURE(clip_len, epoch, r, s.sequence, t);
            CHECK(have.count(reader.block_of(s.sequence, t)));
          }
      }
    }
  }
}
