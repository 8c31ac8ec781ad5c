// A damaged or hostile archive must give a clear DataError (never a crash, a wrong answer or an
// unbounded allocation), and a failed run must leave no partial output behind (DESIGN.md §4).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <typeinfo>
#include <vector>
#include <xxhash.h>

#include "format/archive.hpp"
#include "format/byte_io.hpp"
#include "compressor/decoder.hpp"
#include "compressor/encoder.hpp"
#include "format/errors.hpp"
#include "support/synthetic.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace tezip;
using Catch::Matchers::Contains;
using Bytes = std::vector<std::uint8_t>;

namespace {

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// A fresh file every time: truncating one in place makes ext4 flush it on close, 25 times slower.
void write_file(const fs::path& path, const Bytes& bytes) {
  std::error_code ec;
  fs::remove(path, ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  REQUIRE(out);
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The message of the E that `f` throws; fails the test on any other outcome.
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected " << typeid(E).name() << ", got " << typeid(e).name() << ": " << e.what());
  }
  FAIL("expected " << typeid(E).name() << ", nothing was thrown");
  return {};
}

// Opens the archive and decodes every chunk, each checked against its frame checksums.
std::vector<GopFrames> decode_all(const fs::path& archive) {
  const ArchiveDecoder decoder(archive);
  std::vector<GopFrames> out;
  for (std::size_t i = 0; i < decoder.index().chunks.size(); ++i) out.push_back(decoder.decode_chunk(i));
  return out;
}

CompressOptions small_gops() {
  CompressOptions o;
  o.gop.size = 3;
  o.threads = 1;
  return o;
}

// A real archive of a two-sequence dataset: 8-bit gray (7 frames) and 16-bit colour (5 frames),
// three frames per GOP, so five chunks.
struct SampleArchive {
  test::TempDir dir{"tezip-test-archive"};
  fs::path data = dir / "data";
  fs::path archive = dir / "sample.tzp";
  Bytes bytes;

  explicit SampleArchive(const CompressOptions& options = small_gops()) {
    test::SyntheticSpec a;
    a.width = 24, a.height = 16, a.frames = 7, a.seed = 1;
    test::write_synthetic_sequence(data / "cam_a", a);
    test::SyntheticSpec b;
    b.width = 20, b.height = 12, b.frames = 5, b.channels = 3, b.bits = 16, b.seed = 2, b.noise = 0.5;
    test::write_synthetic_sequence(data / "cam_b", b);
    compress(data, archive, options);
    bytes = read_file(archive);
  }

  std::uint64_t index_offset() const {
    std::uint64_t v;
    std::memcpy(&v, bytes.data() + bytes.size() - 32, 8);
    return v;
  }
  ArchiveIndex index() const { return ArchiveReader(archive).index(); }

  // This archive's header and chunks with `body` (an index body of version 4) as its index, stored
  // the way version 4 stores it, and a footer that vouches for it. `chunks` replaces this archive's
  // own bytes before the index (same length).
  Bytes with_index(const Bytes& body, const Bytes* chunks = nullptr) const {
    return with_stored_index(store_index_body(body), chunks);
  }
  // The same with `stored` as the index's bytes as they are.
  Bytes with_stored_index(const Bytes& stored, const Bytes* chunks = nullptr) const {
    const Bytes& body = stored;
    const Bytes& source = chunks ? *chunks : bytes;
    Bytes out(source.begin(), source.begin() + std::ptrdiff_t(index_offset()));
    const std::uint64_t offset = out.size();
    out.insert(out.end(), body.begin(), body.end());
    ByteWriter footer;
    footer.u64(offset);
    footer.u64(body.size());
    footer.u64(hash_bytes(body));
    footer.raw("TZPINDEX", 8);
    out.insert(out.end(), footer.bytes().begin(), footer.bytes().end());
    return out;
  }
  Bytes with_index(const ArchiveIndex& index) const { return with_index(serialize_index(index)); }
};

// Replaces bytes [at, at + 1) of `body` with the varint `value`.
Bytes splice_varint(Bytes body, std::size_t at, std::uint64_t value) {
  ByteWriter w;
  w.varint(value);
  body.erase(body.begin() + std::ptrdiff_t(at));
  body.insert(body.begin() + std::ptrdiff_t(at), w.bytes().begin(), w.bytes().end());
  return body;
}

// The per-frame checksums of archive versions 2 and 3, from the decoded frames of each chunk.
void set_frame_hashes(ArchiveIndex& index, const std::vector<GopFrames>& frames) {
  for (std::size_t c = 0; c < index.chunks.size(); ++c)
    for (std::size_t k = 0; k < frames[c].size(); ++k)
      index.sequences[index.chunks[c].sequence].frames[index.chunks[c].first_frame + k].hash = hash_pixels(frames[c][k]);
}

}  // namespace

TEST_CASE("the sample archive decodes", "[archive]") {
  const SampleArchive sample;
  const auto index = sample.index();
  REQUIRE(index.sequences.size() == 2);
  REQUIRE(index.chunks.size() == 5);
  const auto frames = decode_all(sample.archive);
  REQUIRE(frames.size() == 5);
  const auto report = verify(sample.archive, sample.data, 1);
  CHECK(report.ok());
  CHECK(report.max_error == 0);
}

// A chunk's checksum is XXH64 (archive version 4) or XXH3-64 (version 5) of its frames' pixels one
// after the other (docs/format.md), however the decoder hands the rows over: in order, out of
// order, a few or many at a time.
TEST_CASE("a chunk's checksum is the same whatever order its rows finish in", "[archive]") {
  const std::size_t width = 7, rows = 5;  // rows of a frame
  std::vector<Pixels> frames;
  std::vector<std::uint8_t> whole;
  for (std::size_t t = 0; t < 4; ++t) {
    Pixels f(width * rows);
    for (std::size_t i = 0; i < f.size(); ++i) f[i] = std::uint16_t(t * 7919 + i * 31);
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(f.data());
    whole.insert(whole.end(), bytes, bytes + f.size() * 2);
    frames.push_back(std::move(f));
  }
  for (const FramesChecksum kind : {FramesChecksum::xxh64, FramesChecksum::xxh3}) {
    INFO("xxh3 " << (kind == FramesChecksum::xxh3));
    const std::uint64_t expected = kind == FramesChecksum::xxh64 ? XXH64(whole.data(), whole.size(), 0)
                                                                 : XXH3_64bits(whole.data(), whole.size());
    CHECK(hash_frames(frames, kind) == expected);
    // (frame, first row, rows) in the order they are added.
    using Add = std::tuple<std::size_t, std::size_t, std::size_t>;
    const std::vector<std::vector<Add>> orders = {
        {{0, 0, 5}, {1, 0, 5}, {2, 0, 5}, {3, 0, 5}},                        // whole frames in order
        {{3, 0, 5}, {2, 0, 5}, {1, 0, 5}, {0, 0, 5}},                        // reversed
        {{0, 2, 3}, {1, 0, 1}, {0, 0, 2}, {1, 1, 4}, {3, 0, 5}, {2, 0, 5}},  // rows out of order
        {{0, 0, 1}, {0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {2, 0, 5}, {1, 0, 5}, {3, 4, 1}, {3, 0, 4}},
    };
    for (const auto& order : orders) {
      FramesHasher hasher(frames.size() * rows, width, kind);
      for (const auto& [t, y, n] : order) {
        CHECK_FALSE(hasher.complete());
        hasher.add(t * rows + y, std::span<const std::uint16_t>(frames[t]).subspan(y * width, n * width));
      }
      REQUIRE(hasher.complete());
      CHECK(hasher.digest() == expected);
    }
  }
  CHECK(hash_frames(frames, FramesChecksum::xxh3) != hash_frames(frames, FramesChecksum::xxh64));
  FramesHasher partial(2, width, FramesChecksum::xxh3);
  partial.add(1, std::span<const std::uint16_t>(frames[0]).first(width));
  CHECK_THROWS_AS(partial.digest(), std::logic_error);  // part 0 missing
  CHECK_THROWS_AS(partial.add(1, std::span<const std::uint16_t>(frames[0]).first(width)), std::logic_error);  // twice
  CHECK_THROWS_AS(partial.add(0, std::span<const std::uint16_t>(frames[0]).first(width + 1)), std::logic_error);  // not whole
  CHECK_THROWS_AS(partial.add(2, std::span<const std::uint16_t>(frames[0]).first(width)), std::logic_error);  // out of range
}

// Version 4 archives (XXH64 chunk checksums) still decode; the version in the header decides which
// hash the checksums are, so version 5's checksums under a version-4 header are a mismatch.
TEST_CASE("archives of version 4 keep their XXH64 chunk checksums", "[archive]") {
  const SampleArchive sample;
  REQUIRE(sample.bytes[8] == kArchiveVersion);
  auto index = sample.index();
  CHECK(index.checksum == FramesChecksum::xxh3);
  const auto frames = decode_all(sample.archive);
  Bytes old = sample.bytes;
  old[8] = 4;
  const fs::path mixed = sample.dir / "v4-xxh3.tzp";
  write_file(mixed, sample.with_stored_index(store_index_body(serialize_index(index, 4)), &old));
  CHECK(ArchiveReader(mixed).index().checksum == FramesChecksum::xxh64);
  CHECK_THROWS_WITH(decode_all(mixed), Contains("checksum mismatch"));
  for (std::size_t c = 0; c < index.chunks.size(); ++c) index.chunks[c].frames_hash = hash_frames(frames[c], FramesChecksum::xxh64);
  const fs::path v4 = sample.dir / "v4.tzp";
  write_file(v4, sample.with_stored_index(store_index_body(serialize_index(index, 4)), &old));
  CHECK(decode_all(v4) == frames);
  CHECK(verify(v4, sample.data, 1).ok());
}

TEST_CASE("archives of versions 2 (index stored as it is) and 4 (compressed) hold the same", "[archive]") {
  const SampleArchive sample;
  auto index = sample.index();
  CHECK_FALSE(index.frame_hashes);
  // Version 2 keeps a checksum per frame, version 4 one per chunk.
  const auto frames = decode_all(sample.archive);
  set_frame_hashes(index, frames);
  Bytes old = sample.bytes;
  old[8] = 2;
  const Bytes v2 = sample.with_stored_index(serialize_index(index, 2), &old);
  const fs::path path = sample.dir / "v2.tzp";
  write_file(path, v2);
  CHECK(ArchiveReader(path).index().chunks.size() == index.chunks.size());
  CHECK(ArchiveReader(path).index().frame_hashes);
  CHECK(decode_all(path) == frames);
  CHECK(verify(path, sample.data, 1).ok());
  // The compressed index is the smaller.
  CHECK(sample.bytes.size() < v2.size());
}

TEST_CASE("a truncated archive is a DataError at any length", "[archive]") {
  const SampleArchive sample;
  const std::size_t size = sample.bytes.size();
  const fs::path path = sample.dir / "cut.tzp";
  for (std::size_t length : {std::size_t(0), std::size_t(1), std::size_t(15), std::size_t(16), std::size_t(17),
                             std::size_t(47), std::size_t(48), std::size_t(49), size / 2, size - 33, size - 32,
                             size - 31, size - 1}) {
    CAPTURE(length, size);
    write_file(path, Bytes(sample.bytes.begin(), sample.bytes.begin() + std::ptrdiff_t(length)));
    const auto open = message_of<DataError>([&] { ArchiveReader reader(path); });
    CHECK_THAT(open, Contains(path.string()));
    CHECK((open.find("truncated") != std::string::npos || open.find("too small") != std::string::npos));
    const auto checked = message_of<DataError>([&] { verify(path, std::nullopt, 1); });
    CHECK(checked == open);
  }
}

TEST_CASE("bytes cut from the middle or appended are a DataError", "[archive]") {
  const SampleArchive sample;
  const fs::path path = sample.dir / "damaged.tzp";
  SECTION("a run of bytes removed from the chunk area") {
    Bytes cut = sample.bytes;
    cut.erase(cut.begin() + 100, cut.begin() + 150);
    write_file(path, cut);
    message_of<DataError>([&] { ArchiveReader reader(path); });
  }
  SECTION("garbage after the footer") {
    Bytes longer = sample.bytes;
    longer.insert(longer.end(), 7, 0x55);
    write_file(path, longer);
    CHECK_THAT(message_of<DataError>([&] { ArchiveReader reader(path); }), Contains("footer"));
  }
  SECTION("an archive concatenated with itself") {
    Bytes twice = sample.bytes;
    twice.insert(twice.end(), sample.bytes.begin(), sample.bytes.end());
    write_file(path, twice);
    message_of<DataError>([&] { decode_all(path); });
  }
}

TEST_CASE("every flipped byte is detected", "[archive]") {
  const SampleArchive sample;
  const auto reference = decode_all(sample.archive);
  const fs::path path = sample.dir / "flipped.tzp";
  std::vector<std::size_t> silent, identical;
  std::vector<std::string> unclear;
  for (std::size_t i = 0; i < sample.bytes.size(); ++i) {
    Bytes damaged = sample.bytes;
    damaged[i] ^= 0xFF;
    write_file(path, damaged);
    try {
      (decode_all(path) == reference ? identical : silent).push_back(i);
    } catch (const DataError& e) {
      if (std::string(e.what()).find(path.string()) == std::string::npos)
        unclear.push_back("byte " + std::to_string(i) + ": " + e.what());
    } catch (const std::exception& e) {
      unclear.push_back("byte " + std::to_string(i) + ": " + typeid(e).name() + ": " + e.what());
    }
  }
  INFO("archive of " << sample.bytes.size() << " bytes");
  CHECK(silent.empty());  // decoded, but to different frames: the checksums failed
  CHECK(unclear.empty());
  // Every byte is under a checksum or a checked field, so no flip should even decode.
  CHECK(identical.empty());
  for (auto i : identical) UNSCOPED_INFO("flip at " << i << " passed");
  for (const auto& u : unclear) UNSCOPED_INFO(u);
}

TEST_CASE("damaged chunk bytes with a forged checksum are caught by the decoder", "[archive]") {
  // read_chunk's checksum stops random damage; this goes past it to test the decoder itself.
  const SampleArchive sample;
  const auto index = sample.index();
  const auto reference = decode_all(sample.archive);
  const fs::path path = sample.dir / "forged.tzp";
  std::size_t caught = 0;
  std::vector<std::string> problems;
  for (std::size_t c = 0; c < index.chunks.size(); ++c) {
    const auto& chunk = index.chunks[c];
    for (std::size_t k = 0; k < chunk.size; ++k) {
      Bytes damaged = sample.bytes;
      damaged[chunk.offset + k] ^= 0xFF;
      ArchiveIndex forged = index;
      forged.chunks[c].hash =
          hash_bytes(std::span<const std::uint8_t>(damaged.data() + chunk.offset, chunk.size));
      write_file(path, sample.with_index(serialize_index(forged), &damaged));
      try {
        const ArchiveDecoder decoder(path);
        if (decoder.decode_chunk(c) != reference[c]) problems.push_back("chunk " + std::to_string(c) + " byte " + std::to_string(k) + ": wrong frames");
      } catch (const DataError&) {
        ++caught;
      } catch (const std::exception& e) {
        problems.push_back("chunk " + std::to_string(c) + " byte " + std::to_string(k) + ": " + typeid(e).name() + ": " +
                           e.what());
      }
    }
  }
  for (const auto& p : problems) UNSCOPED_INFO(p);
  CHECK(problems.empty());
  CHECK(caught > 0);
}

TEST_CASE("a foreign header is rejected by name", "[archive]") {
  const SampleArchive sample;
  const fs::path path = sample.dir / "header.tzp";
  Bytes bytes = sample.bytes;
  SECTION("wrong magic") {
    bytes[0] = 'X';
    write_file(path, bytes);
    CHECK_THAT(message_of<DataError>([&] { ArchiveReader reader(path); }), Contains("magic"));
  }
  SECTION("a PNG file") {
    const Bytes png = read_file(sample.data / "cam_a" / "frame_0000.png");
    write_file(path, png);
    const auto why = message_of<DataError>([&] { ArchiveReader reader(path); });
    CHECK((why.find("magic") != std::string::npos || why.find("too small") != std::string::npos));
  }
  SECTION("a version after this reader's") {
    bytes[8] = std::uint8_t(kArchiveVersion + 1);
    write_file(path, bytes);
    const auto why = message_of<DataError>([&] { ArchiveReader reader(path); });
    CHECK_THAT(why, Contains("version " + std::to_string(kArchiveVersion + 1)));
    CHECK_THAT(why, Contains("not supported"));
  }
  SECTION("version 1") {
    bytes[8] = 1;
    write_file(path, bytes);
    CHECK_THAT(message_of<DataError>([&] { ArchiveReader reader(path); }), Contains("version 1"));
  }
  SECTION("version 3 (an embedded model, the index stored as it is) on a compressed index") {
    bytes[8] = 3;
    write_file(path, bytes);
    CHECK_THROWS_AS(ArchiveReader(path), DataError);
  }
  SECTION("a version-4 index that is not a zstd frame") {
    const Bytes raw = serialize_index(sample.index());
    write_file(path, sample.with_stored_index(raw));
    CHECK_THAT(message_of<DataError>([&] { ArchiveReader reader(path); }), Contains("archive index"));
  }
  SECTION("version 0x01000001") {
    bytes[11] = 1;
    write_file(path, bytes);
    CHECK_THAT(message_of<DataError>([&] { ArchiveReader reader(path); }), Contains("version"));
  }
  SECTION("nonzero flags") {
    bytes[12] = 1;
    write_file(path, bytes);
    CHECK_THAT(message_of<DataError>([&] { ArchiveReader reader(path); }), Contains("flags"));
  }
  SECTION("footer magic") {
    bytes[bytes.size() - 1] ^= 1;
    write_file(path, bytes);
    CHECK_THAT(message_of<DataError>([&] { ArchiveReader reader(path); }), Contains("footer"));
  }
}

TEST_CASE("a hostile index is rejected before anything is allocated", "[archive]") {
  const SampleArchive sample;
  const ArchiveIndex base = sample.index();
  const fs::path path = sample.dir / "hostile.tzp";
  constexpr std::uint64_t kHuge = 1'000'000'000'000ull;

  // Opens `file` and returns the DataError's message; parse_index on the same body must agree.
  auto rejected = [&](const Bytes& file) {
    write_file(path, file);
    return message_of<DataError>([&] { ArchiveReader reader(path); });
  };
  auto rejected_index = [&](const ArchiveIndex& index) {
    const auto body = serialize_index(index);
    const auto direct = message_of<DataError>([&] { parse_index(body, sample.index_offset(), ArchiveLimits{}); });
    const auto opened = rejected(sample.with_index(body));
    CHECK_THAT(opened, Contains(direct));
    CHECK_THAT(opened, Contains(path.string()));
    return opened;
  };

  SECTION("the unmodified index is accepted") {
    write_file(path, sample.with_index(base));
    CHECK(decode_all(path).size() == base.chunks.size());
  }
  SECTION("a trillion sequences, frames or chunks declared") {
    ArchiveIndex empty;
    empty.settings = base.settings;
    empty.settings.writer = "";
    Bytes body = serialize_index(empty);  // ... writer length 0, model flag 0, sequence count 0, chunk count 0
    REQUIRE(body.size() >= 4);
    REQUIRE(body[body.size() - 4] == 0);
    CHECK_THAT(rejected(sample.with_index(splice_varint(body, body.size() - 4, kHuge))), Contains("string length"));
    Bytes flagged = body;
    flagged[body.size() - 3] = 2;
    CHECK_THAT(rejected(sample.with_index(flagged)), Contains("embedded model flag"));
    CHECK_THAT(rejected(sample.with_index(splice_varint(body, body.size() - 2, kHuge))), Contains("sequence count"));
    CHECK_THAT(rejected(sample.with_index(splice_varint(body, body.size() - 1, kHuge))), Contains("chunk count"));

    ArchiveIndex one = empty;
    one.sequences.push_back(base.sequences[0]);
    one.sequences[0].frames.clear();
    body = serialize_index(one);  // ... frame count 0, chunk count 0
    REQUIRE(body[body.size() - 2] == 0);
    CHECK_THAT(rejected(sample.with_index(splice_varint(body, body.size() - 2, kHuge))), Contains("frame count"));
    CHECK_THAT(rejected(sample.with_index(splice_varint(body, body.size() - 2, ~std::uint64_t(0)))), Contains("frame count"));
    // A varint that never ends.
    Bytes endless = body;
    endless.pop_back();
    endless.pop_back();
    endless.insert(endless.end(), 12, 0xFF);
    CHECK_THAT(rejected(sample.with_index(endless)), Contains("varint"));
  }
  SECTION("absurd geometry") {
    ArchiveIndex index = base;
    SECTION("width 2^30") { index.sequences[0].geometry.width = 1u << 30; CHECK_THAT(rejected_index(index), Contains("size")); }
    SECTION("height 0") { index.sequences[1].geometry.height = 0; CHECK_THAT(rejected_index(index), Contains("size")); }
    SECTION("65536 x 65536") {
      index.sequences[0].geometry.width = 65536;
      index.sequences[0].geometry.height = 65536;
      CHECK_THAT(rejected_index(index), Contains("too large"));
    }
    SECTION("4 channels") { index.sequences[1].geometry.channels = 4; CHECK_THAT(rejected_index(index), Contains("channel")); }
    SECTION("pixel type 7") { index.sequences[0].geometry.type = PixelType(7); CHECK_THAT(rejected_index(index), Contains("pixel type")); }
  }
  SECTION("chunks out of place") {
    ArchiveIndex index = base;
    const std::uint64_t end = sample.index_offset();
    SECTION("offset past the end") { index.chunks[2].offset = end * 4; CHECK_THAT(rejected_index(index), Contains("offset")); }
    SECTION("offset at 2^63") { index.chunks[0].offset = std::uint64_t(1) << 63; CHECK_THAT(rejected_index(index), Contains("offset")); }
    SECTION("size that wraps") { index.chunks[4].size = ~std::uint64_t(0) - 10; CHECK_THAT(rejected_index(index), Contains("offset")); }
    SECTION("size past the index") { index.chunks[4].size += 1; CHECK_THAT(rejected_index(index), Contains("offset")); }
    SECTION("overlapping the header") { index.chunks[0].offset = 0; CHECK_THAT(rejected_index(index), Contains("offset")); }
    SECTION("overlapping the previous chunk") {
      index.chunks[1].offset = index.chunks[0].offset;
      CHECK_THAT(rejected_index(index), Contains("offset"));
    }
    SECTION("a trillion frames in a chunk") { index.chunks[0].frame_count = kHuge; CHECK_THAT(rejected_index(index), Contains("frame count")); }
    SECTION("no frames in a chunk") { index.chunks[0].frame_count = 0; CHECK_THAT(rejected_index(index), Contains("frame count")); }
    SECTION("sequence 99") { index.chunks[3].sequence = 99; CHECK_THAT(rejected_index(index), Contains("cover")); }
    SECTION("first chunk missing") { index.chunks.erase(index.chunks.begin()); CHECK_THAT(rejected_index(index), Contains("cover")); }
    SECTION("last chunk missing") { index.chunks.pop_back(); CHECK_THAT(rejected_index(index), Contains("cover")); }
    SECTION("chunks swapped") {
      std::swap(index.chunks[0], index.chunks[1]);
      CHECK_THAT(rejected_index(index), Contains("cover"));
    }
    SECTION("unknown entropy coder") {
      index.chunks[1].stats.coder = codecs::EntropyCoderKind(0);
      CHECK_THAT(rejected_index(index), Contains("entropy coder"));
    }
  }
  SECTION("names that would escape the output folder") {
    ArchiveIndex index = base;
    SECTION("sequence ../evil") { index.sequences[0].name = "../evil"; CHECK_THAT(rejected_index(index), Contains("unsafe sequence name")); }
    SECTION("sequence a/../../b") { index.sequences[0].name = "a/../../b"; CHECK_THAT(rejected_index(index), Contains("unsafe")); }
    SECTION("sequence /etc") { index.sequences[1].name = "/etc"; CHECK_THAT(rejected_index(index), Contains("unsafe")); }
    SECTION("sequence with a NUL") { index.sequences[1].name = std::string("a\0b", 3); CHECK_THAT(rejected_index(index), Contains("unsafe")); }
    SECTION("frame a/b") { index.sequences[0].frames[2].name = "a/b"; CHECK_THAT(rejected_index(index), Contains("unsafe frame name")); }
    SECTION("frame ..") { index.sequences[1].frames[0].name = ".."; CHECK_THAT(rejected_index(index), Contains("unsafe frame name")); }
    SECTION("frame without a name") { index.sequences[1].frames[4].name = ""; CHECK_THAT(rejected_index(index), Contains("unsafe frame name")); }
  }
  SECTION("settings out of range") {
    ArchiveIndex index = base;
    SECTION("error mode 9") { index.settings.coding.bound.mode = codecs::BoundMode(9); CHECK_THAT(rejected_index(index), Contains("error mode")); }
    SECTION("NaN bound") {
      index.settings.coding.bound.abs = std::numeric_limits<double>::quiet_NaN();
      CHECK_THAT(rejected_index(index), Contains("bound"));
    }
    SECTION("negative bound") { index.settings.coding.bound.rel = -1; CHECK_THAT(rejected_index(index), Contains("bound")); }
    SECTION("quantizer 5") { index.settings.coding.quantizer = QuantizerKind(5); CHECK_THAT(rejected_index(index), Contains("quantizer")); }
    SECTION("GOP policy 7") { index.settings.gop.kind = GopKind(7); CHECK_THAT(rejected_index(index), Contains("GOP")); }
    SECTION("a 10 KB writer name") { index.settings.writer.assign(10000, 'w'); CHECK_THAT(rejected_index(index), Contains("string length")); }
  }
  SECTION("trailing bytes after the index") {
    Bytes body = serialize_index(base);
    body.push_back(0);
    CHECK_THAT(rejected(sample.with_index(body)), Contains("trailing"));
  }
  SECTION("an index cut short") {
    Bytes body = serialize_index(base);
    body.resize(body.size() / 2);
    CHECK_THAT(rejected(sample.with_index(body)), Contains("archive index: "));
  }
  SECTION("a predictor this tezip does not have") {
    ArchiveIndex index = base;
    index.settings.predictor.kind = "transformer";
    write_file(path, sample.with_index(index));
    ArchiveReader reader(path);  // the index itself is fine
    CHECK_THAT(message_of<DataError>([&] { ArchiveDecoder decoder(path); }), Contains("transformer"));
  }
  SECTION("a PredNet whose configuration is damaged or whose model is not here") {
    ArchiveIndex index = base;
    index.settings.predictor.kind = "prednet";
    write_file(path, sample.with_index(index));
    // The same with or without libtorch: exact PredNet is the core's.
    CHECK_THAT(message_of<DataError>([&] { ArchiveDecoder decoder(path); }), Contains("PredNet configuration is damaged"));
    index.settings.predictor.configuration = R"({"model":"gone.tzm","arithmetic":"exact","loop":"closed","warmup":1})";
    index.settings.predictor.weights_sha256 = std::string(64, 'a');
    write_file(path, sample.with_index(index));
    CHECK_THAT(message_of<DataError>([&] { ArchiveDecoder decoder(path); }), Contains("gone.tzm"));
  }
  SECTION("settings that differ from the chunks'") {
    ArchiveIndex index = base;
    index.settings.coding.quantizer = QuantizerKind::Interval;
    write_file(path, sample.with_index(index));
    message_of<DataError>([&] { decode_all(path); });
  }
  // Chunk 3 decodes, chunk 4 (sequence 1's second) fails its checksum, and verify says so once.
  auto only_chunk_4_fails = [](const fs::path& file) {
    const ArchiveDecoder decoder(file);
    decoder.decode_chunk(3);
    CHECK_THAT(message_of<DataError>([&] { decoder.decode_chunk(4); }), Contains("checksum"));
    const auto report = verify(file, std::nullopt, 1);
    CHECK(report.failures.size() == 1);
    CHECK_FALSE(report.ok());
  };
  SECTION("decoded-frame checksums that do not match (version 4: one per chunk)") {
    ArchiveIndex index = base;
    REQUIRE(index.chunks[4].sequence == 1);
    index.chunks[4].frames_hash ^= 1;
    write_file(path, sample.with_index(index));
    only_chunk_4_fails(path);
  }
  SECTION("frame checksums that do not match (version 2: one per frame)") {
    ArchiveIndex index = base;
    const auto frames = decode_all(sample.archive);
    set_frame_hashes(index, frames);
    Bytes old = sample.bytes;
    old[8] = 2;
    write_file(path, sample.with_stored_index(serialize_index(index, 2), &old));
    CHECK(decode_all(path) == frames);  // the right per-frame hashes pass
    REQUIRE(index.chunks[4].first_frame <= 3);
    index.sequences[1].frames[3].hash ^= 1;
    write_file(path, sample.with_stored_index(serialize_index(index, 2), &old));
    only_chunk_4_fails(path);
  }
}

TEST_CASE("what is not an archive is an InputError", "[archive]") {
  test::TempDir dir("tezip-test-archive");
  SECTION("a missing file") {
    const auto why = message_of<InputError>([&] { ArchiveReader reader(dir / "absent.tzp"); });
    CHECK_THAT(why, Contains("absent.tzp"));
    message_of<InputError>([&] { verify(dir / "absent.tzp", std::nullopt, 1); });
    message_of<InputError>([&] { decompress(dir / "absent.tzp", dir / "out", {}); });
    CHECK_FALSE(fs::exists(dir / "out"));
  }
  SECTION("a directory") {
    const auto why = message_of<InputError>([&] { ArchiveReader reader(dir.path()); });
    CHECK_THAT(why, Contains("not a regular file"));
  }
  SECTION("compressing a missing input") {
    message_of<InputError>([&] { compress(dir / "absent", dir / "out.tzp", small_gops()); });
    CHECK(listing(dir.path()).empty());
  }
}

TEST_CASE("compress never leaves a partial or clobbered archive", "[archive]") {
  const SampleArchive sample;
  const fs::path out_dir = sample.dir / "out";
  fs::create_directories(out_dir);
  const fs::path target = out_dir / "result.tzp";
  const Bytes precious = {'k', 'e', 'e', 'p'};

  SECTION("an existing output without overwrite") {
    write_file(target, precious);
    CHECK_THAT(message_of<OutputError>([&] { compress(sample.data, target, small_gops()); }), Contains("exists"));
    CHECK(read_file(target) == precious);
    CHECK(listing(out_dir) == std::vector<std::string>{"result.tzp"});
  }
  SECTION("an existing output with overwrite") {
    write_file(target, precious);
    auto options = small_gops();
    options.overwrite = true;
    compress(sample.data, target, options);
    CHECK(read_file(target) == sample.bytes);
    CHECK(listing(out_dir) == std::vector<std::string>{"result.tzp"});
  }
  SECTION("a frame of a different size half-way through") {
    test::SyntheticSpec odd;
    odd.width = 30, odd.height = 10, odd.frames = 1, odd.prefix = "frame_0004_odd";
    fs::copy(sample.data, sample.dir / "mixed", fs::copy_options::recursive);
    test::write_synthetic_sequence(sample.dir / "mixed" / "cam_a", odd);
    const auto why = message_of<InputError>([&] { compress(sample.dir / "mixed", target, small_gops()); });
    CHECK_THAT(why, Contains("frame_0004_odd"));
    CHECK(listing(out_dir).empty());
  }
  SECTION("an output folder that does not exist") {
    message_of<OutputError>([&] { compress(sample.data, out_dir / "missing" / "x.tzp", small_gops()); });
    CHECK(listing(out_dir).empty());
  }
}

TEST_CASE("decompress never leaves a partial or clobbered folder", "[archive]") {
  const SampleArchive sample;
  const fs::path out_dir = sample.dir / "out";
  fs::create_directories(out_dir);
  const fs::path target = out_dir / "restored";

  SECTION("a complete run") {
    decompress(sample.archive, target, {});
    CHECK(listing(target) == std::vector<std::string>{"cam_a", "cam_b"});
    CHECK(listing(target / "cam_b") == listing(sample.data / "cam_b"));
    CHECK(listing(out_dir) == std::vector<std::string>{"restored"});
  }
  SECTION("an existing folder without overwrite") {
    fs::create_directories(target);
    write_file(target / "marker", {1});
    CHECK_THAT(message_of<OutputError>([&] { decompress(sample.archive, target, {}); }), Contains("exists"));
    CHECK(listing(target) == std::vector<std::string>{"marker"});
    CHECK(listing(out_dir) == std::vector<std::string>{"restored"});
  }
  SECTION("an existing folder with overwrite") {
    fs::create_directories(target);
    write_file(target / "marker", {1});
    DecompressOptions options;
    options.overwrite = true;
    decompress(sample.archive, target, options);
    CHECK(listing(target) == std::vector<std::string>{"cam_a", "cam_b"});
    CHECK(listing(out_dir) == std::vector<std::string>{"restored"});
  }
  SECTION("a damaged archive") {
    const auto index = sample.index();
    Bytes damaged = sample.bytes;
    damaged[index.chunks[3].offset + index.chunks[3].size / 2] ^= 0x10;  // the fourth of five chunks
    const fs::path path = sample.dir / "damaged.tzp";
    write_file(path, damaged);
    for (unsigned threads : {1u, 2u}) {
      DecompressOptions options;
      options.threads = threads;
      CHECK_THAT(message_of<DataError>([&] { decompress(path, target, options); }), Contains("checksum mismatch"));
      CHECK(listing(out_dir).empty());
    }
  }
}

namespace {

// Runs `body` in a child process whose files may not grow past `limit` bytes (write() then fails
// with EFBIG, as on a full disk). Returns the OutputError's message, or a line saying what went wrong.
template <class F>
std::string in_small_filesystem(std::uint64_t limit, F&& body) {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(pipe_fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit small{limit, limit};
    std::string result;
    if (::setrlimit(RLIMIT_FSIZE, &small) != 0) {
      result = "setrlimit failed";
    } else {
      try {
        body();
        result = "no error";
      } catch (const OutputError& e) {
        result = std::string("OutputError: ") + e.what();
      } catch (const std::exception& e) {
        result = std::string("other: ") + typeid(e).name() + ": " + e.what();
      }
    }
    [[maybe_unused]] const auto n = ::write(pipe_fds[1], result.data(), result.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string result;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) result.append(buf, std::size_t(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child died, status " + std::to_string(status);
  return result;
}

}  // namespace

TEST_CASE("a full disk during compress is an OutputError and leaves nothing behind", "[archive]") {
  const SampleArchive sample;
  const fs::path out_dir = sample.dir / "out";
  fs::create_directories(out_dir);
  REQUIRE(sample.bytes.size() > 2048);

  const auto result = in_small_filesystem(1024, [&] { compress(sample.data, out_dir / "full.tzp", small_gops()); });
  CHECK_THAT(result, Contains("OutputError: "));
  CHECK_THAT(result, Contains("full.tzp"));
  CHECK_THAT(result, Contains("write failed"));
  CHECK_THAT(result, Contains(std::strerror(EFBIG)));
  CHECK(listing(out_dir).empty());
}

// cv::imwrite does not report failed writes; frames are encoded in memory and written with checks.
TEST_CASE("a full disk during decompress is an OutputError and leaves nothing behind", "[archive]") {
  const SampleArchive sample;
  const fs::path out_dir = sample.dir / "out";
  fs::create_directories(out_dir);
  DecompressOptions options;
  options.threads = 1;
  const auto result = in_small_filesystem(256, [&] { decompress(sample.archive, out_dir / "restored", options); });
  CHECK_THAT(result, Contains("OutputError: "));
  CHECK_THAT(result, Contains("restored"));
  CHECK(listing(out_dir).empty());
}

TEST_CASE("a forged index naming one frame or sequence twice is refused on read and on write", "[archive]") {
  const SampleArchive sample;
  const fs::path forged = sample.dir / "forged.tzp";
  const fs::path out = sample.dir / "out";
  auto index = sample.index();
  SECTION("a frame name twice in a sequence") {
    index.sequences[0].frames[3].name = index.sequences[0].frames[4].name;
  }
  SECTION("a sequence name twice") {
    index.sequences[1].name = index.sequences[0].name;
  }
  write_file(forged, sample.with_index(index));
  CHECK_THAT(message_of<DataError>([&] { ArchiveReader reader(forged); }), Contains("listed twice"));
  CHECK_THROWS_AS(decompress(forged, out, {}), DataError);
  CHECK_THROWS_AS(verify(forged, std::nullopt, 1), DataError);
  CHECK_FALSE(fs::exists(out));
  // The writer applies the reader's rule: no such archive is ever written.
  {
    ArchiveWriter writer(sample.dir / "w.tzp", false);
    CHECK_THAT(message_of<InputError>([&] { writer.finish(index); }), Contains("appears twice"));
  }
  CHECK_FALSE(fs::exists(sample.dir / "w.tzp"));
  CHECK(listing(sample.dir.path()) == std::vector<std::string>{"data", "forged.tzp", "sample.tzp"});
}

TEST_CASE("frames that would be written under one name are refused before decompressing", "[archive]") {
  const SampleArchive sample;
  auto index = sample.index();
  // "x.jpg" comes back as PNG, so as "x.png": the same file as the next frame's.
  index.sequences[0].frames[3].name = "x.jpg";
  index.sequences[0].frames[3].format = "jpeg";
  index.sequences[0].frames[4].name = "x.png";
  const fs::path forged = sample.dir / "forged.tzp";
  write_file(forged, sample.with_index(index));
  CHECK_THAT(message_of<OutputError>([&] { decompress(forged, sample.dir / "out", {}); }),
             Contains("'x.jpg' and 'x.png' would both be written as 'x.png'"));
  CHECK_FALSE(fs::exists(sample.dir / "out"));
}

// verify without an original checks each chunk in a few frames of memory (check_chunk), and
// decompress writes each frame as it is decoded (stream_chunks), both with Frames::Streamed (frame t
// decoded into frame t - 2's buffer, the colour transform's RGB frames into one): the checksums still
// see every row, for every predictor and mode, the files are exact, and a wrong checksum is found.
TEST_CASE("check_chunk and decompress take GOPs a few frames at a time and find a wrong checksum", "[archive]") {
  for (const char* predictor : {"auto", "previous", "linear", "motion", "intra", "bidirectional"})
    for (const bool lossless : {true, false}) {
      INFO(predictor << (lossless ? " lossless" : " abs 2"));
      CompressOptions options = small_gops();
      options.gop.size = 6;  // frames recycled from the third on
      options.predictor = predictor;
      if (!lossless) options.coding.bound = codecs::ErrorBound{codecs::BoundMode::Abs, 2, 0};
      const SampleArchive sample(options);
      // The colour transform: real 8-bit colour video (the synthetic colour is 16-bit noise).
      const fs::path rgb = sample.dir / "rgb.tzp";
      compress(fs::path(TEZIP_SOURCE_DIR) / "datasets/sample/vtest", rgb, options);
      if (lossless && std::string(predictor) == "previous") {
        const ArchiveReader reader(rgb);
        std::size_t transformed = 0;
        for (std::size_t i = 0; i < reader.index().chunks.size(); ++i) transformed += reader.read_chunk(i).at(0) == 0x82;
        CHECK(transformed > 0);  // kColourChunk: the path that recycles both kinds of frames
      }
      for (const fs::path& path : {sample.archive, rgb}) {
        const ArchiveDecoder decoder(path);
        for (std::size_t i = 0; i < decoder.index().chunks.size(); ++i) CHECK_NOTHROW(decoder.check_chunk(i));
        CHECK(verify(path, std::nullopt, 1).ok());
        // decompress writes each frame as it is decoded (stream_chunks): the files hold every frame
        // exactly as a decoder's frames (verify against them: max error 0 in lossless mode).
        const fs::path out = sample.dir / "out";
        fs::remove_all(out);
        decompress(path, out, {});
        const auto check = verify(path, out, 2);
        CHECK(check.ok());
        CHECK(check.max_error == 0);
      }
      auto index = sample.index();
      index.chunks[1].frames_hash ^= 1;
      const fs::path wrong = sample.dir / "wrong.tzp";
      write_file(wrong, sample.with_stored_index(store_index_body(serialize_index(index, kArchiveVersion))));
      const auto listing_before = listing(sample.dir.path());
      const ArchiveDecoder decoder(wrong);
      CHECK_NOTHROW(decoder.check_chunk(0));
      CHECK_THAT(message_of<DataError>([&] { decoder.check_chunk(1); }), Contains("checksum mismatch"));
      CHECK_FALSE(verify(wrong, std::nullopt, 1).ok());
      // decompress has written chunk 1's frames before its checksum fails: into its staging folder,
      // which goes with the error.
      const fs::path out = sample.dir / "wrong-out";
      CHECK_THAT(message_of<DataError>([&] { decompress(wrong, out, {}); }), Contains("checksum mismatch"));
      CHECK_FALSE(fs::exists(out));
      CHECK(listing(sample.dir.path()) == listing_before);
    }
}
