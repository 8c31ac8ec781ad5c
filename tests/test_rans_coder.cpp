#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "codecs/codec_error.hpp"
#include "support/residuals.hpp"
#include "codecs/entropy/range_coder.hpp"
#include "codecs/entropy/rank_remap.hpp"
#include "codecs/entropy/rans_coder.hpp"
#include "codecs/entropy/rans_model.hpp"
#include "codecs/simd.hpp"
#include "codecs/entropy/symbol_coder.hpp"

using namespace tezip::codecs;

namespace {

using tezip::test::alphabet_of;
using tezip::test::laplacian_ranks;

void require_round_trip(const std::vector<std::uint32_t>& ranks, std::size_t width, std::uint64_t alphabet) {
  const auto bytes = encode_rans(ranks, width, alphabet);
  std::vector<std::uint32_t> back(ranks.size(), 12345);
  decode_rans(bytes, width, alphabet, back);
  REQUIRE(back == ranks);
}

// Decoding must either succeed or throw CodecError; anything else (a crash, another exception) fails.
void decode_or_codec_error(std::span<const std::uint8_t> bytes, std::size_t width, std::uint64_t alphabet,
                           std::size_t count) {
  std::vector<std::uint32_t> out(count);
  try {
    decode_rans(bytes, width, alphabet, out);
  } catch (const CodecError&) {
  }
}

}  // namespace

TEST_CASE("rans coder round-trips edge cases", "[codecs][rans]") {
  for (std::size_t width : {0, 1, 3, 7, 100}) {
    require_round_trip({}, width, 1);
    require_round_trip({0}, width, 1);
    require_round_trip({4}, width, 5);
    require_round_trip(std::vector<std::uint32_t>(1000, 0), width, 1);
    require_round_trip(std::vector<std::uint32_t>(999, 3), width, 4);
    require_round_trip({0, 1}, width, 2);
    require_round_trip({1, 0, 1}, width, 2);
  }
}

TEST_CASE("rans coder round-trips residual-like data in 1-D and 2-D", "[codecs][rans]") {
  for (double scale : {0.1, 1.0, 30.0, 3000.0}) {
    const auto ranks = laplacian_ranks(97, 61, scale, 7);
    for (std::size_t width : {0, 1, 2, 5, 97, 96, 98, 1000, 10000}) require_round_trip(ranks, width, alphabet_of(ranks));
    // A larger alphabet than used is allowed.
    require_round_trip(ranks, 97, alphabet_of(ranks) + 1000);
  }
}

TEST_CASE("rans coder round-trips huge alphabets and ranks", "[codecs][rans]") {
  std::mt19937 rng(3);
  std::vector<std::uint32_t> ranks(5000);
  for (auto& r : ranks) r = rng() >> (rng() % 32);
  ranks[17] = UINT32_MAX;
  ranks[18] = 0;
  for (std::size_t width : {0, 1, 64, 71}) {
    require_round_trip(ranks, width, std::uint64_t{1} << 32);
    require_round_trip(ranks, width, std::uint64_t{1} << 40);
  }
  std::vector<std::uint32_t> powers;
  for (int b = 0; b < 32; ++b) {
    powers.push_back(std::uint32_t{1} << b);
    powers.push_back((std::uint32_t{1} << b) - 1);
    powers.push_back((std::uint32_t{1} << b) + 1);
  }
  require_round_trip(powers, 0, std::uint64_t{1} << 32);
  require_round_trip(powers, 5, std::uint64_t{1} << 32);
}

TEST_CASE("tokens of ranks are the same on every SIMD path", "[codecs][rans][simd]") {
  // Every rank below 2^24 that ends a power-of-two interval or sits in one (the float path's
  // exponent and two mantissa bits), in runs of every length around the vector step of 32.
  std::vector<std::uint32_t> ranks;
  for (std::uint32_t b = 0; b < 24; ++b)
    for (std::uint32_t r : {std::uint32_t{1} << b, (std::uint32_t{1} << b) - 1, (std::uint32_t{1} << b) + 1,
                            (std::uint32_t{3} << b) >> 1, (std::uint32_t{7} << b) >> 2})
      if (r < (std::uint32_t{1} << 24)) ranks.push_back(r);
  std::mt19937 rng(11);
  for (int i = 0; i < 3000; ++i) ranks.push_back((rng() & 0xFFFFFF) >> (rng() % 24));
  const rans::TokenScheme scheme;
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{31}, std::size_t{32}, std::size_t{33},
                              std::size_t{95}, ranks.size()}) {
    const std::span<const std::uint32_t> part(ranks.data(), n);
    for (const SimdPath path : supported_simd_paths()) {
      CAPTURE(n, simd_name(path));
      const auto tokens = rans::tokens_of(part, std::uint64_t{1} << 24, "test", path);
      REQUIRE(tokens.size() == n);
      for (std::size_t i = 0; i < n; ++i) REQUIRE(tokens[i] == scheme.token_of(part[i]));
      // A rank outside the alphabet is refused on every path, wherever it lies.
      if (n > 0) REQUIRE_THROWS_AS(rans::tokens_of(part, *std::max_element(part.begin(), part.end()), "test", path),
                                   std::invalid_argument);
    }
  }
}

TEST_CASE("rans coder rejects ranks outside the alphabet on both sides", "[codecs][rans]") {
  REQUIRE_THROWS_AS(encode_rans(std::vector<std::uint32_t>{0, 5}, 0, 5), std::invalid_argument);
  // A stream written for a larger alphabet decodes to a rank the smaller one does not hold.
  const std::vector<std::uint32_t> ranks = {0, 1, 2, 9, 1, 0};
  const auto bytes = encode_rans(ranks, 3, 10);
  std::vector<std::uint32_t> out(ranks.size());
  REQUIRE_THROWS_AS(decode_rans(bytes, 3, 9, out), CodecError);
}

TEST_CASE("rans coder decodes hostile bytes without crashing", "[codecs][rans]") {
  const auto ranks = laplacian_ranks(23, 9, 3.0, 11);
  const std::uint64_t alphabet = alphabet_of(ranks);
  for (std::size_t width : {0, 23}) {
    const auto bytes = encode_rans(ranks, width, alphabet);
    std::vector<std::uint32_t> out(ranks.size());
    for (std::size_t len = 0; len < bytes.size(); ++len) {
      const std::span<const std::uint8_t> cut(bytes.data(), len);
      REQUIRE_THROWS_AS(decode_rans(cut, width, alphabet, out), CodecError);
    }
    auto longer = bytes;
    longer.push_back(0);
    REQUIRE_THROWS_AS(decode_rans(longer, width, alphabet, out), CodecError);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      for (std::uint8_t flip : {0x01, 0x10, 0x80, 0xFF}) {
        auto bad = bytes;
        bad[i] ^= flip;
        decode_or_codec_error(bad, width, alphabet, ranks.size());
      }
    }
    // Wrong counts and row widths, and random garbage.
    decode_or_codec_error(bytes, width, alphabet, ranks.size() + 1);
    decode_or_codec_error(bytes, width, alphabet, ranks.size() / 2);
    decode_or_codec_error(bytes, width + 1, alphabet, ranks.size());
    std::mt19937 rng(5);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<std::uint8_t> junk(rng() % 64);
      for (auto& b : junk) b = static_cast<std::uint8_t>(rng());
      decode_or_codec_error(junk, width, 1 + rng() % 1000, rng() % 300);
    }
  }
}

TEST_CASE("rans coder output is near the adaptive coder's and below zstd's", "[codecs][rans]") {
  for (double scale : {1.0, 30.0}) {
    std::vector<std::uint32_t> ranks;
    for (unsigned frame = 0; frame < 4; ++frame) {
      const auto f = laplacian_ranks(256, 256, scale, 21 + frame);
      ranks.insert(ranks.end(), f.begin(), f.end());
    }
    const std::uint64_t alphabet = alphabet_of(ranks);
    const std::size_t rans = encode_rans(ranks, 256, alphabet).size();
    const std::size_t adaptive = encode_adaptive(ranks, 256, alphabet).size();
    const std::size_t zstd = encode_symbols(ranks, 256, {.zstd_level = 19, .allow_adaptive = false, .allow_rans = false}).size();
    INFO("scale " << scale << ": rans " << rans << ", adaptive " << adaptive << ", zstd -19 " << zstd);
    CHECK(static_cast<double>(rans) <= 1.04 * static_cast<double>(adaptive));
    CHECK(rans < zstd);
  }
}

TEST_CASE("symbol coder picks rANS when smallest and round-trips it", "[codecs][rans]") {
  const auto ranks = laplacian_ranks(128, 128, 2.0, 9);
  SymbolCoderStats stats;
  const auto bytes = encode_symbols(ranks, 128, {.allow_adaptive = false}, &stats);
  REQUIRE(stats.rans_bytes > 0);
  REQUIRE(stats.adaptive_bytes == 0);
  // Whole rows go to the striped coder, 1-D streams to the 2-lane one.
  REQUIRE(stats.chosen == EntropyCoderKind::StripedRans);
  REQUIRE(bytes.size() == stats.rans_bytes);
  REQUIRE(bytes[0] == static_cast<std::uint8_t>(EntropyCoderKind::StripedRans));
  SymbolCoderStats one_d;
  const auto flat = encode_symbols(ranks, 0, {.allow_adaptive = false}, &one_d);
  REQUIRE(one_d.chosen == EntropyCoderKind::Rans);
  std::vector<std::uint32_t> flat_back(ranks.size());
  decode_symbols(flat, 0, flat_back);
  REQUIRE(flat_back == ranks);
  std::vector<std::uint32_t> back(ranks.size());
  decode_symbols(bytes, 128, back);
  REQUIRE(back == ranks);

  SymbolCoderStats without;
  encode_symbols(ranks, 128, {.allow_adaptive = false, .allow_rans = false}, &without);
  REQUIRE(without.rans_bytes == 0);
  REQUIRE(without.chosen == EntropyCoderKind::Zstd);
}
