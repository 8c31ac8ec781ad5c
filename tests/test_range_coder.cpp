#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "codecs/codec_error.hpp"
#include "support/residuals.hpp"
#include "codecs/entropy/range_coder.hpp"

using namespace tezip::codecs;

namespace {

using tezip::test::alphabet_of;
using tezip::test::laplacian_ranks;

void require_round_trip(const std::vector<std::uint32_t>& ranks, std::size_t width, std::uint64_t alphabet) {
  const auto bytes = encode_adaptive(ranks, width, alphabet);
  std::vector<std::uint32_t> back(ranks.size());
  decode_adaptive(bytes, width, alphabet, back);
  REQUIRE(back == ranks);
}

}  // namespace

TEST_CASE("range coder round trips adaptive and direct bits", "[codecs]") {
  std::mt19937 rng(7);
  std::vector<int> bits;
  std::vector<std::uint32_t> directs;
  RangeEncoder enc;
  BitModel models[4];
  for (int i = 0; i < 100000; ++i) {
    const int m = i & 3;
    // Skewed differently per model, including an almost-certain one.
    const int bit = (rng() % 1000) < static_cast<unsigned>(m == 0 ? 1 : m * 300) ? 1 : 0;
    bits.push_back(bit);
    enc.encode(models[m], bit);
    if (i % 97 == 0) {
      const std::uint32_t v = rng();
      const int n = static_cast<int>(rng() % 33);
      directs.push_back(n == 32 ? v : v & ((std::uint32_t{1} << n) - 1));
      directs.push_back(static_cast<std::uint32_t>(n));
      enc.encode_direct(directs[directs.size() - 2], n);
    }
  }
  const auto bytes = enc.finish();
  RangeDecoder dec(bytes);
  BitModel dmodels[4];
  std::size_t d = 0;
  for (int i = 0; i < 100000; ++i) {
    REQUIRE(dec.decode(dmodels[i & 3]) == bits[static_cast<std::size_t>(i)]);
    if (i % 97 == 0) {
      const std::uint32_t v = directs[d++];
      const int n = static_cast<int>(directs[d++]);
      REQUIRE(dec.decode_direct(n) == v);
    }
  }
  REQUIRE(dec.consumed_exactly());
}

TEST_CASE("adaptive coder round trips", "[codecs]") {
  require_round_trip({}, 0, 1);
  require_round_trip({0}, 0, 1);
  require_round_trip({0, 1, 0, 0, 1}, 0, 2);
  require_round_trip(std::vector<std::uint32_t>(1000, 0), 10, 1);
  const auto lap = laplacian_ranks(128, 64, 1.0, 1);
  require_round_trip(lap, 128, alphabet_of(lap));
  require_round_trip(lap, 0, alphabet_of(lap));
  require_round_trip(lap, 1, alphabet_of(lap));
  require_round_trip(lap, 127, alphabet_of(lap) + 5000);
  const auto wide = laplacian_ranks(64, 64, 3000.0, 2);
  require_round_trip(wide, 64, alphabet_of(wide));
  // Extreme ranks exercise the 32-bit mantissa paths.
  require_round_trip({0xFFFFFFFEu, 0, 0x80000000u, 0x7FFFFFFFu, 1, 0xFFFFFFFEu}, 3, 0xFFFFFFFFu);
  require_round_trip({0xFFFFFFFFu, 0, 0x80000000u}, 0, std::uint64_t{1} << 32);
}

TEST_CASE("adaptive coder rejects ranks outside the alphabet", "[codecs]") {
  REQUIRE_THROWS_AS(encode_adaptive(std::vector<std::uint32_t>{0, 5}, 0, 5), std::invalid_argument);
  // Coded against a larger alphabet, decoded against a smaller one.
  const std::vector<std::uint32_t> ranks = {0, 1, 2, 3, 4, 5, 6, 7};
  const auto bytes = encode_adaptive(ranks, 0, 8);
  std::vector<std::uint32_t> back(ranks.size());
  REQUIRE_THROWS_AS(decode_adaptive(bytes, 0, 7, back), CodecError);
}

TEST_CASE("adaptive coder detects truncation and trailing bytes", "[codecs]") {
  const auto ranks = laplacian_ranks(32, 16, 1.0, 3);
  const auto alphabet = alphabet_of(ranks);
  auto bytes = encode_adaptive(ranks, 32, alphabet);
  std::vector<std::uint32_t> back(ranks.size());
  for (std::size_t len = 0; len < bytes.size(); ++len) {
    REQUIRE_THROWS_AS(decode_adaptive(std::span(bytes).first(len), 32, alphabet, back), CodecError);
  }
  bytes.push_back(0);
  REQUIRE_THROWS_AS(decode_adaptive(bytes, 32, alphabet, back), CodecError);
}
