// Stream: sharded, shuffled, prefetched, resumable samples for training (DESIGN.md §7).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <set>

#include "format/archive.hpp"
#include "format/errors.hpp"
#include "loader/stream.hpp"
#include "support/loader_data.hpp"

using namespace tezip;
using namespace tezip::test;

namespace {

using Key = std::pair<std::size_t, std::size_t>;  // (sequence, start)

std::vector<Key> keys(Stream& stream, std::size_t limit = SIZE_MAX) {
  std::vector<Key> out;
  while (out.size() < limit) {
    auto s = stream.next();
    if (!s) break;
    out.emplace_back(s->sequence, s->start);
  }
  return out;
}

// Every sample the data holds, worked out from the frame counts alone.
std::set<Key> all_samples(const Reader& reader, std::size_t clip_len, std::size_t stride) {
  std::set<Key> out;
  for (std::size_t s = 0; s < reader.num_sequences(); ++s)
    for (std::size_t t = 0; t + clip_len <= reader.num_frames(s); t += stride) out.insert({s, t});
  return out;
}

StreamOptions base_options() {
  StreamOptions o;
  o.clip_len = 2;
  o.stride = 1;
  o.shuffle_buffer = 8;
  o.threads = 2;
  o.prefetch = 4;
  return o;
}

// 4 sequences, 58 frames, GOPs of 2: 30 blocks.
const LoaderData& data() {
  static const LoaderData d = make_loader_data({17, 12, 20, 9}, 2);
  return d;
}

}  // namespace

TEST_CASE("Stream shards are disjoint, complete and of equal size", "[stream]") {
  auto reader = std::make_shared<const Reader>(data().archive);
  const auto clip_len = GENERATE(1, 3);
  const auto stride = GENERATE(1, 2);
  const auto everything = all_samples(*reader, std::size_t(clip_len), std::size_t(stride));
  for (std::size_t world : {1, 3, 4}) {
    for (std::uint64_t epoch : {0, 1}) {
      CAPTURE(clip_len, stride, world, epoch);
      std::set<Key> seen;
      std::size_t delivered = 0, total_own = 0;
      std::vector<std::size_t> sizes;
      for (std::size_t rank = 0; rank < world; ++rank) {
        auto o = base_options();
        o.clip_len = std::size_t(clip_len), o.stride = std::size_t(stride);
        o.world_size = world, o.rank = rank, o.epoch = epoch, o.exchange = 0.5;
        Stream stream(reader, o);
        std::set<Key> own;
        std::size_t n = 0;
        while (auto s = stream.next()) {
          ++n;
          const Key k{s->sequence, s->start};
          if (s->repeated) {
            CHECK(own.count(k) == 1);  // a pad repeats one of this rank's own samples
          } else {
            CHECK(own.insert(k).second);
            CHECK(seen.insert(k).second);  // no other rank had it
          }
        }
        CHECK(n == stream.size());
        sizes.push_back(n);
        delivered += n;
        total_own += own.size();
      }
      CHECK(seen == everything);
      CHECK(std::all_of(sizes.begin(), sizes.end(), [&](std::size_t n) { return n == sizes[0]; }));
      CHECK(delivered - total_own < world * 4);  // pads: at most a few blocks' worth
    }
  }
}

TEST_CASE("Stream with Balance::Drop gives equal, disjoint shards of the smallest size", "[stream]") {
  auto reader = std::make_shared<const Reader>(data().archive);
  std::set<Key> seen;
  std::vector<std::size_t> sizes;
  for (std::size_t rank = 0; rank < 3; ++rank) {
    auto o = base_options();
    o.world_size = 3, o.rank = rank, o.balance = Balance::Drop, o.threads = 0;
    Stream stream(reader, o);
    const auto k = keys(stream);
    sizes.push_back(k.size());
    for (const auto& key : k) CHECK(seen.insert(key).second);
  }
  CHECK(sizes[0] == sizes[1]);
  CHECK(sizes[1] == sizes[2]);
  CHECK(seen.size() <= all_samples(*reader, 2, 1).size());
}

TEST_CASE("Stream order depends on seed and epoch only", "[stream]") {
  auto reader = std::make_shared<const Reader>(data().archive);
  auto run = [&](std::uint64_t seed, std::uint64_t epoch, unsigned threads) {
    auto o = base_options();
    o.seed = seed, o.epoch = epoch, o.threads = threads;
    Stream stream(reader, o);
    return keys(stream);
  };
  const auto a = run(7, 0, 2);
  CHECK(a == run(7, 0, 2));
  CHECK(a == run(7, 0, 0));  // the number of workers does not change the order
  CHECK(a != run(7, 1, 2));
  CHECK(a != run(8, 0, 2));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted != a);  // shuffled

  // shuffle_buffer = 0: the archive's order.
  auto o = base_options();
  o.shuffle_buffer = 0;
  Stream sequential(reader, o);
  const auto s = keys(sequential);
  CHECK(std::is_sorted(s.begin(), s.end()));
  CHECK(s.size() == a.size());
}

TEST_CASE("Stream exchange moves about a fraction Q of the blocks between epochs", "[stream]") {
  const Reader reader(data().archive);
  for (double q : {0.0, 0.25, 0.5, 1.0}) {
    auto o = base_options();
    o.world_size = 3, o.exchange = q;
    const StreamPlan plan(reader, o);
    REQUIRE(plan.num_blocks() >= 27);
    for (std::uint64_t epoch = 1; epoch <= 3; ++epoch) {
      CAPTURE(q, epoch);
      const auto before = plan.owners(epoch - 1), after = plan.owners(epoch);
      std::size_t moved = 0, bytes = 0;
      for (std::size_t b = 0; b < before.size(); ++b) {
        if (before[b] == SIZE_MAX) continue;
        if (before[b] != after[b]) ++moved, bytes += reader.blocks()[b].bytes;
      }
      const double fraction = double(moved) / double(plan.num_blocks());
      CHECK(std::abs(fraction - q) <= 3.0 / double(plan.num_blocks()) + 1e-9);  // rounding: half a block per rank
      const auto report = plan.exchange(epoch);
      std::size_t reported = 0, reported_bytes = 0;
      for (std::size_t r = 0; r < 3; ++r) reported += report.new_blocks[r], reported_bytes += report.new_bytes[r];
      CHECK(reported == moved);
      CHECK(reported_bytes == bytes);
    }
  }
  // Epoch 0 reads everything for the first time.
  auto o = base_options();
  o.world_size = 3;
  const auto first = StreamPlan(reader, o).exchange(0);
  for (std::size_t r = 0; r < 3; ++r) CHECK(first.new_bytes[r] == first.bytes[r]);
}

TEST_CASE("Stream resumes from a saved state with exactly the samples not yet delivered", "[stream]") {
  auto reader = std::make_shared<const Reader>(data().archive);
  auto o = base_options();
  o.world_size = 2, o.rank = 1, o.epoch = 3, o.seed = 11;
  Stream whole(reader, o);
  const auto all = keys(whole);
  REQUIRE(all.size() > 10);
  for (std::size_t cut : {std::size_t(0), std::size_t(5), all.size() - 1, all.size()}) {
    CAPTURE(cut);
    std::string saved;
    {
      Stream first(reader, o);
      const auto head = keys(first, cut);
      CHECK(std::equal(head.begin(), head.end(), all.begin()));
      saved = first.state().serialize();
    }
    auto resumed_options = o;
    resumed_options.epoch = 0;  // the state carries the epoch
    Stream second(reader, resumed_options, StreamState::parse(saved));
    CHECK(second.position() == cut);
    const auto rest = keys(second);
    CHECK(rest == std::vector<Key>(all.begin() + std::ptrdiff_t(cut), all.end()));
  }
  // A state from other options is refused.
  auto other = o;
  other.seed = 12;
  Stream a(reader, o);
  CHECK_THROWS_AS(Stream(reader, other, a.state()), std::invalid_argument);
  CHECK_THROWS_AS(StreamState::parse("epoch=1"), std::invalid_argument);
}

TEST_CASE("Stream clips equal the original frames in lossless mode", "[stream]") {
  const auto& d = data();
  auto o = base_options();
  o.clip_len = 3, o.stride = 2, o.layout = ClipLayout::Interleaved, o.threads = 2;
  Stream stream(d.archive, o);
  std::size_t n = 0;
  while (auto s = stream.next()) {
    const auto bytes = s->geometry.raw_bytes();
    REQUIRE(s->length == 3);
    REQUIRE(s->data.size() == 3 * bytes);
    for (std::size_t k = 0; k < 3; ++k) {
      const cv::Mat original = original_frame(d, s->sequence, s->start + k);
      REQUIRE(std::size_t(original.total() * original.elemSize()) == bytes);
      CHECK(std::memcmp(s->data.data() + k * bytes, original.data, bytes) == 0);
    }
    ++n;
  }
  CHECK(n == stream.size());
  CHECK(n == all_samples(stream.reader(), 3, 2).size());
}

TEST_CASE("Stream raises a corrupt chunk's error in the consumer", "[stream]") {
  const auto& d = data();
  const auto damaged = d.dir->path() / "damaged.tzp";
  std::filesystem::copy_file(d.archive, damaged, std::filesystem::copy_options::overwrite_existing);
  std::size_t bad_block = 0;
  {
    const ArchiveReader archive(damaged);
    bad_block = archive.index().chunks.size() / 2;
    const auto& chunk = archive.index().chunks[bad_block];
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(chunk.offset + chunk.size / 2));
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x5a);
    f.seekp(std::streamoff(chunk.offset + chunk.size / 2));
    f.write(&c, 1);
  }
  for (unsigned threads : {0u, 1u, 3u}) {
    CAPTURE(threads);
    auto o = base_options();
    o.threads = threads;
    // Run in a thread of its own so that a hang fails the test instead of stalling it.
    auto outcome = std::async(std::launch::async, [&] {
      Stream stream(damaged, o);
      std::size_t good = 0;
      try {
        while (auto s = stream.next()) {
          if (s->start >= stream.reader().blocks()[bad_block].first_frame &&
              s->sequence == stream.reader().blocks()[bad_block].sequence &&
              s->start < stream.reader().blocks()[bad_block].first_frame + stream.reader().blocks()[bad_block].frame_count)
            return std::string("a sample of the damaged block was delivered");
          ++good;
        }
      } catch (const DataError& e) {
        const std::string what = e.what();
        // The same error again on the next call: no silent skip past it.
        try {
          stream.next();
        } catch (const DataError&) {
          return good > 0 || threads == 0 ? what : what;
        }
        return std::string("the second call did not fail");
      }
      return std::string("no error");
    });
    REQUIRE(outcome.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
    const auto what = outcome.get();
    CHECK_THAT(what, Catch::Matchers::Contains("damaged.tzp"));
  }
}

TEST_CASE("Stream without worker threads decodes each GOP once in a shuffled pass", "[stream]") {
  // GOPs of 8 frames and a shuffle window of 64 samples spread each GOP's samples far apart; a
  // reader cache of one GOP must still see one miss per block.
  static const LoaderData d = make_loader_data({40, 32}, 8);  // 9 GOPs; clips of 2 at even frames stay in one
  ReaderOptions ro;
  ro.cache_gops = 1;
  auto reader = std::make_shared<const Reader>(d.archive, ro);
  StreamOptions o;
  o.clip_len = 2;
  o.stride = 2;
  o.shuffle_buffer = 64;
  o.threads = 0;
  Stream stream(reader, o);
  const auto got = keys(stream);
  CHECK(got.size() == 36);
  CHECK(std::set<Key>(got.begin(), got.end()) == all_samples(*reader, 2, 2));
  CHECK(reader->cache_stats().misses == reader->blocks().size());
}
