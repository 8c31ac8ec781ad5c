#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codecs/codec_error.hpp"
#include "codecs/entropy/lzma_frame.hpp"
#include "codecs/entropy/range_coder.hpp"
#include "codecs/entropy/rank_remap.hpp"
#include "codecs/entropy/symbol_coder.hpp"
#include "codecs/entropy/zstd_frame.hpp"

using namespace tezip::codecs;

namespace {

std::uint32_t zigzag(int v) { return v >= 0 ? 2u * static_cast<std::uint32_t>(v) : 2u * static_cast<std::uint32_t>(-v) - 1; }

// Residuals of a previous-frame predictor on a smooth, moving, noisy scene: what a GOP's residual
// coder sees. Laid out as frames of rows of `width`.
std::vector<std::uint32_t> video_residuals(int width, int height, int frames, double noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> gauss(0, 1);
  auto render = [&](int t) {
    std::vector<int> img(static_cast<std::size_t>(width * height));
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        double v = 110 + 30 * std::sin(x / 23.0 + t * 0.1) * std::cos(y / 31.0);
        const double dx = x - width / 2.0 - 2 * t, dy = y - height / 2.0;
        v += 80 * std::exp(-(dx * dx + dy * dy) / 400.0);
        if (((x + 2 * t) / 16 + y / 16) % 5 == 0) v += 20;
        v += noise * gauss(rng);
        img[static_cast<std::size_t>(y * width + x)] = std::clamp(static_cast<int>(std::lround(v)), 0, 255);
      }
    }
    return img;
  };
  std::vector<std::uint32_t> out;
  auto prev = render(0);
  for (int t = 1; t <= frames; ++t) {
    auto cur = render(t);
    for (std::size_t i = 0; i < cur.size(); ++i) out.push_back(zigzag(cur[i] - prev[i]));
    prev = std::move(cur);
  }
  return out;
}

// The `count` symbols a stream of rows `width` wide decodes to.
std::vector<std::uint32_t> decoded(std::span<const std::uint8_t> bytes, std::size_t width, std::size_t count) {
  std::vector<std::uint32_t> back(count);
  decode_symbols(bytes, width, back);
  return back;
}

std::vector<std::uint32_t> round_trip(const std::vector<std::uint32_t>& symbols, std::size_t width,
                                      const SymbolCoderOptions& options, SymbolCoderStats* stats = nullptr) {
  return decoded(encode_symbols(symbols, width, options, stats), width, symbols.size());
}

void require_round_trip_both(const std::vector<std::uint32_t>& symbols, std::size_t width) {
  SymbolCoderStats stats;
  REQUIRE(round_trip(symbols, width, SymbolCoderOptions{.allow_adaptive = false, .allow_rans = false}, &stats) == symbols);
  REQUIRE(stats.adaptive_bytes == 0);
  REQUIRE(stats.chosen == EntropyCoderKind::Zstd);
  REQUIRE(round_trip(symbols, width, SymbolCoderOptions{}) == symbols);
  // The adaptive path on its own, whether or not encode_symbols would pick it.
  const RankRemap remap = rank_remap(symbols);
  if (!remap.rank_to_symbol.empty()) {
    const auto bytes = encode_adaptive(remap.ranks, width, remap.rank_to_symbol.size());
    std::vector<std::uint32_t> back(symbols.size());
    decode_adaptive(bytes, width, remap.rank_to_symbol.size(), back);
    REQUIRE(std::ranges::equal(back, remap.ranks));
  }
}

std::vector<std::uint32_t> with_alphabet(std::size_t distinct, std::size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint32_t> symbols(count);
  for (std::size_t i = 0; i < count; ++i) {
    // Every symbol at least once, then a skewed choice, so ranks are not a trivial permutation.
    const std::size_t k = i < distinct ? i : std::min<std::size_t>(distinct - 1, rng() % distinct * (rng() % 4) / 3);
    symbols[i] = static_cast<std::uint32_t>(k * 37 + 11);
  }
  std::shuffle(symbols.begin(), symbols.end(), rng);
  return symbols;
}

}  // namespace

TEST_CASE("symbol coder round trips edge cases", "[codecs]") {
  require_round_trip_both({}, 0);
  require_round_trip_both({42}, 0);
  require_round_trip_both({0xFFFFFFFFu}, 1);
  require_round_trip_both(std::vector<std::uint32_t>(5000, 9), 100);
  require_round_trip_both({0, 0xFFFFFFFFu, 0, 0x12345678u}, 2);
  // Empty and constant chunks cost only the header.
  REQUIRE(encode_symbols(std::vector<std::uint32_t>{}, 0, {}).size() == 3);
  REQUIRE(encode_symbols(std::vector<std::uint32_t>(100000, 3), 256, {}).size() < 10);
}

TEST_CASE("symbol coder round trips residuals and large values", "[codecs]") {
  const auto residuals = video_residuals(96, 64, 3, 2.0, 1);
  require_round_trip_both(residuals, 96);
  require_round_trip_both(residuals, 0);
  std::mt19937 rng(5);
  std::vector<std::uint32_t> large(20000);
  for (auto& v : large) v = rng() % (1u << 17);
  require_round_trip_both(large, 200);
}

TEST_CASE("symbol coder round trips alphabets of many sizes", "[codecs]") {
  for (std::size_t distinct : {1u, 2u, 255u, 256u, 257u, 70000u}) {
    const auto symbols = with_alphabet(distinct, std::max<std::size_t>(distinct * 2, 3000), static_cast<unsigned>(distinct));
    SymbolCoderStats stats;
    REQUIRE(round_trip(symbols, 50, {}, &stats) == symbols);
    REQUIRE(stats.distinct_symbols == distinct);
    require_round_trip_both(symbols, 50);
  }
}

TEST_CASE("adaptive coder wins on residuals, zstd on repetitive data", "[codecs]") {
  const auto residuals = video_residuals(128, 128, 4, 2.0, 2);
  SymbolCoderStats stats;
  const auto bytes = encode_symbols(residuals, 128, {}, &stats);
  REQUIRE(stats.chosen == EntropyCoderKind::Adaptive);
  REQUIRE(stats.adaptive_bytes < stats.zstd_bytes * 95 / 100);
  REQUIRE(bytes.size() == stats.adaptive_bytes);

  // A long pattern repeated over and over is a dictionary coder's best case.
  std::mt19937 rng(3);
  std::vector<std::uint32_t> pattern(3000);
  for (auto& v : pattern) v = rng() % 64;
  std::vector<std::uint32_t> repetitive;
  for (int i = 0; i < 30; ++i) repetitive.insert(repetitive.end(), pattern.begin(), pattern.end());
  const auto rep_bytes = encode_symbols(repetitive, 0, {}, &stats);
  REQUIRE(stats.chosen == EntropyCoderKind::Zstd);
  REQUIRE(stats.zstd_bytes < stats.adaptive_bytes);
  REQUIRE(rep_bytes.size() == stats.zstd_bytes);
  std::vector<std::uint32_t> back(repetitive.size());
  decode_symbols(rep_bytes, 0, back);
  REQUIRE(back == repetitive);
}

TEST_CASE("where zstd wins, the stream is compressed again at the stronger level", "[codecs]") {
  // Sparse residuals with repeats: zstd's case (Moving MNIST's motion frames, rendered depth).
  std::mt19937 rng(11);
  std::vector<std::vector<std::uint32_t>> sprites(8, std::vector<std::uint32_t>(300));
  for (auto& sprite : sprites)
    for (auto& v : sprite) v = rng() % 3 == 0 ? 1 + rng() % 200 : 0;
  std::vector<std::uint32_t> sparse;
  for (int i = 0; i < 400; ++i) {
    sparse.insert(sparse.end(), 100 + rng() % 500, 0);
    const auto& sprite = sprites[rng() % sprites.size()];
    sparse.insert(sparse.end(), sprite.begin() + std::ptrdiff_t(rng() % 200), sprite.end() - std::ptrdiff_t(rng() % 50));
    if (rng() % 2) sparse.push_back(rng() % 256);
  }
  SymbolCoderStats at9, at19, escalated;
  const auto nine = encode_symbols(sparse, 0, {.zstd_level = 9, .allow_adaptive = false}, &at9);
  const auto nineteen = encode_symbols(sparse, 0, {.zstd_level = 19, .allow_adaptive = false}, &at19);
  const auto both = encode_symbols(sparse, 0, {.zstd_level = 9, .zstd_win_level = 19, .allow_adaptive = false}, &escalated);
  REQUIRE(at9.chosen == EntropyCoderKind::Zstd);
  CHECK(escalated.chosen == EntropyCoderKind::Zstd);
  CHECK(escalated.zstd_stronger_tried);  // where zstd won, always
  CHECK_FALSE(at9.zstd_stronger_tried);
  CHECK(escalated.zstd_bytes == both.size());
  CHECK(both.size() == std::min(nine.size(), nineteen.size()));
  CHECK(both.size() < nine.size());
  CHECK(decoded(both, 0, sparse.size()) == sparse);
  // Where rANS wins, nothing changes.
  const auto residuals = video_residuals(96, 64, 3, 2.0, 4);
  SymbolCoderStats plain;
  const auto a = encode_symbols(residuals, 96, {.zstd_level = 9, .allow_adaptive = false}, &plain);
  const auto b = encode_symbols(residuals, 96, {.zstd_level = 9, .zstd_win_level = 19, .allow_adaptive = false});
  REQUIRE(plain.chosen != EntropyCoderKind::Zstd);
  CHECK(a == b);
}

TEST_CASE("where only rANS and zstd compete, a losing zstd pass is given up, and the choice holds", "[codecs]") {
  // Noise-like residuals: rANS wins by far, so zstd stops before the end of the stream.
  const auto residuals = video_residuals(256, 128, 4, 3.0, 9);
  SymbolCoderStats bounded, full;
  const auto a = encode_symbols(residuals, 256, {.zstd_level = 9, .zstd_win_level = 19, .allow_adaptive = false}, &bounded);
  // With LZMA allowed, zstd's whole size is needed: the same pass runs to its end.
  const auto b = encode_symbols(residuals, 256, {.zstd_level = 9, .allow_adaptive = false, .allow_lzma = true}, &full);
  CHECK(bounded.zstd_given_up);
  CHECK(bounded.zstd_gated);  // the cheaper level already passed the limit: level 9 never ran
  CHECK_FALSE(bounded.zstd_stronger_tried);
  CHECK(bounded.zstd_bytes == 0);
  CHECK_FALSE(full.zstd_given_up);
  CHECK_FALSE(full.zstd_gated);
  CHECK(full.zstd_bytes > bounded.rans_bytes);  // level 9 whole: it would have lost too
  CHECK(bounded.chosen == EntropyCoderKind::StripedRans);
  CHECK(a.size() == bounded.rans_bytes);
  CHECK(decoded(a, 256, residuals.size()) == residuals);
  // A stream long enough for the gate's level-6 size to be estimated from a prefix: gated the same.
  const auto long_residuals = video_residuals(512, 512, 5, 3.0, 10);
  REQUIRE(long_residuals.size() >= 4 * zstd_prefix_min);
  SymbolCoderStats long_stats;
  const auto d = encode_symbols(long_residuals, 512, {.zstd_level = 9, .allow_adaptive = false}, &long_stats);
  CHECK(long_stats.zstd_gated);
  CHECK(long_stats.chosen == EntropyCoderKind::StripedRans);
  CHECK(decoded(d, 512, long_residuals.size()) == long_residuals);
  // Where zstd wins (a pattern repeated), it is not given up.
  std::mt19937 rng(3);
  std::vector<std::uint32_t> pattern(256 * 4);
  for (auto& v : pattern) v = rng() % 64;
  std::vector<std::uint32_t> repetitive;
  for (int i = 0; i < 40; ++i) repetitive.insert(repetitive.end(), pattern.begin(), pattern.end());
  SymbolCoderStats wins;
  const auto c = encode_symbols(repetitive, 256, {.zstd_level = 9, .allow_adaptive = false}, &wins);
  CHECK_FALSE(wins.zstd_given_up);
  CHECK_FALSE(wins.zstd_gated);
  CHECK(wins.chosen == EntropyCoderKind::Zstd);
  CHECK(decoded(c, 256, repetitive.size()) == repetitive);
}

TEST_CASE("a rival chunk estimated smaller spares zstd's passes, and is asked for only where they would run", "[codecs]") {
  // A pattern repeated: zstd wins by far, on a stream long enough for a prefix estimate.
  std::mt19937 rng(5);
  std::vector<std::uint32_t> pattern(1024);
  for (auto& v : pattern) v = rng() % 64;
  std::vector<std::uint32_t> repetitive;
  while (repetitive.size() < 5 * zstd_prefix_min) repetitive.insert(repetitive.end(), pattern.begin(), pattern.end());
  const SymbolCoderOptions plain{.zstd_level = 9, .zstd_win_level = 19, .allow_adaptive = false};
  SymbolCoderStats alone;
  const auto without = encode_symbols(repetitive, 1024, plain, &alone);
  REQUIRE(alone.chosen == EntropyCoderKind::Zstd);
  int asked = 0;
  // A rival larger than the rANS stream: never in play, the same bytes.
  SymbolCoderOptions far = plain;
  far.rival_bytes = [&] { ++asked; return alone.rans_bytes + 1; };
  SymbolCoderStats far_stats;
  CHECK(encode_symbols(repetitive, 1024, far, &far_stats) == without);
  CHECK(asked == 1);
  CHECK_FALSE(far_stats.zstd_rivalled);
  // A rival below the rANS stream but above zstd's estimate: zstd still runs, the same bytes.
  SymbolCoderOptions beaten = plain;
  beaten.rival_bytes = [&] { return alone.rans_bytes - 1; };
  SymbolCoderStats beaten_stats;
  CHECK(encode_symbols(repetitive, 1024, beaten, &beaten_stats) == without);
  CHECK_FALSE(beaten_stats.zstd_rivalled);
  // A rival below what zstd could reach: no zstd pass; the rANS stream stands, and decodes.
  SymbolCoderOptions close = plain;
  close.rival_bytes = [&] { return std::size_t{16}; };
  SymbolCoderStats close_stats;
  const auto rivalled = encode_symbols(repetitive, 1024, close, &close_stats);
  CHECK(close_stats.zstd_rivalled);
  CHECK(close_stats.zstd_given_up);
  CHECK_FALSE(close_stats.zstd_stronger_tried);
  CHECK(close_stats.chosen == EntropyCoderKind::StripedRans);
  CHECK(rivalled.size() == alone.rans_bytes);
  CHECK(decoded(rivalled, 1024, repetitive.size()) == repetitive);
  // Noise-like residuals, where the gate gives zstd up first: the rival is never asked for.
  const auto residuals = video_residuals(512, 512, 5, 3.0, 10);
  asked = 0;
  SymbolCoderOptions noisy = plain;
  noisy.rival_bytes = [&] { ++asked; return std::size_t{16}; };
  SymbolCoderStats noisy_stats;
  encode_symbols(residuals, 512, noisy, &noisy_stats);
  CHECK(noisy_stats.zstd_gated);
  CHECK_FALSE(noisy_stats.zstd_rivalled);
  CHECK(asked == 0);
}

TEST_CASE("a fast zstd pass with a slower level's window sees the repeats that level sees", "[codecs]") {
  // Sparse random bytes (95% zeros: a residual of nearly still frames), then the same bytes again,
  // as a coded trial window of cup holds them: the repeat lies beyond level 1's own window
  // (512 KB on a stream this size) and within level 9's (4 MB). encode_symbols' probe stands for
  // level 9, so it must find it.
  std::mt19937 rng(21);
  const int level = 1;
  {
    std::vector<std::uint8_t> bytes(std::size_t{600} << 10);
    for (auto& b : bytes) b = rng() % 20 == 0 ? static_cast<std::uint8_t>(1 + rng() % 7 * (rng() % 5)) : 0;
    bytes.insert(bytes.end(), bytes.begin(), bytes.end());
    const std::size_t own = compress_zstd_frame(bytes, level).size();
    const auto wide = compress_zstd_frame(bytes, level, 9);
    CHECK(double(wide.size()) < 0.6 * double(own));
    CHECK(std::ranges::equal(decompress_zstd_frame(wide, bytes.size(), bytes.size(), "test"), bytes));
    CHECK(zstd_size_within(bytes, level, SIZE_MAX, 9) < std::size_t(0.6 * double(own)));
    CHECK(zstd_size_within(bytes, level, SIZE_MAX) > std::size_t(0.9 * double(own)));
    // A window level whose window is not larger changes nothing.
    CHECK(compress_zstd_frame(bytes, level, 1) == compress_zstd_frame(bytes, level));
  }
}

TEST_CASE("symbol decoding rejects count mismatches and absurd headers", "[codecs]") {
  const auto symbols = video_residuals(32, 16, 1, 2.0, 4);
  const auto bytes = encode_symbols(symbols, 32, {});
  std::vector<std::uint32_t> shorter(symbols.size() - 1), longer(symbols.size() + 1);
  REQUIRE_THROWS_AS(decode_symbols(bytes, 32, shorter), CodecError);
  REQUIRE_THROWS_AS(decode_symbols(bytes, 32, longer), CodecError);
  std::vector<std::uint32_t> none;
  REQUIRE_THROWS_AS(decode_symbols({}, 0, none), CodecError);

  // A header claiming a table far larger than the count, or than the bytes could hold.
  std::vector<std::uint8_t> absurd = {static_cast<std::uint8_t>(EntropyCoderKind::Zstd)};
  append_varint(1000, absurd);
  append_varint(std::uint64_t{1} << 40, absurd);
  absurd.push_back(0);
  std::vector<std::uint32_t> out(1000);
  REQUIRE_THROWS_AS(decode_symbols(absurd, 0, out), CodecError);
  absurd.resize(1 + 2);
  append_varint(900, absurd);
  absurd.push_back(0);
  REQUIRE_THROWS_AS(decode_symbols(absurd, 0, out), CodecError);
  // Unknown coder kind.
  auto bad_kind = bytes;
  bad_kind[0] = 3;
  std::vector<std::uint32_t> back(symbols.size());
  REQUIRE_THROWS_AS(decode_symbols(bad_kind, 32, back), CodecError);
}

TEST_CASE("symbol decoding survives truncation and corruption", "[codecs]") {
  const auto symbols = video_residuals(24, 16, 2, 3.0, 6);
  for (int coder : {0, 1, 2}) {
    // 0: the default coders; 1: with the adaptive one; 2: with LZMA, on data it wins (mutated repeats).
    std::vector<std::uint32_t> lzma_input;
    std::mt19937 rng(5);
    std::vector<std::uint32_t> pattern(100);
    for (auto& v : pattern) v = rng() % 3 ? 0 : rng() % 200;
    for (int i = 0; i < 12; ++i) {
      auto copy = pattern;
      copy[rng() % copy.size()] = rng() % 200;
      lzma_input.insert(lzma_input.end(), copy.begin(), copy.end());
    }
    const auto& input = coder == 2 ? lzma_input : symbols;
    const auto bytes = encode_symbols(input, 24, {.allow_adaptive = coder == 1, .allow_rans = coder != 2, .allow_lzma = coder == 2});
    if (coder == 2) REQUIRE(bytes[0] == static_cast<std::uint8_t>(EntropyCoderKind::Lzma));
    if (coder == 2) REQUIRE(input.size() % 24 == 0);
    std::vector<std::uint32_t> back(input.size());
    decode_symbols(bytes, 24, back);
    REQUIRE(back == input);
    for (std::size_t len = 0; len < bytes.size(); ++len) {
      REQUIRE_THROWS_AS(decode_symbols(std::span(bytes).first(len), 24, back), CodecError);
    }
    auto longer = bytes;
    longer.push_back(0);
    REQUIRE_THROWS_AS(decode_symbols(longer, 24, back), CodecError);
    // A flipped byte must either be caught or decode to something; it must never crash.
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      for (std::uint8_t flip : {std::uint8_t{0x01}, std::uint8_t{0x80}, std::uint8_t{0xFF}}) {
        auto corrupt = bytes;
        corrupt[i] ^= flip;
        try {
          decode_symbols(corrupt, 24, back);
        } catch (const CodecError&) {
        }
      }
    }
  }
}

TEST_CASE("LZMA wins on repetitive data and its frames are checked", "[codecs]") {
  // A pattern repeated with a few changes each time (rendered frames, depth maps): LZMA's repeated
  // match distances and adaptive literals beat zstd there.
  std::mt19937 rng(21);
  std::vector<std::uint32_t> pattern(300);
  for (auto& v : pattern) v = rng() % 3 ? 0 : 1 + rng() % 300;  // ranks past 255 take the escape
  std::vector<std::uint32_t> repetitive;
  for (int i = 0; i < 60; ++i) {
    auto copy = pattern;
    for (int k = 0; k < 6; ++k) copy[rng() % copy.size()] = rng() % 250;
    repetitive.insert(repetitive.end(), copy.begin(), copy.end());
  }
  SymbolCoderStats fast, best;
  const auto plain = encode_symbols(repetitive, 0, {.zstd_level = 9, .allow_adaptive = false}, &fast);
  const auto bytes = encode_symbols(repetitive, 0, {.zstd_level = 9, .allow_adaptive = false, .allow_lzma = true}, &best);
  CHECK(fast.lzma_bytes == 0);
  REQUIRE(best.chosen == EntropyCoderKind::Lzma);
  CHECK(bytes.size() == best.lzma_bytes);
  CHECK(bytes.size() < plain.size());
  CHECK(decoded(bytes, 0, repetitive.size()) == repetitive);

  // The frame itself: sizes and dictionary are checked before anything is decoded.
  std::vector<std::uint8_t> raw(5000);
  for (auto& b : raw) b = std::uint8_t(rng() % 7);
  const auto frame = compress_lzma_frame(raw);
  CHECK(std::ranges::equal(decompress_lzma_frame(frame, 0, raw.size(), "t"), raw));
  CHECK_THROWS_AS(decompress_lzma_frame(frame, 0, raw.size() - 1, "t"), CodecError);  // over the bound
  CHECK_THROWS_AS(decompress_lzma_frame(frame, raw.size() + 1, raw.size() * 2, "t"), CodecError);
  auto bad_dict = frame;
  bad_dict[0] = 40;
  CHECK_THROWS_AS(decompress_lzma_frame(bad_dict, 0, raw.size(), "t"), CodecError);
  auto shorter = frame;  // declares one byte fewer than the stream holds
  shorter[1] = std::uint8_t(shorter[1] - 1);
  CHECK_THROWS_AS(decompress_lzma_frame(shorter, 0, raw.size(), "t"), CodecError);
  auto longer = frame;  // one byte more
  longer[1] = std::uint8_t(longer[1] + 1);
  CHECK_THROWS_AS(decompress_lzma_frame(longer, 0, raw.size() + 1, "t"), CodecError);
  auto trailing = frame;
  trailing.push_back(0);
  CHECK_THROWS_AS(decompress_lzma_frame(trailing, 0, raw.size(), "t"), CodecError);
  for (std::size_t len = 0; len < frame.size(); ++len)
    CHECK_THROWS_AS(decompress_lzma_frame(std::span(frame).first(len), 0, raw.size(), "t"), CodecError);
  CHECK(decompress_lzma_frame(compress_lzma_frame({}), 0, 0, "t").empty());
}

TEST_CASE("the entropy coder registry names every coder and only those", "[codecs][symbols]") {
  std::set<std::string> names;
  for (const auto kind : entropy_coders()) {
    CHECK(is_entropy_coder(static_cast<std::uint8_t>(kind)));
    CHECK(std::string(coder_name(kind)) != "?");
    names.insert(coder_name(kind));
  }
  CHECK(names.size() == entropy_coders().size());
  for (const int byte : {0, 6, 255}) CHECK_FALSE(is_entropy_coder(static_cast<std::uint8_t>(byte)));
  CHECK(std::string(coder_name(static_cast<EntropyCoderKind>(200))) == "?");
}

TEST_CASE("zstd frames are decoded whole where their window holds them, else streamed", "[codecs]") {
  std::mt19937 rng(7);
  for (const std::size_t size : {std::size_t{0}, std::size_t{100000}, std::size_t{3} << 20}) {
    std::vector<std::uint8_t> bytes(size);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng() % 7);
    const auto frame = compress_zstd_frame(bytes, 1);  // level 1's window: 512 KB on 3 MB
    ZstdFrameReader reader(frame, size, size, "test");
    INFO("size " << size);
    CHECK(reader.decoded_whole() == (size <= 100000));
    std::vector<std::uint8_t> out(size);
    for (std::size_t done = 0, piece = 1; done < size; piece = piece * 5 + 3)
      done += reader.read(std::span(out).subspan(done, std::min(size - done, piece)));
    reader.finish();
    CHECK(out == bytes);
    if (size == 0) continue;
    auto cut = frame;
    cut.back() ^= 0x40;  // the last block or the checksum damaged
    CHECK_THROWS_AS(
        [&] {
          ZstdFrameReader r(cut, size, size, "test");
          r.read(out);
          r.finish();
        }(),
        CodecError);
  }
}

TEST_CASE("zstd streams read piece by piece give every symbol, escapes included, and refuse damage", "[codecs]") {
  // zstd payloads are parsed as zstd inflates them (ZstdRankStream), or from the frame decoded
  // whole: plain bytes in a fast loop up to a margin, escapes, refills and the last bytes one by one.
  SymbolCoderOptions zstd_only;
  zstd_only.allow_rans = false, zstd_only.allow_adaptive = false, zstd_only.zstd_level = 1;
  std::mt19937 rng(41);
  for (const std::size_t count : {std::size_t{70001}, (std::size_t{1} << 20) + 4099}) {  // decoded whole; streamed
    for (const std::uint32_t spread : {40u, 120u, 3000u}) {  // under 64 or just above; under the escape; far above
      std::vector<std::int32_t> values(count);
      std::geometric_distribution<int> size(0.2);
      for (auto& v : values) {
        // Beyond 255 distinct values ranks take escapes: an eighth drawn from the whole spread.
        const int m = spread > 255 && rng() % 8 == 0 ? int(rng() % spread) : std::min<int>(size(rng), int(spread));
        v = rng() % 2 ? m : -m;
      }
      if (spread > 255) values[count - 1] = 2999, values[count - 2] = -2999;  // escapes in the last bytes
      std::vector<std::uint32_t> symbols(count);
      for (std::size_t i = 0; i < count; ++i) symbols[i] = zigzag(values[i]);
      const auto bytes = encode_symbols(symbols, 0, zstd_only);
      REQUIRE(bytes[0] == static_cast<std::uint8_t>(EntropyCoderKind::Zstd));
      std::vector<std::int32_t> out(count);
      for (const SimdPath path : supported_simd_paths()) {  // each kernel against the values coded
        INFO("count " << count << ", spread " << spread << ", path " << simd_name(path));
        SignedSymbolReader reader(bytes, 0, count, path);
        for (std::size_t done = 0, piece = 1; done < count; piece = piece * 3 + 7) {
          const std::size_t n = std::min(count - done, piece);
          reader.read(std::span(out).subspan(done, n));
          done += n;
        }
        reader.finish();
        REQUIRE(out == values);
      }
      auto cut = bytes;
      cut.resize(cut.size() - 9);
      CHECK_THROWS_AS(
          [&] {
            SignedSymbolReader r(cut, 0, count);
            r.read(out);
            r.finish();
          }(),
          CodecError);
    }
  }
}
