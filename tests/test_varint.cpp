// The one varint (codecs/varint.hpp) behind both its users: the coders' append_varint/read_varint
// and the archive's ByteWriter/ByteReader, which must write the same bytes and refuse the same input.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "codecs/codec_error.hpp"
#include "codecs/entropy/rank_remap.hpp"  // the coders reach the varints through this header
#include "format/byte_io.hpp"
#include "format/errors.hpp"

using tezip::ByteReader;
using tezip::ByteWriter;
using tezip::DataError;
using tezip::codecs::append_varint;
using tezip::codecs::CodecError;
using tezip::codecs::read_varint;

TEST_CASE("varints round trip, and both writers write the same bytes", "[codecs][format]") {
  for (const std::uint64_t v : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{127}, std::uint64_t{128},
                                std::uint64_t{300}, std::uint64_t{1} << 35, std::uint64_t{1} << 63, ~std::uint64_t{0}}) {
    std::vector<std::uint8_t> bytes;
    append_varint(v, bytes);
    ByteWriter w;
    w.varint(v);
    REQUIRE(w.bytes() == bytes);
    std::size_t expected_size = 1;
    for (std::uint64_t rest = v >> 7; rest != 0; rest >>= 7) ++expected_size;
    REQUIRE(bytes.size() == expected_size);
    std::size_t pos = 0;
    REQUIRE(read_varint(bytes, pos) == v);
    REQUIRE(pos == bytes.size());
    ByteReader r(bytes, "test");
    REQUIRE(r.varint() == v);
    r.expect_end();
  }
  std::vector<std::uint8_t> two = {0xAC, 0x02};  // 300, least significant group first
  std::size_t pos = 0;
  REQUIRE(read_varint(two, pos) == 300);
}

TEST_CASE("both varint readers refuse truncated and over-long input alike", "[codecs][format]") {
  auto codec_refuses = [](const std::vector<std::uint8_t>& bytes) {
    std::size_t pos = 0;
    try {
      read_varint(bytes, pos);
    } catch (const CodecError&) {
      return true;
    }
    return false;
  };
  auto reader_refuses = [](const std::vector<std::uint8_t>& bytes) {
    ByteReader r(bytes, "test");
    try {
      r.varint();
    } catch (const DataError& e) {
      REQUIRE(std::string(e.what()).rfind("test: ", 0) == 0);
      return true;
    }
    return false;
  };
  std::vector<std::uint8_t> max;
  append_varint(~std::uint64_t{0}, max);
  REQUIRE(max.size() == 10);
  REQUIRE(max.back() == 1);
  for (std::size_t length = 0; length < max.size(); ++length) {  // every truncation
    const std::vector<std::uint8_t> cut(max.begin(), max.begin() + std::ptrdiff_t(length));
    CHECK(codec_refuses(cut));
    CHECK(reader_refuses(cut));
  }
  // A tenth byte above 1 sets bits past the 64th: refused (ByteReader used to drop them silently).
  auto beyond = max;
  beyond.back() = 2;
  CHECK(codec_refuses(beyond));
  CHECK(reader_refuses(beyond));
  const std::vector<std::uint8_t> endless(11, 0xFF);
  CHECK(codec_refuses(endless));
  CHECK(reader_refuses(endless));
  CHECK_FALSE(codec_refuses(max));
  CHECK_FALSE(reader_refuses(max));
  // A limit on a count is checked after decoding.
  std::vector<std::uint8_t> big;
  append_varint(1000, big);
  ByteReader r(big, "test");
  REQUIRE_THROWS_WITH(r.varint(999, "frame count"), Catch::Matchers::Contains("frame count 1000 exceeds its limit 999"));
}
