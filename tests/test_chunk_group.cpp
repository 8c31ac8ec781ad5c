// Groups of short sequences (compressor/chunk_group.hpp): stored together where that is smaller,
// decoded bit for bit and within the bound, damage reported, and dealt whole by the Stream.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <thread>

#include "codecs/quantize/error_bound.hpp"
#include "compressor/chunk_group.hpp"
#include "compressor/decoder.hpp"
#include "compressor/encoder.hpp"
#include "format/archive.hpp"
#include "format/errors.hpp"
#include "loader/chunk_store.hpp"
#include "loader/reader.hpp"
#include "loader/stream.hpp"
#include "support/memory_source.hpp"
#include "support/npy_file.hpp"
#include "support/temp_dir.hpp"

using namespace tezip;
using namespace tezip::test;

namespace {

// Moving MNIST in miniature, `sequences` of `frames` frames of 32 x 32: two 8 x 8 sprites from a
// set of four shared by every sequence (Moving MNIST's digits come from one pool), at random
// places, each moved by its own whole-pixel velocity, on an exact zero background. An LZ coder of
// several sequences finds the sprites' rows in the sequences before; one of each alone does not.
std::vector<std::uint8_t> sprite_sequences(std::size_t sequences, std::size_t frames, std::uint32_t seed) {
  constexpr int kSize = 32, kSprite = 8;
  std::mt19937 rng(seed);
  std::vector<std::vector<std::uint8_t>> pool(4, std::vector<std::uint8_t>(kSprite * kSprite));
  for (auto& s : pool)
    for (auto& v : s) v = rng() % 3 == 0 ? 0 : std::uint8_t(128 + rng() % 128);
  std::vector<std::uint8_t> out(sequences * frames * kSize * kSize, 0);
  for (std::size_t n = 0; n < sequences; ++n) {
    int x[2], y[2], dx[2], dy[2];
    std::size_t which[2];
    for (int k = 0; k < 2; ++k) {
      x[k] = int(rng() % (kSize - kSprite)), y[k] = int(rng() % (kSize - kSprite));
      dx[k] = int(rng() % 5) - 2, dy[k] = int(rng() % 5) - 2, which[k] = rng() % pool.size();
    }
    for (std::size_t t = 0; t < frames; ++t) {
      std::uint8_t* f = out.data() + (n * frames + t) * kSize * kSize;
      for (int k = 0; k < 2; ++k)
        for (int r = 0; r < kSprite; ++r)
          for (int c = 0; c < kSprite; ++c) {
            const int px = x[k] + dx[k] * int(t) + c, py = y[k] + dy[k] * int(t) + r;
            if (px < 0 || py < 0 || px >= kSize || py >= kSize) continue;
            std::uint8_t& p = f[py * kSize + px];
            p = std::max(p, pool[which[k]][std::size_t(r) * kSprite + std::size_t(c)]);
          }
    }
  }
  return out;
}

constexpr std::size_t kSequences = 24, kFrames = 6, kFrameBytes = 32 * 32;

struct GroupData {
  TempDir dir{"tezip-group"};
  std::vector<std::uint8_t> pixels = sprite_sequences(kSequences, kFrames, 7);
  std::filesystem::path input = dir / "sprites.npy";
  GroupData() { write_npy(input, {kSequences, kFrames, 32, 32}, pixels); }
  // The archive with groups of up to `group_bytes` (6 KB a sequence: 64 KB make groups of 10).
  std::filesystem::path archive(std::uint64_t group_bytes, const std::string& mode = "lossless") const {
    const auto path = dir / (mode + "-" + std::to_string(group_bytes) + ".tzp");
    if (std::filesystem::exists(path)) return path;
    CompressOptions o;
    o.source.npy_layout = NpyLayout::NTHW;
    o.group_bytes = group_bytes;
    o.threads = 2;
    if (mode == "abs2") o.coding.bound = {codecs::BoundMode::Abs, 2, 0};
    compress(input, path, o);
    return path;
  }
};

const GroupData& data() {
  static const GroupData d;
  return d;
}

std::size_t grouped_chunks(const ArchiveIndex& index) {
  std::size_t n = 0;
  for (const auto& c : index.chunks) n += c.stats.grouped;
  return n;
}

}  // namespace

TEST_CASE("short sequences are stored in groups where that is smaller, and decode bit for bit", "[group]") {
  const auto& d = data();
  const auto grouped = d.archive(64 << 10), alone = d.archive(0);
  CHECK(std::filesystem::file_size(grouped) < std::filesystem::file_size(alone));
  const ArchiveDecoder decoder(grouped);
  const auto& index = decoder.index();
  REQUIRE(index.chunks.size() == kSequences);
  CHECK(grouped_chunks(index) == kSequences);
  CHECK(grouped_chunks(ArchiveDecoder(alone).index()) == 0);
  // Groups of 10 sequences at most (64 KB of 6 KB sequences), members numbered in order.
  for (std::size_t i = 0; i < index.chunks.size(); ++i) {
    const auto& s = index.chunks[i].stats;
    CHECK(s.member < 10);
    if (s.member > 0) CHECK(index.chunks[i - 1].stats.member + 1 == s.member);
  }
  // Every sequence as it was, from chunks asked for one by one, backwards (no group decoded in
  // order), and several at once.
  for (std::size_t i = kSequences; i-- > 0;) {
    const GopFrames frames = decoder.decode_chunk(i);
    REQUIRE(frames.size() == kFrames);
    for (std::size_t t = 0; t < kFrames; ++t)
      for (std::size_t p = 0; p < kFrameBytes; ++p)
        REQUIRE(frames[t][p] == d.pixels[(i * kFrames + t) * kFrameBytes + p]);
  }
  const std::size_t some[] = {3, 12, 11, 0};
  const auto batch = decoder.decode_chunks(some);
  for (std::size_t k = 0; k < 4; ++k) CHECK(batch[k] == decoder.decode_chunk(some[k]));
  for (std::size_t i = 0; i < kSequences; ++i) CHECK_NOTHROW(decoder.check_chunk(i));
  // The Reader: frames and clips of any member.
  const Reader reader(grouped);
  const Clip clip = reader.clip(17, 2, 3);
  for (std::size_t k = 0; k < 3; ++k)
    for (std::size_t p = 0; p < kFrameBytes; ++p)
      REQUIRE(clip.data[k * kFrameBytes + p] == d.pixels[(17 * kFrames + 2 + k) * kFrameBytes + p]);
  for (std::size_t b = 0; b < reader.blocks().size(); ++b) CHECK(reader.blocks()[b].unit == b - index.chunks[b].stats.member);
}

TEST_CASE("a group at a bound holds the bound on every pixel", "[group]") {
  const auto& d = data();
  const auto path = d.archive(64 << 10, "abs2");
  const ArchiveDecoder decoder(path);
  CHECK(grouped_chunks(decoder.index()) > 0);
  for (std::size_t i = 0; i < kSequences; ++i) {
    const GopFrames frames = decoder.decode_chunk(i);
    for (std::size_t t = 0; t < kFrames; ++t)
      for (std::size_t p = 0; p < kFrameBytes; ++p)
        REQUIRE(std::abs(int(frames[t][p]) - int(d.pixels[(i * kFrames + t) * kFrameBytes + p])) <= 2);
  }
}

TEST_CASE("sequences of several GOPs, or larger than a quarter of a group, stay alone", "[group]") {
  const auto& d = data();
  // 6 KB sequences: groups of 16 KB would take only sequences of 4 KB or less.
  CHECK(grouped_chunks(ArchiveDecoder(d.archive(16 << 10)).index()) == 0);
  CompressOptions o;
  o.source.npy_layout = NpyLayout::NTHW;
  o.gop.size = 4;  // two GOPs a sequence
  const auto path = d.dir / "gops.tzp";
  compress(d.input, path, o);
  const ArchiveDecoder decoder(path);
  CHECK(decoder.index().chunks.size() == 2 * kSequences);
  CHECK(grouped_chunks(decoder.index()) == 0);
}

TEST_CASE("groups coded beside the GOPs after them leave the archive the same for any thread count", "[group]") {
  // Ten short sequences, a sequence of five GOPs, ten short ones again: each group of ten is coded
  // on the pool while the GOPs after it are coded, and stored in its place.
  constexpr std::size_t kShort = 10, kLong = 40;
  const auto first = sprite_sequences(kShort, kFrames, 11), middle = sprite_sequences(1, kLong, 12),
             last = sprite_sequences(kShort, kFrames, 13);
  const Geometry geometry{32, 32, 1, PixelType::U8};
  const auto frames_of = [&](const std::vector<std::uint8_t>& pixels, std::size_t sequence, std::size_t count) {
    std::vector<std::vector<std::uint16_t>> frames;
    for (std::size_t t = 0; t < count; ++t) {
      const auto* f = pixels.data() + (sequence * count + t) * kFrameBytes;
      frames.emplace_back(f, f + kFrameBytes);
    }
    return frames;
  };
  const auto sources = [&] {
    std::vector<std::unique_ptr<SequenceSource>> out;
    const auto add = [&](char prefix, std::size_t n, std::vector<std::vector<std::uint16_t>> frames) {
      std::string name(1, prefix);
      name += std::to_string(n);
      out.push_back(std::make_unique<MemorySource>(name, geometry, std::move(frames)));
    };
    for (std::size_t n = 0; n < kShort; ++n) add('a', n, frames_of(first, n, kFrames));
    add('l', 0, frames_of(middle, 0, kLong));
    for (std::size_t n = 0; n < kShort; ++n) add('b', n, frames_of(last, n, kFrames));
    return out;
  };
  const TempDir dir("tezip-group-threads");
  std::vector<std::uint8_t> reference;
  for (const unsigned threads : {1u, 2u, 4u}) {
    CompressOptions o;
    o.group_bytes = 64 << 10;
    o.gop.size = 8;
    o.threads = threads;
    const auto path = dir / (std::to_string(threads) + "-threads.tzp");
    compress_sources(sources(), path, o);
    std::ifstream in(path, std::ios::binary);
    const std::vector<std::uint8_t> bytes(std::istreambuf_iterator<char>(in), {});
    if (reference.empty()) {
      reference = bytes;
      const ArchiveDecoder decoder(path);
      const auto& index = decoder.index();
      REQUIRE(index.chunks.size() == 2 * kShort + kLong / 8);
      CHECK(grouped_chunks(index) == 2 * kShort);
      for (std::size_t i = 0; i < index.chunks.size(); ++i) {
        const auto& chunk = index.chunks[i];
        CHECK(chunk.stats.grouped == (chunk.sequence != kShort));
        const auto& pixels = chunk.sequence < kShort ? first : chunk.sequence == kShort ? middle : last;
        const std::size_t n = chunk.sequence < kShort ? chunk.sequence : chunk.sequence == kShort ? 0 : chunk.sequence - kShort - 1;
        const std::size_t count = chunk.sequence == kShort ? kLong : kFrames;
        const GopFrames frames = decoder.decode_chunk(i);
        for (std::size_t t = 0; t < frames.size(); ++t)
          REQUIRE(std::equal(frames[t].begin(), frames[t].end(),
                             pixels.begin() + std::ptrdiff_t((n * count + chunk.first_frame + t) * kFrameBytes)));
      }
    } else {
      CHECK(bytes == reference);
    }
  }
}

TEST_CASE("where a group loses, its members are coded in full: the archive of groups off, byte for byte", "[group]") {
  // Short noisy gradients (camera-like): LZMA on their pixels loses to their predictive chunks.
  // Members are first coded quickly, the group measured against those chunks; where it loses, each
  // member's chunk must be its full coding's, as with groups off (at a bound too, from its frames,
  // not from the quick chunk's reconstruction).
  constexpr std::size_t kNoisy = 12, kSide = 32;
  std::mt19937 rng(21);
  std::normal_distribution<double> noise(0.0, 4.0);
  std::vector<std::uint8_t> pixels(kNoisy * kFrames * kSide * kSide);
  for (std::size_t n = 0; n < kNoisy; ++n) {
    const double gx = 2.0 + double(rng() % 3), gy = 1.0 + double(rng() % 3);
    for (std::size_t t = 0; t < kFrames; ++t)
      for (std::size_t y = 0; y < kSide; ++y)
        for (std::size_t x = 0; x < kSide; ++x)
          pixels[((n * kFrames + t) * kSide + y) * kSide + x] =
              std::uint8_t(std::clamp(40.0 + gx * double(x + t) + gy * double(y) + noise(rng), 0.0, 255.0));
  }
  const TempDir dir("tezip-group-loses");
  const auto input = dir / "noisy.npy";
  write_npy(input, {kNoisy, kFrames, kSide, kSide}, pixels);
  const bool bounded = GENERATE(false, true);
  const auto bytes_of = [&](std::uint64_t group_bytes) {
    CompressOptions o;
    o.source.npy_layout = NpyLayout::NTHW;
    o.group_bytes = group_bytes;
    o.threads = 2;
    if (bounded) o.coding.bound = {codecs::BoundMode::Abs, 2, 0};
    const auto path = dir / ((bounded ? "abs2-" : "lossless-") + std::to_string(group_bytes) + ".tzp");
    compress(input, path, o);
    CHECK(grouped_chunks(ArchiveDecoder(path).index()) == 0);
    std::ifstream in(path, std::ios::binary);
    return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
  };
  const auto with_groups = bytes_of(64 << 10);
  CHECK(with_groups == bytes_of(0));
}

TEST_CASE("a damaged group or member chunk is reported by the members that need it", "[group]") {
  const auto& d = data();
  const auto source = d.archive(64 << 10);
  const ArchiveIndex index = ArchiveDecoder(source).index();
  auto damage = [&](std::size_t chunk, const std::string& name) {
    const auto path = d.dir / name;
    std::filesystem::copy_file(source, path, std::filesystem::copy_options::overwrite_existing);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    const auto at = std::streamoff(index.chunks[chunk].offset + index.chunks[chunk].size / 2);
    f.seekg(at);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x21);
    f.seekp(at);
    f.write(&c, 1);
    return path;
  };
  // The group's chunk: every member of that group fails, another group decodes.
  const ArchiveDecoder holder_damaged(damage(0, "holder.tzp"));
  CHECK_THROWS_AS(holder_damaged.decode_chunk(3), DataError);
  CHECK_THROWS_WITH(holder_damaged.decode_chunk(0), Catch::Matchers::Contains("holder.tzp"));
  CHECK_NOTHROW(holder_damaged.decode_chunk(kSequences - 1));
  // A member's own chunk: that member fails.
  const ArchiveDecoder member_damaged(damage(2, "member.tzp"));
  CHECK_THROWS_AS(member_damaged.decode_chunk(2), DataError);
  CHECK_NOTHROW(member_damaged.decode_chunk(1));
}

TEST_CASE("an index whose groups are not consecutive members of one geometry is refused", "[group]") {
  const ArchiveIndex good = ArchiveDecoder(data().archive(64 << 10)).index();
  const std::uint64_t end = good.chunks.back().offset + good.chunks.back().size;
  CHECK_NOTHROW(parse_index(serialize_index(good), end, {}));
  auto refused = [&](ArchiveIndex index, const std::string& why) {
    CHECK_THROWS_WITH(parse_index(serialize_index(index), end, {}), Catch::Matchers::Contains(why));
  };
  ArchiveIndex skipped = good;
  skipped.chunks[2].stats.member = 3;
  refused(skipped, "not consecutive");
  ArchiveIndex headless = good;
  headless.chunks[0].stats.member = 1;
  refused(headless, "not consecutive");
  ArchiveIndex other_shape = good;
  other_shape.sequences[1].geometry.width = 16;
  other_shape.sequences[1].geometry.height = 64;
  refused(other_shape, "one geometry");
  CHECK_THROWS_AS(serialize_index(good, 5), std::invalid_argument);  // version 5 has no groups
}

TEST_CASE("the Stream deals, exchanges and shuffles a group's sequences together", "[group][stream]") {
  auto reader = std::make_shared<const Reader>(data().archive(64 << 10));
  std::set<std::size_t> units;
  for (const auto& b : reader->blocks()) units.insert(b.unit);
  REQUIRE(units.size() == 3);  // 24 sequences in groups of 10, 10 and 4
  for (std::uint64_t epoch : {0, 1, 2}) {
    StreamOptions o;
    o.clip_len = 2, o.world_size = 2, o.epoch = epoch, o.shuffle_buffer = 16, o.exchange = 0.5;
    std::set<std::pair<std::size_t, std::size_t>> everything;
    for (std::size_t rank = 0; rank < 2; ++rank) {
      o.rank = rank;
      const StreamPlan plan(*reader, o);
      const RankOrder order = plan.order(epoch, rank);
      // The blocks in the order they are decoded: each unit's in one run.
      std::vector<std::size_t> runs;
      for (std::size_t k = 0; k < order.own; ++k) {
        const std::size_t unit = reader->blocks()[order.decode[k].block].unit;
        if (runs.empty() || runs.back() != unit) runs.push_back(unit);
        everything.insert({order.decode[k].sequence, order.decode[k].start});
      }
      CHECK(std::set<std::size_t>(runs.begin(), runs.end()).size() == runs.size());
      // A rank's chunk store holds the chunks of its groups' first members.
      const auto needed = plan.chunks_needed(epoch)[rank];
      for (const std::size_t block : needed) CHECK(std::count(needed.begin(), needed.end(), reader->blocks()[block].unit) == 1);
    }
    CHECK(everything.size() == kSequences * (kFrames - 1));
  }
  // More ranks than groups: the sequences are dealt one by one.
  StreamOptions o;
  o.world_size = 4, o.rank = 3;
  const StreamPlan plan(*reader, o);
  CHECK(plan.order(0, 3).own > 0);
}

TEST_CASE("a chunk store serves a group's member only beside the chunk that holds the group", "[group][store]") {
  const auto& d = data();
  const auto source = d.archive(64 << 10);
  const Reader global(source);
  TempDir dir("tezip-group-store");
  auto store = std::make_shared<ChunkStore>(dir / "store", source);
  const std::vector<std::size_t> member_only{13};  // the second group's fourth member
  REQUIRE(global.blocks()[13].unit == 10);
  store->stage(member_only);
  {
    const Reader local{std::shared_ptr<const ChunkStore>(store)};
    CHECK_THROWS_WITH(local.frame(13, 0), Catch::Matchers::Contains("does not hold chunk 10"));
  }
  const std::vector<std::size_t> with_group{10, 13};
  store->stage(with_group);
  const Reader local{std::shared_ptr<const ChunkStore>(store)};
  CHECK(local.clip(13, 0, kFrames).data == global.clip(13, 0, kFrames).data);
}

TEST_CASE("threads decoding the members of one group at once each get their own frames", "[group]") {
  const auto& d = data();
  const ArchiveDecoder decoder(d.archive(64 << 10));
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (std::size_t k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (std::size_t n = 0; n < kSequences; ++n) {
        const std::size_t i = (n * (2 * k + 1) + k) % kSequences;  // each thread its own order
        const GopFrames frames = decoder.decode_chunk(i);
        for (std::size_t t = 0; t < kFrames; ++t)
          for (std::size_t p = 0; p < kFrameBytes; ++p)
            wrong[k] += frames[t][p] != d.pixels[(i * kFrames + t) * kFrameBytes + p];
      }
    });
  for (auto& t : threads) t.join();
  CHECK(wrong == std::vector<int>(4, 0));
}

TEST_CASE("a group chunk of 16-bit colour frames round trips, and refuses counts other than the index's", "[group]") {
  const FrameShape shape{12, 8, 3, 65535};
  std::mt19937 rng(3);
  std::vector<GopFrames> members(3);
  for (std::size_t m = 0; m < members.size(); ++m)
    for (std::size_t t = 0; t < 2 + m; ++t) {
      Pixels f(shape.size());
      for (std::size_t i = 0; i < f.size(); ++i) f[i] = std::uint16_t(i % 7 == 0 ? rng() : 1000 + 3 * i);  // repeats LZMA finds
      members[m].push_back(std::move(f));
    }
  std::vector<const GopFrames*> pointers;
  for (const auto& m : members) pointers.push_back(&m);
  ChunkStats stats;
  const auto chunk = encode_group(shape, pointers, std::uint64_t(1) << 30, stats);
  REQUIRE(chunk);
  CHECK(stats.pixels);
  CHECK(stats.coder == codecs::EntropyCoderKind::Lzma);
  const std::size_t counts[] = {2, 3, 4};
  const DecodedGroup group(shape, *chunk, counts);
  REQUIRE(group.members() == 3);
  for (std::size_t m = 0; m < 3; ++m) CHECK(group.member(m) == members[m]);
  const std::size_t wrong[] = {2, 4, 3};
  CHECK_THROWS_AS(DecodedGroup(shape, *chunk, wrong), DataError);
  const std::size_t fewer[] = {2, 3};
  CHECK_THROWS_AS(DecodedGroup(shape, *chunk, fewer), DataError);
  // Not below `own` bytes: nothing.
  CHECK_FALSE(encode_group(shape, pointers, chunk->size(), stats));
  // Member chunks name their place; anything else is refused.
  CHECK(group_member_of(group_member_chunk(5)) == 5);
  CHECK_THROWS_AS(group_member_of(*chunk), DataError);
  const std::uint8_t zero[] = {kGroupMemberChunk, 0};
  CHECK_THROWS_AS(group_member_of(zero), DataError);
}
