#include <cstdlib>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "codecs/codec_error.hpp"
#include "codecs/entropy/rank_remap.hpp"
#include "codecs/entropy/rans_model.hpp"
#include "codecs/simd.hpp"
#include "codecs/entropy/striped_rans.hpp"
#include "codecs/entropy/symbol_coder.hpp"
#include "support/residuals.hpp"

using namespace tezip::codecs;

namespace {

using tezip::test::alphabet_of;
using tezip::test::laplacian_ranks;

// Every kernel path this CPU runs; the portable one always.
std::vector<SimdPath> paths() { return tezip::codecs::supported_simd_paths(); }

// Ranks or symbols as decoded by `path`, or the message of the CodecError it threw.
struct Outcome {
  std::vector<std::uint32_t> values;
  std::optional<std::string> error;
  bool operator==(const Outcome&) const = default;
};

Outcome decode_with(SimdPath path, std::span<const std::uint8_t> bytes, std::size_t width, std::size_t count,
                    std::uint64_t alphabet, std::span<const std::uint32_t> table = {}) {
  Outcome o;
  o.values.assign(count, 0xDEADBEEF);
  try {
    decode_striped_rans(bytes, width, alphabet, o.values, table, path);
  } catch (const CodecError& e) {
    o.error = e.what();
    o.values.clear();
  }
  return o;
}

// Each context shape, forced and measured, is encoded the same on every path and decodes on
// every path.
void require_round_trip(const std::vector<std::uint32_t>& ranks, std::size_t width, std::size_t segment_rows,
                        std::uint64_t alphabet) {
  INFO("width " << width << ", rows " << ranks.size() / width << ", segment " << segment_rows << ", alphabet " << alphabet);
  for (const StripedContext context : {StripedContext::six, StripedContext::eight, StripedContext::measured}) {
    INFO("context shape " << int(context));
    const auto bytes = encode_striped_rans(ranks, width, segment_rows, alphabet, context, 1, true, SimdPath::portable);
    for (const SimdPath path : paths()) {
      INFO("path " << simd_name(path));
      REQUIRE(encode_striped_rans(ranks, width, segment_rows, alphabet, context, 1, true, path) == bytes);
      const Outcome o = decode_with(path, bytes, width, ranks.size(), alphabet);
      REQUIRE_FALSE(o.error);
      REQUIRE(o.values == ranks);
    }
  }
}

// Requires every kernel path to give the portable one's values or error on `bytes`; whether that
// is an error.
bool paths_agree_on(const std::vector<std::uint8_t>& bytes, std::size_t width, std::size_t count, std::uint64_t alphabet) {
  const Outcome reference = decode_with(SimdPath::portable, bytes, width, count, alphabet);
  for (const SimdPath path : paths()) REQUIRE(decode_with(path, bytes, width, count, alphabet) == reference);
  return reference.error.has_value();
}

// The same on `bytes` truncated (from none to all but the last byte) and with 300 single-byte
// flips drawn with `seed`; how many of those were errors.
std::size_t damaged_errors(const std::vector<std::uint8_t>& bytes, std::size_t width, std::size_t count,
                           std::uint64_t alphabet, unsigned seed) {
  std::size_t errors = 0;
  for (std::size_t n = 0; n < bytes.size(); n += 1 + n / 7)
    errors += paths_agree_on(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + n), width, count, alphabet);
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 300; ++trial) {
    auto damaged = bytes;
    damaged[rng() % damaged.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    errors += paths_agree_on(damaged, width, count, alphabet);
  }
  return errors;
}

// The stripe-count byte of a stream: after the model and the segment size.
std::uint8_t stripe_byte(const std::vector<std::uint8_t>& bytes, std::uint64_t alphabet) {
  std::size_t pos = 0;
  tezip::codecs::rans::read_model(bytes, pos, alphabet);
  read_varint(bytes, pos);
  return bytes.at(pos);
}

// The options byte after it (bit 0: table sets, bit 1: left classes), 0 where there is none.
std::uint8_t options_byte(const std::vector<std::uint8_t>& bytes, std::uint64_t alphabet) {
  std::size_t pos = 0;
  tezip::codecs::rans::read_model(bytes, pos, alphabet);
  read_varint(bytes, pos);
  return (bytes.at(pos) & 0x40) ? bytes.at(pos + 1) : 0;
}

// Noise through a left delta, zigzagged: each value's sign tends to be the opposite of its left
// neighbour's, which the activity (magnitudes) does not see.
std::vector<std::uint32_t> delta_noise_ranks(std::size_t width, std::size_t rows, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0.0, 2.0);
  std::vector<std::uint32_t> out;
  for (std::size_t y = 0; y < rows; ++y) {
    long previous = 0;
    for (std::size_t x = 0; x < width; ++x) {
      const long v = std::lround(noise(rng)), d = v - previous;
      previous = v;
      out.push_back(d >= 0 ? std::uint32_t(2 * d) : std::uint32_t(-2 * d - 1));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("striped rans allows 32 stripes from 192 rows, 16 from 96, 8 from 64, else 1", "[codecs][striped]") {
  CHECK(striped_rans_lanes(288, 384) == 32);
  CHECK(striped_rans_lanes(192, 1) == 32);
  CHECK(striped_rans_lanes(191, 1000) == 16);
  CHECK(striped_rans_lanes(96, 1) == 16);
  CHECK(striped_rans_lanes(95, 1000) == 8);
  CHECK(striped_rans_lanes(64, 64) == 8);
  CHECK(striped_rans_lanes(63, 64) == 1);
  CHECK(striped_rans_lanes(1, 1) == 1);
}

TEST_CASE("striped rans round-trips on every kernel path: stripes, tails, segments", "[codecs][striped]") {
  struct Shape {
    std::size_t width, rows, segment_rows;
  };
  // 1, 8, 16 and 32 stripes; stripe lengths that differ (130 = 8 x 16 + 2, 200 = 32 x 6 + 8); a
  // last segment shorter than the others (300 = 2 x 128 + 44, whose 44 rows get 16 stripes of 2 or
  // 3 rows; 700 = 2 x 250 + 200); more stripes than rows in a segment; a segment of the whole
  // stream (0).
  const std::vector<Shape> shapes = {{1, 1, 0},     {7, 3, 0},      {64, 64, 64}, {384, 288, 288}, {33, 130, 130},
                                     {50, 300, 128}, {17, 160, 150}, {5, 200, 0},  {1, 256, 128},   {3, 1000, 250},
                                     {40, 700, 250}, {19, 200, 0}};
  for (const auto& s : shapes)
    for (double scale : {0.05, 1.0, 40.0}) {
      const auto ranks = laplacian_ranks(s.width, s.rows, scale, 11);
      require_round_trip(ranks, s.width, s.segment_rows, alphabet_of(ranks));
    }
  // Constant and two-valued streams.
  require_round_trip(std::vector<std::uint32_t>(384 * 288, 0), 384, 288, 1);
  require_round_trip(std::vector<std::uint32_t>(384 * 288, 5), 384, 288, 6);
  std::vector<std::uint32_t> two(160 * 200);
  for (std::size_t i = 0; i < two.size(); ++i) two[i] = (i * 2654435761u >> 7) & 1;
  require_round_trip(two, 160, 200, 2);
  require_round_trip({}, 10, 0, 1);
}

TEST_CASE("striped rans round-trips wide ranks: 24 extra bits on the SIMD path, more on the portable one", "[codecs][striped]") {
  std::mt19937 rng(5);
  for (const std::uint32_t max_bits : {12u, 20u, 26u, 32u}) {
    std::vector<std::uint32_t> ranks(96 * 160);
    for (auto& r : ranks) {
      const std::uint32_t bits = rng() % (max_bits + 1);
      r = bits == 0 ? 0 : static_cast<std::uint32_t>((std::uint64_t{rng()} | (std::uint64_t{1} << 32)) >> (33 - bits));
    }
    require_round_trip(ranks, 96, 160, max_bits == 32 ? (std::uint64_t{1} << 32) : alphabet_of(ranks));
  }
}

TEST_CASE("striped rans maps ranks to symbols on every path", "[codecs][striped]") {
  // Alphabets with most ranks within the AVX-512 kernel's 32 map entries in registers, across
  // them (ranks past 31, which it gathers) and far past them.
  for (const double scale : {3.0, 12.0, 40.0}) {
    const auto ranks = laplacian_ranks(200, 256, scale, 4);
    const std::uint64_t alphabet = alphabet_of(ranks);
    INFO("scale " << scale << ", alphabet " << alphabet);
    std::vector<std::uint32_t> table(alphabet);
    for (std::size_t r = 0; r < table.size(); ++r) table[r] = static_cast<std::uint32_t>(r * 7919 + 3);
    const auto bytes = encode_striped_rans(ranks, 200, 128, alphabet);
    for (const SimdPath path : paths()) {
      const Outcome o = decode_with(path, bytes, 200, ranks.size(), alphabet, table);
      REQUIRE_FALSE(o.error);
      for (std::size_t i = 0; i < ranks.size(); ++i) REQUIRE(o.values[i] == table[ranks[i]]);
    }
  }
}

TEST_CASE("striped rans computes an identity or zigzag map on every path, as the table would give", "[codecs][striped]") {
  // A stream whose symbols were kept as their own ranks carries a table in order; read as signed
  // symbols it is zigzag's inverse. The decoder computes either instead of looking it up.
  for (const double scale : {3.0, 40.0}) {
    const auto ranks = laplacian_ranks(200, 256, scale, 5);
    const std::uint64_t alphabet = alphabet_of(ranks);
    INFO("scale " << scale << ", alphabet " << alphabet);
    std::vector<std::uint32_t> identity(alphabet), unzigzagged(alphabet);
    for (std::uint32_t r = 0; r < alphabet; ++r) {
      identity[r] = r;
      unzigzagged[r] = (r >> 1) ^ (0u - (r & 1));
    }
    std::vector<std::uint32_t> near = unzigzagged;  // one entry off: looked up
    near.back() ^= 0x100;
    const auto bytes = encode_striped_rans(ranks, 200, 128, alphabet);
    for (const SimdPath path : paths()) {
      INFO("path " << simd_name(path));
      for (const auto* table : {&identity, &unzigzagged, &near}) {
        const Outcome o = decode_with(path, bytes, 200, ranks.size(), alphabet, *table);
        REQUIRE_FALSE(o.error);
        for (std::size_t i = 0; i < ranks.size(); ++i) REQUIRE(o.values[i] == (*table)[ranks[i]]);
      }
    }
  }
}

TEST_CASE("symbol coder keeps residuals as their own ranks where the striped coder's estimate says so", "[codecs][striped]") {
  // Residuals whose sign holds over 16 x 16 blocks: the zigzagged symbols' parity is the sign, which
  // the left classes and the neighbours' tokens then see; the frequency ranks of +k and -k fall in
  // either order, so their parity is the sign for some magnitudes and not for others.
  const std::size_t width = 128, rows = 96;
  std::mt19937 rng(11);
  std::geometric_distribution<int> magnitude(0.3);
  std::bernoulli_distribution positive(0.5);
  std::vector<std::int32_t> residuals(width * rows);
  std::vector<int> block_sign((width / 16) * (rows / 16));
  for (auto& b : block_sign) b = positive(rng) ? 1 : -1;
  for (std::size_t y = 0; y < rows; ++y)
    for (std::size_t x = 0; x < width; ++x) residuals[y * width + x] = block_sign[(y / 16) * (width / 16) + x / 16] * magnitude(rng);
  std::vector<std::uint32_t> zig(residuals.size());
  for (std::size_t i = 0; i < zig.size(); ++i) zig[i] = (std::uint32_t(residuals[i]) << 1) ^ std::uint32_t(residuals[i] >> 31);
  const RankRemap ranked = rank_remap(zig);
  const auto largest = *std::max_element(zig.begin(), zig.end());
  REQUIRE(estimate_striped_bits(zig, width, largest + 1) < estimate_striped_bits(ranked.ranks, width, largest + 1));
  SymbolCoderStats stats, ranked_stats;
  const auto bytes = encode_symbols(zig, width, {.allow_adaptive = false}, &stats);
  const auto ranked_bytes = encode_symbols(zig, width, {.allow_adaptive = false, .allow_kept_symbols = false}, &ranked_stats);
  REQUIRE(stats.symbols_kept);
  REQUIRE_FALSE(ranked_stats.symbols_kept);
  REQUIRE(stats.chosen == EntropyCoderKind::StripedRans);
  REQUIRE(bytes.size() < ranked_bytes.size());
  for (const auto* stream : {&bytes, &ranked_bytes}) {
    std::vector<std::uint32_t> back(zig.size());
    decode_symbols(*stream, width, back);
    REQUIRE(back == zig);
    std::vector<std::int32_t> signed_back(zig.size());
    decode_signed_symbols(*stream, width, signed_back);
    REQUIRE(signed_back == residuals);
  }

  // Symbols far apart, as a sparse frame's (0 and +-255, zigzagged): their frequency ranks are 0,
  // 1 and 2, while the symbols themselves would take extra bits. Not kept: the same stream.
  std::vector<std::uint32_t> sparse(width * rows, 0);
  for (std::size_t i = 0; i < sparse.size(); i += 7) sparse[i] = (i / 7) % 3 == 0 ? 509 : 510;
  SymbolCoderStats sparse_stats;
  const auto sparse_bytes = encode_symbols(sparse, width, {.allow_adaptive = false}, &sparse_stats);
  REQUIRE_FALSE(sparse_stats.symbols_kept);
  REQUIRE(sparse_bytes == encode_symbols(sparse, width, {.allow_adaptive = false, .allow_kept_symbols = false}));
  std::vector<std::uint32_t> back(sparse.size());
  decode_symbols(sparse_bytes, width, back);
  REQUIRE(back == sparse);
}

TEST_CASE("striped rans decodes segment by segment as it decodes whole", "[codecs][striped]") {
  const std::size_t width = 120, plane = 150, planes = 5;
  const auto ranks = laplacian_ranks(width, plane * planes, 2.0, 8);
  const std::uint64_t alphabet = alphabet_of(ranks);
  const auto bytes = encode_striped_rans(ranks, width, plane, alphabet);
  REQUIRE((options_byte(bytes, alphabet) & 0x5C) != 0);  // column parts: each request is parts of rows inside
  for (const SimdPath path : paths()) {
    StripedRansDecoder decoder(bytes, width, ranks.size(), alphabet, {}, path);
    std::vector<std::uint32_t> out(ranks.size());
    for (std::size_t p = 0; p < planes; ++p) decoder.decode(std::span(out).subspan(p * plane * width, plane * width));
    decoder.finish();
    REQUIRE(out == ranks);

    StripedRansDecoder partial(bytes, width, ranks.size(), alphabet, {}, path);
    std::vector<std::uint32_t> half(plane * width / 2);
    // The segments' height is the stream's: one that does not fit the request is damaged data.
    REQUIRE_THROWS_AS(partial.decode(half), CodecError);
    StripedRansDecoder early(bytes, width, ranks.size(), alphabet, {}, path);
    early.decode(std::span(out).first(plane * width));
    REQUIRE_THROWS_AS(early.finish(), std::logic_error);
  }
}

// Planes of three channels whose values differ in kind, not only in scale (which the contexts
// see): channel 0 Laplacian residuals, channels 1 and 2 only 0 or 7.
std::vector<std::uint32_t> three_channel_ranks(std::size_t width, std::size_t plane, std::size_t frames, unsigned seed) {
  std::vector<std::uint32_t> out;
  std::mt19937 rng(seed);
  for (std::size_t f = 0; f < frames; ++f)
    for (std::size_t c = 0; c < 3; ++c) {
      if (c == 0) {
        const auto p = laplacian_ranks(width, plane, 1.5, seed + unsigned(f));
        out.insert(out.end(), p.begin(), p.end());
      } else {
        for (std::size_t i = 0; i < width * plane; ++i) out.push_back((rng() & 1) * 7);
      }
    }
  return out;
}

TEST_CASE("striped rans gives channels their own tables where that is smaller", "[codecs][striped]") {
  const std::size_t width = 64, plane = 128, frames = 6;
  const auto ranks = three_channel_ranks(width, plane, frames, 30);
  const std::uint64_t alphabet = alphabet_of(ranks);
  // Told of the channels, or not: the segments' statistics find them too (split_sets), so both
  // streams take table sets and come out the same size within the tables' bytes.
  const auto found = encode_striped_rans(ranks, width, plane, alphabet, StripedContext::measured, 1);
  const auto sets = encode_striped_rans(ranks, width, plane, alphabet, StripedContext::measured, 3);
  CHECK((options_byte(found, alphabet) & 1) != 0);
  CHECK((options_byte(sets, alphabet) & 1) != 0);
  CHECK(double(found.size()) < 1.02 * double(sets.size()));
  const auto one = encode_striped_rans(ranks, width, plane * 3 * frames, alphabet, StripedContext::measured, 1);  // one segment
  CHECK((options_byte(one, alphabet) & 1) == 0);
  CHECK(sets.size() < one.size());
  for (const SimdPath path : paths()) {
    INFO("path " << simd_name(path));
    const Outcome o = decode_with(path, sets, width, ranks.size(), alphabet);
    REQUIRE_FALSE(o.error);
    REQUIRE(o.values == ranks);
    StripedRansDecoder decoder(sets, width, ranks.size(), alphabet, {}, path);
    std::vector<std::uint32_t> out(ranks.size());
    for (std::size_t p = 0; p < 3 * frames; ++p) decoder.decode(std::span(out).subspan(p * plane * width, plane * width));
    decoder.finish();
    REQUIRE(out == ranks);
  }
  // Channels alike: one set (the extra tables would cost more than they save).
  const auto alike = laplacian_ranks(width, plane * 3 * frames, 2.0, 31);
  CHECK((options_byte(encode_striped_rans(alike, width, plane, alphabet_of(alike), StripedContext::measured, 3),
                      alphabet_of(alike)) & 1) == 0);
}

TEST_CASE("striped rans groups segments into table sets by their statistics, in any order", "[codecs][striped]") {
  // Segments of two kinds that the contexts cannot tell apart (the same activities: even ranks
  // 0..14 or odd ranks 1..15, uniform) in an irregular order, left classes off (they would see
  // the parity): with a set for each kind a symbol costs 3 bits, with one table 4.
  const std::size_t width = 64, rows = 32, segments = 24;
  std::mt19937 rng(77);
  std::vector<std::uint32_t> mixed, even, odd;
  for (std::size_t k = 0; k < segments; ++k) {
    const bool is_odd = (k * 7 + k / 5) % 5 < 2;
    for (std::size_t i = 0; i < width * rows; ++i) {
      const std::uint32_t r = 2 * std::uint32_t(rng() % 8) + (is_odd ? 1 : 0);
      mixed.push_back(r);
      (is_odd ? odd : even).push_back(r);
    }
  }
  const std::uint64_t alphabet = 16;
  const auto bytes = encode_striped_rans(mixed, width, rows, alphabet, StripedContext::measured, 1, false);
  const auto apart = encode_striped_rans(even, width, rows, alphabet, StripedContext::measured, 1, false).size() +
                     encode_striped_rans(odd, width, rows, alphabet, StripedContext::measured, 1, false).size();
  CHECK((options_byte(bytes, alphabet) & 1) != 0);
  INFO("mixed " << bytes.size() << " bytes, each kind apart " << apart);
  CHECK(double(bytes.size()) < 1.03 * double(apart));
  for (const SimdPath path : paths()) {
    INFO("path " << simd_name(path));
    REQUIRE(encode_striped_rans(mixed, width, rows, alphabet, StripedContext::measured, 1, false, path) == bytes);
    const Outcome o = decode_with(path, bytes, width, mixed.size(), alphabet);
    REQUIRE_FALSE(o.error);
    REQUIRE(o.values == mixed);
  }
}

TEST_CASE("striped rans: every path agrees on damaged streams, and none crashes", "[codecs][striped]") {
  // 32 stripes of rows (an odd width has no column parts), and fewer in column parts (the AVX-512
  // kernel's two vectors either way); enough rows that the stripes' own bytes cost little.
  for (const std::size_t width : {47, 48}) {
    const auto ranks = laplacian_ranks(width, 2048, 4.0, 21);
    const auto bytes = encode_striped_rans(ranks, width, width % 2 == 1 ? 256 : 128, alphabet_of(ranks));
    REQUIRE((stripe_byte(bytes, alphabet_of(ranks)) & 0x3F) == 32);
    REQUIRE(bool(options_byte(bytes, alphabet_of(ranks)) & 0x5C) == (width % 2 == 0));
    CHECK(damaged_errors(bytes, width, ranks.size(), alphabet_of(ranks), 4) > 250);
  }
  // 16 stripes of rows (128-row segments).
  const std::size_t width = 47, rows = 1024;
  const auto ranks = laplacian_ranks(width, rows, 4.0, 21);
  const std::uint64_t alphabet = alphabet_of(ranks);
  const auto bytes = encode_striped_rans(ranks, width, 128, alphabet);
  REQUIRE((stripe_byte(bytes, alphabet) & 0x3F) == 16);
  std::size_t errors = damaged_errors(bytes, width, ranks.size(), alphabet, 3);
  auto longer = bytes;
  longer.push_back(0);
  errors += paths_agree_on(longer, width, ranks.size(), alphabet);
  // Truncations and trailing bytes are always detected; most flips are.
  CHECK(errors > 250);
  REQUIRE(decode_with(SimdPath::portable, longer, width, ranks.size(), alphabet).error);
  // Other shapes than the encoder's are refused, not misread.
  std::vector<std::uint32_t> more(ranks.size() + width), fewer(ranks.size() - 1);
  REQUIRE_THROWS_AS(decode_striped_rans(bytes, width, alphabet, more), CodecError);
  REQUIRE_THROWS_AS(decode_striped_rans(bytes, width + 1, alphabet, fewer), CodecError);
}

// `planes` planes of `rows` whose every column holds a level of its own down the plane (0 or
// `level`) plus noise: the row above tells a symbol's level, its left neighbours do not, so
// stripes' first rows cost and cuts between columns hardly do.
std::vector<std::uint32_t> column_levels(std::size_t width, std::size_t rows, std::uint32_t level, unsigned seed,
                                         std::size_t planes = 2) {
  std::mt19937 rng(seed);
  std::geometric_distribution<std::uint32_t> noise(0.3);
  std::vector<std::uint32_t> out(width * rows * planes);
  for (std::size_t plane = 0; plane < planes; ++plane) {
    std::vector<std::uint32_t> at(width);
    for (auto& v : at) v = rng() % 2 ? level : 0;
    for (std::size_t y = 0; y < rows; ++y)
      for (std::size_t x = 0; x < width; ++x) out[(plane * rows + y) * width + x] = at[x] + noise(rng);
  }
  return out;
}

TEST_CASE("striped rans: column quarters and eighths round-trip on every path; bad parts are refused", "[codecs][striped]") {
  // The encoder takes 32 lanes of fewer stripes in more parts (four planes: the lanes' own bytes,
  // which the encoder counts, a small part of the stream).
  struct Case {
    std::size_t rows;
    std::uint8_t parts_bit;  // 0x08 quarters (8 stripes), 0x10 eighths (4 stripes)
  };
  for (const Case c : {Case{256, 0x08}, Case{192, 0x10}}) {
    const std::size_t width = 256;
    const auto ranks = column_levels(width, c.rows, 30, 7, 4);
    const std::uint64_t alphabet = alphabet_of(ranks);
    const auto bytes = encode_striped_rans(ranks, width, c.rows, alphabet);
    INFO("rows " << c.rows);
    REQUIRE((stripe_byte(bytes, alphabet) & 0x3F) == 32);
    REQUIRE((options_byte(bytes, alphabet) & 0x5C) == c.parts_bit);
    CHECK(striped_rans_column_parts(bytes, alphabet) == (c.parts_bit == 0x08 ? 4 : 8));
    require_round_trip(ranks, width, c.rows, alphabet);
    CHECK(damaged_errors(bytes, width, ranks.size(), alphabet, 5) > 250);
    // A width the parts do not divide, and two parts bits at once, are refused on every path.
    std::vector<std::uint32_t> narrower(ranks.size() / (width - 2) * (width - 2));
    REQUIRE_THROWS_AS(decode_striped_rans(bytes, width - 2, alphabet, narrower), CodecError);
    std::size_t pos = 0;
    tezip::codecs::rans::read_model(bytes, pos, alphabet);
    read_varint(bytes, pos);
    auto both = bytes;
    both.at(pos + 1) |= 0x0C | 0x10;
    for (const SimdPath path : paths()) CHECK(decode_with(path, both, width, ranks.size(), alphabet).error);
  }
}

TEST_CASE("symbol coder gives rows to the striped coder and reads them plane by plane", "[codecs][striped]") {
  const std::size_t width = 96, plane = 130, planes = 3;
  const std::vector<std::uint32_t> zig = laplacian_ranks(width, plane * planes, 2.0, 9);
  std::vector<std::int32_t> values(zig.size());
  for (std::size_t i = 0; i < zig.size(); ++i) values[i] = static_cast<std::int32_t>(zig[i] >> 1) ^ -static_cast<std::int32_t>(zig[i] & 1);
  SymbolCoderStats stats;
  const auto bytes = encode_symbols(zig, width, {.allow_adaptive = false, .segment_rows = plane}, &stats);
  REQUIRE(stats.chosen == EntropyCoderKind::StripedRans);
  SignedSymbolReader reader(bytes, width, values.size());
  std::vector<std::int32_t> out(values.size());
  for (std::size_t p = 0; p < planes; ++p) reader.read(std::span(out).subspan(p * plane * width, plane * width));
  reader.finish();
  REQUIRE(out == values);
}

TEST_CASE("simd paths parse by name and the portable one is always there", "[codecs][simd]") {
  CHECK(simd_supported(SimdPath::portable));
  CHECK(parse_simd_path("portable") == SimdPath::portable);
  CHECK(parse_simd_path("avx2") == SimdPath::avx2);
  CHECK(parse_simd_path("avx512") == SimdPath::avx512);
  CHECK_FALSE(parse_simd_path("neon"));
  for (const SimdPath path : {SimdPath::portable, SimdPath::avx2, SimdPath::avx512})
    CHECK(parse_simd_path(simd_name(path)) == path);
  CHECK(simd_supported(simd_path()));
  const auto supported = supported_simd_paths();
  REQUIRE(!supported.empty());
  CHECK(supported.front() == SimdPath::portable);
  // Each path runs the kernels of the ones before it.
  if (simd_supported(SimdPath::avx512)) CHECK(simd_supported(SimdPath::avx2));
  // The default is the best path this CPU runs (TEZIP_SIMD unset in ctest).
  if (std::getenv("TEZIP_SIMD") == nullptr) CHECK(simd_path() == supported.back());
}

TEST_CASE("the encoder's reciprocal division equals integer division for every frequency", "[codecs][rans]") {
  using namespace tezip::codecs::rans;
  std::mt19937 rng(2);
  for (std::uint32_t f = 1; f <= kProbScale; ++f) {
    const std::uint64_t r = reciprocal(f);
    for (const std::uint32_t x : {0u, 1u, f - 1, f, f + 1, 2 * f - 1, 0xFFFFFFFFu, 0xFFFFFFFFu - f, 0x80000000u})
      REQUIRE(divide(x, r) == x / f);
    for (int k = 0; k < 200; ++k) {
      const std::uint32_t x = static_cast<std::uint32_t>(rng());
      REQUIRE(divide(x, r) == x / f);
      // Just below a multiple of f, where a rounding error would show.
      const std::uint32_t y = (x / f) * f;
      if (y > 0) REQUIRE(divide(y - 1, r) == (y - 1) / f);
    }
  }
}

TEST_CASE("striped rans: one stripe in sixteenths whose cuts see their neighbours, on every path", "[codecs][striped]") {
  // 32-row planes of column levels (too few rows for 8 stripes): one stripe of rows in sixteen
  // parts of 16 columns (16 lanes), whose first columns take the neighbours' row above (chunk
  // version 19).
  const std::size_t width = 256, rows = 32;
  const auto ranks = column_levels(width, rows, 30, 11, 16);
  const std::uint64_t alphabet = alphabet_of(ranks);
  const auto bytes = encode_striped_rans(ranks, width, rows, alphabet);
  REQUIRE((stripe_byte(bytes, alphabet) & 0x3F) == 16);
  REQUIRE((options_byte(bytes, alphabet) & 0xDC) == (0x40 | 0x80));
  CHECK(striped_rans_column_parts(bytes, alphabet) == 16);
  require_round_trip(ranks, width, rows, alphabet);
  CHECK(damaged_errors(bytes, width, ranks.size(), alphabet, 9) > 250);
  // The cuts' neighbours are part of the contexts: without the flag the stream decodes to other
  // values or fails; the flag without column parts is refused.
  std::size_t pos = 0;
  tezip::codecs::rans::read_model(bytes, pos, alphabet);
  read_varint(bytes, pos);
  auto blind = bytes;
  blind.at(pos + 1) &= 0x7F;
  for (const SimdPath path : paths()) CHECK(decode_with(path, blind, width, ranks.size(), alphabet).values != ranks);
  auto whole = bytes;
  whole.at(pos + 1) &= 0x83;
  for (const SimdPath path : paths()) CHECK(decode_with(path, whole, width, ranks.size(), alphabet).error);
  // A stream without parts says 1.
  std::vector<std::uint32_t> noisy(96 * 192);
  std::mt19937 rng(2);
  for (auto& v : noisy) v = rng() % 7;
  CHECK(striped_rans_column_parts(encode_striped_rans(noisy, 96, 192, 7), 7) == 1);
}

TEST_CASE("the encoder takes fewer stripes where their first rows would cost ratio", "[codecs][striped]") {
  using namespace tezip::codecs::rans;
  auto stripes_of = [](const std::vector<std::uint8_t>& bytes, std::uint64_t alphabet) {
    return std::size_t(stripe_byte(bytes, alphabet) & 0x3F);
  };
  // Independent residuals: the row above tells nothing, 32 lanes cost nothing: 32 stripes of rows
  // from 192 rows, else 16, 8 or 4 stripes in column parts (32 lanes from 64 rows of 160 columns),
  // or 16 stripes of rows where the width is odd.
  std::vector<std::uint32_t> noisy(160 * 288 * 4);
  std::mt19937 noise(3);
  std::geometric_distribution<std::uint32_t> magnitude(0.3);
  for (auto& v : noisy) v = magnitude(noise);
  const std::uint64_t a = alphabet_of(noisy);
  CHECK(stripes_of(encode_striped_rans(noisy, 160, 288, a), a) == 32);
  const auto parts = encode_striped_rans(noisy, 160, 144, a);
  CHECK(stripes_of(parts, a) == 32);
  CHECK((options_byte(parts, a) & 0x5C) != 0);
  const auto eight = encode_striped_rans(noisy, 160, 80, a);  // at most 8 stripes (of 10 rows), in parts
  CHECK(stripes_of(eight, a) == 32);
  CHECK((options_byte(eight, a) & 0x5C) != 0);
  const std::vector<std::uint32_t> odd(noisy.begin(), noisy.begin() + 159 * 144 * 4);
  CHECK(stripes_of(encode_striped_rans(odd, 159, 144, alphabet_of(odd)), alphabet_of(odd)) == 16);
  // Smooth structure that repeats from row to row but not from plane to plane: losing the row above
  // at every stripe start would cost, so the encoder keeps fewer than 8 stripes of rows (in column
  // parts where those make 16 or 32 lanes: the cuts between columns cost little).
  std::vector<std::uint32_t> smooth;
  std::mt19937 rng(4);
  for (int plane = 0; plane < 4; ++plane)
    for (int y = 0; y < 120; ++y)
      for (int x = 0; x < 160; ++x) smooth.push_back(((x / 8 + plane * 3) % 5 == 0) ? 40 + rng() % 3 : (rng() % 16 == 0));
  const auto bytes = encode_striped_rans(smooth, 160, 120, alphabet_of(smooth));
  const std::size_t column_parts = striped_rans_column_parts(bytes, alphabet_of(smooth));
  CHECK(stripes_of(bytes, alphabet_of(smooth)) / column_parts < 8);
  std::vector<std::uint32_t> back(smooth.size());
  decode_striped_rans(bytes, 160, alphabet_of(smooth), back);
  CHECK(back == smooth);
}

TEST_CASE("the encoder takes the context shape whose stream is smaller", "[codecs][striped]") {
  // Residuals in 8x8 blocks, as a decoded video leaves them: blocks skipped (all zero) or coded
  // (noise). The tokens two to the left and two rows up tell a skipped block from a coded one's
  // quiet pixels better than the six nearest alone.
  std::mt19937 rng(12);
  std::geometric_distribution<std::uint32_t> noise(0.35);
  const std::size_t width = 256, plane = 192, planes = 4;
  std::vector<std::uint32_t> blocky(width * plane * planes);
  std::vector<bool> coded((width / 8) * (plane / 8) * planes);
  for (std::size_t b = 0; b < coded.size(); ++b) coded[b] = rng() % 3 == 0;
  for (std::size_t p = 0; p < planes; ++p)
    for (std::size_t y = 0; y < plane; ++y)
      for (std::size_t x = 0; x < width; ++x)
        if (coded[(p * (plane / 8) + y / 8) * (width / 8) + x / 8])
          blocky[(p * plane + y) * width + x] = noise(rng) * (rng() % 4 == 0 ? 0 : 1);
  const std::uint64_t alphabet = alphabet_of(blocky);
  const auto six = encode_striped_rans(blocky, width, plane, alphabet, StripedContext::six);
  const auto eight = encode_striped_rans(blocky, width, plane, alphabet, StripedContext::eight);
  const auto measured = encode_striped_rans(blocky, width, plane, alphabet);
  CHECK((stripe_byte(six, alphabet) & 0x80) == 0);
  CHECK((stripe_byte(eight, alphabet) & 0x80) != 0);
  CHECK(double(eight.size()) < 0.985 * double(six.size()));  // 2.7% here
  CHECK(measured == eight);
  // On every kind of test data the measured choice is within 0.2% of the smaller forced shape.
  for (double scale : {0.05, 1.0, 40.0}) {
    const auto ranks = laplacian_ranks(320, 480, scale, 5);
    const std::uint64_t a = alphabet_of(ranks);
    const std::size_t best = std::min(encode_striped_rans(ranks, 320, 240, a, StripedContext::six).size(),
                                      encode_striped_rans(ranks, 320, 240, a, StripedContext::eight).size());
    INFO("scale " << scale);
    CHECK(double(encode_striped_rans(ranks, 320, 240, a).size()) <= 1.002 * double(best));
  }
}

TEST_CASE("striped rans: every path agrees on damaged streams with table sets and left classes", "[codecs][striped]") {
  struct Stream {
    std::size_t width, plane;
    std::vector<std::uint32_t> ranks;
    std::uint8_t options;
  };
  for (const Stream& stream : {Stream{40, 64, three_channel_ranks(40, 64, 3, 40), 1}, Stream{128, 128, delta_noise_ranks(128, 128 * 3, 41), 2}}) {
    const std::size_t width = stream.width, plane = stream.plane;
    const auto& ranks = stream.ranks;
    const std::uint64_t alphabet = alphabet_of(ranks);
    const auto bytes = encode_striped_rans(ranks, width, plane, alphabet, StripedContext::measured, 3);
    REQUIRE((options_byte(bytes, alphabet) & stream.options) != 0);
    CHECK(damaged_errors(bytes, width, ranks.size(), alphabet, 8) > 250);
  }
}

TEST_CASE("striped rans splits contexts by the left token's class where that is smaller", "[codecs][striped]") {
  const std::size_t width = 128, plane = 128, planes = 3;
  const auto ranks = delta_noise_ranks(width, plane * planes, 6);
  const std::uint64_t alphabet = alphabet_of(ranks);
  const auto split = encode_striped_rans(ranks, width, plane, alphabet);
  const auto plain = encode_striped_rans(ranks, width, plane, alphabet, StripedContext::measured, 1, false);
  CHECK((options_byte(split, alphabet) & 2) != 0);
  CHECK((options_byte(plain, alphabet) & 2) == 0);
  CHECK(double(split.size()) < 0.99 * double(plain.size()));  // 1.8% here
  for (const SimdPath path : paths()) {
    INFO("path " << simd_name(path));
    const Outcome o = decode_with(path, split, width, ranks.size(), alphabet);
    REQUIRE_FALSE(o.error);
    REQUIRE(o.values == ranks);
  }
  // Independent values: the left token tells nothing, and three times the tables cost more.
  std::vector<std::uint32_t> noisy(width * plane * planes);
  std::mt19937 rng(7);
  std::geometric_distribution<std::uint32_t> magnitude(0.3);
  for (auto& v : noisy) v = magnitude(rng);
  CHECK((options_byte(encode_striped_rans(noisy, width, plane, alphabet_of(noisy)), alphabet_of(noisy)) & 2) == 0);
}

TEST_CASE("striped rans: side classes in the contexts round-trip on every path, and are needed to decode", "[codecs][striped]") {
  // Noise whose scale follows each pixel's own side class, which its neighbours' tokens do not
  // tell: the encoder takes the side classes.
  auto make = [](std::size_t width, std::size_t rows, unsigned seed, std::vector<std::uint8_t>& side) {
    std::mt19937 rng(seed);
    std::geometric_distribution<std::uint32_t> quiet(0.9), loud(0.3);
    std::vector<std::uint32_t> ranks(width * rows);
    side.resize(width * rows);
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      side[i] = static_cast<std::uint8_t>(rng() % 9);
      ranks[i] = side[i] < 5 ? quiet(rng) : loud(rng);
    }
    return ranks;
  };
  for (const std::size_t rows : {std::size_t{96}, std::size_t{192}}) {  // 16 and 32 stripes a plane
    const std::size_t width = 200, planes = 2;                        // columns past whole tiles of 16
    std::vector<std::uint8_t> side;
    const auto ranks = make(width, rows * planes, 11, side);
    const std::uint64_t alphabet = alphabet_of(ranks);
    INFO("rows " << rows);
    const auto bytes = encode_striped_rans(ranks, width, rows, alphabet, StripedContext::measured, 1, true, SimdPath::portable, side);
    REQUIRE((options_byte(bytes, alphabet) & 0x20) != 0);
    CHECK(bytes.size() < encode_striped_rans(ranks, width, rows, alphabet).size() * 97 / 100);
    for (const SimdPath path : paths()) {
      INFO("path " << simd_name(path));
      REQUIRE(encode_striped_rans(ranks, width, rows, alphabet, StripedContext::measured, 1, true, path, side) == bytes);
      // Plane by plane, each with its own side classes, as the GOP decoder reads them.
      StripedRansDecoder decoder(bytes, width, ranks.size(), alphabet, {}, path);
      REQUIRE(decoder.uses_side());
      std::vector<std::uint32_t> out(ranks.size());
      for (std::size_t p = 0; p < planes; ++p)
        decoder.decode(std::span(out).subspan(p * rows * width, rows * width),
                       std::span<const std::uint8_t>(side).subspan(p * rows * width, rows * width));
      decoder.finish();
      REQUIRE(out == ranks);
      // Without them: refused, not guessed.
      StripedRansDecoder blind(bytes, width, ranks.size(), alphabet, {}, path);
      REQUIRE_THROWS_AS(blind.decode(out), CodecError);
    }
    // A stream without side classes ignores any given, and the encoder ignores classes that do not pay.
    const std::vector<std::uint8_t> flat(side.size(), 3);
    const auto plain = encode_striped_rans(ranks, width, rows, alphabet, StripedContext::measured, 1, true, simd_path(), flat);
    REQUIRE((options_byte(plain, alphabet) & 0x20) == 0);
    std::vector<std::uint32_t> out(ranks.size());
    StripedRansDecoder decoder(plain, width, ranks.size(), alphabet);
    decoder.decode(out, side);
    decoder.finish();
    REQUIRE(out == ranks);
    // A shift byte past the classes is refused.
    std::size_t pos = 0;
    tezip::codecs::rans::read_model(bytes, pos, alphabet);
    read_varint(bytes, pos);
    auto bad = bytes;
    const std::size_t shift_at = pos + 2 + ((bad.at(pos + 1) & 0x01) ? 1 : 0);
    REQUIRE(bad.at(shift_at) < 16);
    bad.at(shift_at) = 16;
    REQUIRE_THROWS_AS(StripedRansDecoder(bad, width, ranks.size(), alphabet), CodecError);
  }
}

TEST_CASE("side classes: the bit width of the forecast's gradient, the same on every path", "[codecs][striped]") {
  // A ramp of 10 a column: interior gradient 20 (bit width 5), 10 at the edge columns (4).
  std::vector<std::uint16_t> ramp(3 * 40);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<std::uint16_t>(10 * (i % 40));
  std::vector<std::uint8_t> classes(ramp.size());
  side_classes(ramp, 40, 255 * 2, classes, SimdPath::portable);  // 9 bits: the gradient halved
  CHECK(classes[41] == 4);
  side_classes(ramp, 40, 255, classes, SimdPath::portable);
  CHECK(classes[41] == 5);
  CHECK(classes[40] == 4);
  CHECK(classes[79] == 4);
  std::mt19937 rng(3);
  for (const std::uint32_t max_value : {255u, 1023u, 65535u})
    for (const std::size_t width : {1, 2, 17, 33, 34, 35, 64, 100, 641})
      for (const std::size_t height : {1, 2, 5}) {
        INFO("max " << max_value << ", " << width << " x " << height);
        std::vector<std::uint16_t> forecast(width * height);
        for (auto& v : forecast) v = static_cast<std::uint16_t>(rng() % (max_value + 1) / (1 + rng() % 64));
        std::vector<std::uint8_t> reference(forecast.size()), out(forecast.size(), 0xEE);
        side_classes(forecast, width, max_value, reference, SimdPath::portable);
        for (const auto c : reference) REQUIRE(c < kSideClasses);
        for (const SimdPath path : paths()) {
          INFO("path " << simd_name(path));
          side_classes(forecast, width, max_value, out, path);
          REQUIRE(out == reference);
        }
      }
}
