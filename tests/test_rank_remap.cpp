#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "codecs/codec_error.hpp"
#include "codecs/entropy/rank_remap.hpp"

using namespace tezip::codecs;

namespace {

std::vector<std::uint32_t> table_round_trip(const std::vector<std::uint32_t>& table) {
  std::vector<std::uint8_t> bytes;
  append_rank_table(table, bytes);
  std::size_t pos = 0;
  auto back = read_rank_table(bytes, pos, table.size());
  REQUIRE(pos == bytes.size());
  return back;
}

}  // namespace

TEST_CASE("rank remap orders by frequency, ties by smaller symbol", "[codecs]") {
  const std::vector<std::uint32_t> symbols = {7, 3, 7, 9, 3, 7, 1, 9};
  const RankRemap remap = rank_remap(symbols);
  // 7 x3; 3 and 9 x2 (3 first); 1 x1.
  REQUIRE(remap.rank_to_symbol == std::vector<std::uint32_t>{7, 3, 9, 1});
  REQUIRE(std::ranges::equal(remap.ranks, std::vector<std::uint32_t>{0, 1, 0, 2, 1, 0, 3, 2}));
}

TEST_CASE("rank remap keeps the symbols where its caller says, and only a dense alphabet is asked", "[codecs]") {
  const std::vector<std::uint32_t> symbols = {7, 3, 7, 9, 3, 7, 1, 9, 0, 2, 7};
  int asked = 0;
  const auto keep = [&](std::span<const std::uint32_t> s, std::span<const std::uint32_t> symbol_to_rank) {
    ++asked;
    REQUIRE(std::ranges::equal(s, symbols));  // the symbols as they came
    REQUIRE(symbol_to_rank[7] == 0);
    REQUIRE(symbol_to_rank[3] == 1);
    REQUIRE(symbol_to_rank[9] == 2);
    return true;
  };
  const RankRemap kept = rank_remap(SymbolBuffer(symbols.begin(), symbols.end()), keep);
  REQUIRE(asked == 1);
  REQUIRE(kept.kept());
  REQUIRE(std::ranges::equal(kept.ranks, symbols));
  REQUIRE(kept.rank_to_symbol == std::vector<std::uint32_t>{7, 3, 9, 0, 1, 2});
  for (std::uint32_t r = 0; r < kept.rank_to_symbol.size(); ++r) REQUIRE(kept.symbol_to_rank[kept.rank_to_symbol[r]] == r);
  // Declined: the frequency ranks, as without a caller.
  const RankRemap declined = rank_remap(SymbolBuffer(symbols.begin(), symbols.end()), [](auto, auto) { return false; });
  REQUIRE_FALSE(declined.kept());
  REQUIRE(std::ranges::equal(declined.ranks, rank_remap(symbols).ranks));
  // A largest symbol at or past the count (its table would list more values than symbols): not asked.
  const std::vector<std::uint32_t> wide = {12, 0, 12, 3, 0, 12};
  asked = 0;
  REQUIRE_FALSE(rank_remap(SymbolBuffer(wide.begin(), wide.end()), keep).kept());
  REQUIRE(asked == 0);
}

TEST_CASE("rank remap handles empty input and sparse huge symbols", "[codecs]") {
  REQUIRE(rank_remap(std::vector<std::uint32_t>{}).ranks.empty());
  std::vector<std::uint32_t> symbols = {0xFFFFFFFFu, 5, 0x80000000u, 5, 0xFFFFFFFFu, 5};
  const RankRemap remap = rank_remap(symbols);
  REQUIRE(remap.rank_to_symbol == std::vector<std::uint32_t>{5, 0xFFFFFFFFu, 0x80000000u});
  for (std::size_t i = 0; i < symbols.size(); ++i) REQUIRE(remap.rank_to_symbol[remap.ranks[i]] == symbols[i]);
  REQUIRE(table_round_trip(remap.rank_to_symbol) == remap.rank_to_symbol);
}

TEST_CASE("rank tables round trip, raw and compressed", "[codecs]") {
  std::mt19937 rng(1);
  for (std::size_t n : {1u, 2u, 47u, 48u, 255u, 256u, 70000u}) {
    std::vector<std::uint32_t> symbols;
    for (std::uint32_t s = 0; s < n; ++s) symbols.push_back(s * 3 + (rng() % 3 == 0 ? 1u : 0u));
    std::shuffle(symbols.begin(), symbols.end(), rng);
    REQUIRE(table_round_trip(symbols) == symbols);
  }
  // The typical residual table (0, 1, 2, ... in order) must cost about a byte per entry or less.
  std::vector<std::uint32_t> identity(1000);
  for (std::uint32_t i = 0; i < identity.size(); ++i) identity[i] = i;
  std::vector<std::uint8_t> bytes;
  append_rank_table(identity, bytes);
  REQUIRE(bytes.size() < 100);
}

TEST_CASE("rank table decoding rejects malformed tables", "[codecs]") {
  SECTION("duplicate symbol") {
    std::vector<std::uint8_t> bytes;
    append_rank_table(std::vector<std::uint32_t>{4, 4}, bytes);
    std::size_t pos = 0;
    REQUIRE_THROWS_AS(read_rank_table(bytes, pos, 10), CodecError);
  }
  SECTION("more entries than allowed") {
    std::vector<std::uint8_t> bytes;
    append_rank_table(std::vector<std::uint32_t>{1, 2, 3}, bytes);
    std::size_t pos = 0;
    REQUIRE_THROWS_AS(read_rank_table(bytes, pos, 2), CodecError);
  }
  SECTION("absurd size") {
    std::vector<std::uint8_t> bytes;
    append_varint(std::uint64_t{1} << 62, bytes);
    bytes.push_back(0);
    std::size_t pos = 0;
    REQUIRE_THROWS_AS(read_rank_table(bytes, pos, std::size_t{1} << 63), CodecError);
  }
  SECTION("symbol beyond 32 bits") {
    std::vector<std::uint8_t> bytes;
    append_varint(1, bytes);
    bytes.push_back(0);
    append_varint(std::uint64_t{1} << 33, bytes);  // zigzag of 2^32
    std::size_t pos = 0;
    REQUIRE_THROWS_AS(read_rank_table(bytes, pos, 10), CodecError);
  }
  SECTION("unknown mode, truncation") {
    std::vector<std::uint8_t> bytes;
    std::vector<std::uint32_t> table(300);
    for (std::uint32_t i = 0; i < table.size(); ++i) table[i] = i * 7;
    append_rank_table(table, bytes);
    for (std::size_t len = 0; len < bytes.size(); ++len) {
      std::size_t pos = 0;
      REQUIRE_THROWS_AS(read_rank_table(std::span(bytes).first(len), pos, 1000), CodecError);
    }
    bytes[1] = 7;
    std::size_t pos = 0;
    REQUIRE_THROWS_AS(read_rank_table(bytes, pos, 1000), CodecError);
  }
}

TEST_CASE("rank remap counts alike on every alphabet: small (four histograms), large dense and sparse", "[codecs]") {
  // The reference: counts in a map, ranked by count (descending), ties by symbol.
  std::mt19937 rng(31);
  for (const std::uint32_t spread : {3u, 300u, 70000u, 0x40000000u}) {
    for (const std::size_t n : {1u, 5u, 4099u, 100003u}) {
      INFO("spread " << spread << ", " << n << " symbols");
      std::vector<std::uint32_t> symbols(n);
      for (auto& s : symbols) s = rng() % 3 == 0 ? std::uint32_t(rng() % spread) : std::uint32_t(rng() % 3);
      std::map<std::uint32_t, std::uint64_t> counts;
      for (const auto s : symbols) ++counts[s];
      std::vector<std::pair<std::uint32_t, std::uint64_t>> order(counts.begin(), counts.end());
      std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
      std::vector<std::uint32_t> expected_table;
      for (const auto& [symbol, count] : order) expected_table.push_back(symbol);
      const RankRemap remap = rank_remap(symbols);
      REQUIRE(remap.rank_to_symbol == expected_table);
      for (std::size_t i = 0; i < n; ++i) REQUIRE(remap.rank_to_symbol[remap.ranks[i]] == symbols[i]);
    }
  }
}
