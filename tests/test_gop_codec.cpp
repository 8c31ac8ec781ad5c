#include <catch2/catch.hpp>

#include <malloc.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <random>
#include <span>

#include "compressor/decoder.hpp"
#include "compressor/encoder.hpp"
#include "codecs/transform/channel_plan.hpp"
#include "compressor/gop_codec.hpp"
#include "support/gop_frames.hpp"
#include "support/temp_dir.hpp"
#include "format/byte_io.hpp"
#include "format/errors.hpp"

using namespace tezip;
namespace fs = std::filesystem;
using codecs::BoundMode;
using codecs::ErrorBound;

using tezip::test::moving_scene;

namespace {

void check_bound(const ErrorBound& bound, const FrameShape& shape, const GopFrames& original, const GopFrames& decoded) {
  const std::size_t plane = std::size_t(shape.width) * shape.height;
  REQUIRE(original.size() == decoded.size());
  for (std::size_t t = 0; t < original.size(); ++t)
    for (std::uint32_t c = 0; c < shape.channels; ++c) {
      const auto* x = original[t].data() + c * plane;
      const auto* y = decoded[t].data() + c * plane;
      const auto [lo, hi] = std::minmax_element(x, x + plane);
      for (std::size_t p = 0; p < plane; ++p)
        if (!bound.allows(x[p], y[p], *lo, *hi))
          FAIL("frame " << t << " channel " << c << " pixel " << p << ": x=" << x[p] << " y=" << y[p] << " "
                        << codecs::describe(bound));
    }
}

// A colour scene from a gray one: channel ch of each pixel is value_of(ch, the gray value), channel
// by channel.
template <class ValueOf>
GopFrames colour_scene(const GopFrames& gray, ValueOf value_of) {
  GopFrames frames;
  for (const auto& f : gray) {
    std::vector<std::uint16_t> c(3 * f.size());
    for (std::uint32_t ch = 0; ch < 3; ++ch)
      for (std::size_t i = 0; i < f.size(); ++i) c[ch * f.size() + i] = value_of(ch, f[i]);
    frames.emplace_back(c.begin(), c.end());
  }
  return frames;
}

// Where a colour chunk's header (version 6 and 7: version, quantizer, predictor choice, frame count, then
// per frame its channel plan and per plane tolerance, mode, runs) holds each frame's plan byte and
// each plane's mode byte.
struct ColourHeader {
  std::vector<std::size_t> plans;
  std::vector<std::array<std::size_t, 3>> modes;
};
ColourHeader read_colour_header(std::span<const std::uint8_t> chunk) {
  ByteReader in(chunk, "chunk");
  const std::uint8_t version = in.u8();
  // chunk version (13: the polyphase layout; 14: plane modes 4-6; 17: plane mode 8; 19: column parts)
  REQUIRE(((version >= 12 && version <= 14) || version == 17 || version == 19));
  in.u8();  // quantizer
  in.u8();  // predictor choice
  ColourHeader h;
  const std::size_t frames = in.varint();
  for (std::size_t t = 0; t < frames; ++t) {
    h.plans.push_back(chunk.size() - in.remaining());
    in.u8();
    std::array<std::size_t, 3> modes{};
    for (auto& m : modes) {
      in.varint();
      m = chunk.size() - in.remaining();
      in.u8();
      in.varint();
    }
    h.modes.push_back(modes);
  }
  return h;
}

GopFrames round_trip(const Predictor& predictor, const FrameShape& shape, const GopFrames& frames,
                     const CodingSettings& settings) {
  const GopFrames* gops[] = {&frames};
  auto encoded = encode_gops(predictor, shape, gops, settings);
  const std::span<const std::uint8_t> chunks[] = {encoded[0].bytes};
  const std::size_t counts[] = {frames.size()};
  auto decoded = decode_gops(predictor, shape, chunks, counts, settings);
  REQUIRE(decoded[0] == encoded[0].reconstruction);  // the encoder's closed loop is the decoder's
  return decoded[0];
}

// Each shape x predictor x quantizer x bound: the GOP round trips (the decoder gives the encoder's
// reconstruction) and every pixel holds the bound (lossless: the original itself).
void check_bounds_hold(std::initializer_list<FrameShape> shapes, std::size_t frame_count, std::uint32_t seed,
                       std::initializer_list<const char*> kinds, std::span<const ErrorBound> bounds) {
  for (auto shape : shapes) {
    const auto frames = moving_scene(shape, frame_count, seed);
    for (const char* kind : kinds) {
      const auto predictor = make_classical_predictor(kind);
      for (auto quantizer : {QuantizerKind::Linear, QuantizerKind::Interval})
        for (const auto& bound : bounds) {
          CodingSettings settings;
          settings.bound = bound;
          settings.quantizer = quantizer;
          INFO(kind << " " << codecs::describe(bound) << " quantizer " << int(quantizer) << " max " << shape.max_value
                    << " channels " << shape.channels);
          const auto decoded = round_trip(*predictor, shape, frames, settings);
          if (bound.mode == BoundMode::Lossless) REQUIRE(decoded == frames);
          check_bound(bound, shape, frames, decoded);
        }
    }
  }
}

}  // namespace

TEST_CASE("lossless GOPs round trip bit for bit with every predictor", "[gop]") {
  for (auto shape : {FrameShape{48, 40, 1, 255}, FrameShape{33, 21, 3, 255}, FrameShape{40, 32, 1, 65535}}) {
    const auto frames = moving_scene(shape, 6, 1);
    for (const char* kind : {"intra", "previous", "linear", "motion"}) {
      const auto predictor = make_classical_predictor(kind);
      for (int coders : {0, 1, 2}) {  // zstd only, + rANS, + adaptive
        CodingSettings settings;
        settings.rans_coder = coders == 1;
        settings.adaptive_coder = coders == 2;
        INFO(kind << " coders " << coders << " " << " " << shape.width << "x" << shape.height << "x" << shape.channels << " max " << shape.max_value);
        REQUIRE(round_trip(*predictor, shape, frames, settings) == frames);
      }
    }
  }
}

TEST_CASE("every error mode holds on every pixel, for a range of bounds", "[gop][bound]") {
  const std::vector<ErrorBound> bounds = {
      {BoundMode::Abs, 0.5, 0},     {BoundMode::Abs, 1, 0},       {BoundMode::Abs, 2, 0},
      {BoundMode::Abs, 2.5, 0},     {BoundMode::Abs, 7.9, 0},     {BoundMode::Abs, 1000, 0},
      {BoundMode::Rel, 0, 0.001},   {BoundMode::Rel, 0, 0.013},   {BoundMode::Rel, 0, 0.1},
      {BoundMode::AbsRel, 3.3, 0.005}, {BoundMode::AbsRel, 1, 0.2},
      {BoundMode::PwRel, 0, 0.001}, {BoundMode::PwRel, 0, 0.05},  {BoundMode::PwRel, 0, 0.37},
  };
  check_bounds_hold({FrameShape{40, 30, 1, 255}, FrameShape{24, 20, 3, 255}, FrameShape{32, 24, 1, 65535}}, 5, 2,
                    {"intra", "previous", "linear", "motion"}, bounds);
}

// Frames are allocated without zeroing (Pixels, format/frame.hpp): the decoder must write every
// pixel itself. glibc's M_PERTURB fills each block that malloc hands out with a byte pattern, so a
// pixel left unwritten shows up as a wrong value instead of a lucky zero.
TEST_CASE("decoded frames do not depend on what the allocator hands back", "[gop]") {
#ifdef M_PERTURB
  struct Perturb {
    Perturb() { mallopt(M_PERTURB, 0xA5); }
    ~Perturb() { mallopt(M_PERTURB, 0); }
  } perturb;
  const Pixels probe(4096);
  REQUIRE(probe[1000] == 0x5A5A);  // what an unwritten pixel would hold (0xA5 ^ 0xFF in each byte)
#endif
  const ErrorBound bounds[] = {{BoundMode::Lossless, 0, 0}, {BoundMode::Abs, 2, 0}, {BoundMode::PwRel, 0, 0.05}};
  check_bounds_hold({FrameShape{48, 40, 1, 255}, FrameShape{24, 20, 3, 255}, FrameShape{32, 24, 1, 65535}}, 9, 7,
                    {"auto", "previous", "intra", "bidirectional"}, bounds);
}

// The checksum of decode_chunks is taken as decode_gops tells of rows: it must tell of every row
// once, with its final pixels, in lockstep and bidirectional GOPs, gray and colour, batched with
// GOPs of other lengths and with pixel chunks.
TEST_CASE("decode_gops tells of every row once, when its pixels are final", "[gop]") {
  for (const auto shape : {FrameShape{40, 37, 1, 255}, FrameShape{24, 20, 3, 255}})
    for (const char* kind : {"previous", "motion", "bidirectional", "auto"})
      for (const bool pixel_chunks : {false, true}) {
        INFO(kind << " channels " << shape.channels << " pixel chunks " << pixel_chunks);
        const std::size_t width = shape.width, rows_per_frame = std::size_t(shape.height) * shape.channels;
        const auto predictor = make_classical_predictor(kind);
        const auto a = moving_scene(shape, 7, 11), b = moving_scene(shape, 4, 12);
        const GopFrames still(3, a[0]);  // exact repeats: a pixel chunk where they are allowed
        CodingSettings settings;
        settings.pixel_chunks = pixel_chunks;
        settings.coded_motion = true;
        const GopFrames* gops[] = {&a, &b, &still};
        const auto encoded = encode_gops(*predictor, shape, gops, settings);
        std::vector<std::span<const std::uint8_t>> chunks;
        for (const auto& e : encoded) chunks.emplace_back(e.bytes);
        const std::size_t counts[] = {a.size(), b.size(), still.size()};
        std::vector<std::vector<std::vector<std::uint16_t>>> told(3);  // [chunk][frame's row (channel * height + y)]
        for (std::size_t g = 0; g < 3; ++g) told[g].resize(counts[g] * rows_per_frame);
        std::size_t rows_told = 0;
        const auto decoded = decode_gops(*predictor, shape, chunks, counts, settings,
                                         [&](std::size_t g, std::size_t t, std::size_t c, std::size_t y, std::span<const std::uint16_t> rows) {
                                           REQUIRE(g < 3);
                                           REQUIRE(t < counts[g]);
                                           REQUIRE(c < shape.channels);
                                           REQUIRE(rows.size() % width == 0);
                                           REQUIRE(y + rows.size() / width <= shape.height);
                                           for (std::size_t r = 0; r < rows.size() / width; ++r) {
                                             auto& copy = told[g][t * rows_per_frame + c * shape.height + y + r];
                                             REQUIRE(copy.empty());
                                             copy.assign(rows.begin() + r * width, rows.begin() + (r + 1) * width);  // as they are now
                                             ++rows_told;
                                           }
                                         });
        CHECK(rows_told == (a.size() + b.size() + still.size()) * rows_per_frame);
        for (std::size_t g = 0; g < 3; ++g)
          for (std::size_t t = 0; t < counts[g]; ++t)
            for (std::size_t r = 0; r < rows_per_frame; ++r) {
              const auto& copy = told[g][t * rows_per_frame + r];
              const auto* final_pixels = decoded[g][t].data() + r * width;
              REQUIRE(std::equal(copy.begin(), copy.end(), final_pixels, final_pixels + width));
            }
      }
}

TEST_CASE("GOPs of different lengths are coded in one batch", "[gop]") {
  const FrameShape shape{32, 24, 1, 255};
  const auto a = moving_scene(shape, 5, 3), b = moving_scene(shape, 2, 4), c = moving_scene(shape, 1, 5);
  const auto predictor = make_classical_predictor("linear");
  CodingSettings settings;
  settings.bound = {BoundMode::Abs, 2, 0};
  const GopFrames* gops[] = {&a, &b, &c};
  auto encoded = encode_gops(*predictor, shape, gops, settings);
  std::vector<std::span<const std::uint8_t>> chunks;
  for (auto& e : encoded) chunks.emplace_back(e.bytes);
  const std::size_t counts[] = {5, 2, 1};
  auto decoded = decode_gops(*predictor, shape, chunks, counts, settings);
  for (std::size_t g = 0; g < 3; ++g) {
    REQUIRE(decoded[g] == encoded[g].reconstruction);
    // Batching changes nothing: each GOP alone codes to the same bytes.
    const GopFrames* one[] = {gops[g]};
    REQUIRE(encode_gops(*predictor, shape, one, settings)[0].bytes == encoded[g].bytes);
  }
}

TEST_CASE("a GOP whose symbols take column parts is a chunk of version 19; one without keeps its version", "[gop]") {
  // A ramp under fresh Gaussian noise each frame, sigma 1 and 6 in bands of 32 columns (the
  // contexts see the bands: the striped coder beats zstd), losslessly: 256 columns of 48 rows
  // (too few for 8 stripes of rows) code as one stripe in sixteen column parts, whose cuts see
  // their neighbours; 48 columns of 32 rows as one stripe.
  auto noisy_ramp = [](const FrameShape& shape) {
    std::mt19937 rng(5);
    std::normal_distribution<double> noise(0, 1);
    GopFrames frames;
    for (int t = 0; t < 4; ++t) {
      Pixels f(shape.size());
      for (std::size_t i = 0; i < f.size(); ++i) {
        const std::size_t x = i % shape.width;
        f[i] = std::uint16_t(std::lround(100.0 + double(x / 2) + noise(rng) * (x / 32 % 2 ? 6.0 : 1.0)));
      }
      frames.push_back(std::move(f));
    }
    return frames;
  };
  const auto predictor = make_classical_predictor("previous");
  for (const FrameShape shape : {FrameShape{256, 48, 1, 255}, FrameShape{48, 32, 1, 255}}) {
    INFO(shape.width << "x" << shape.height);
    const GopFrames frames = noisy_ramp(shape);
    const GopFrames* gops[] = {&frames};
    const auto encoded = encode_gops(*predictor, shape, gops, {})[0];
    CHECK((encoded.bytes.at(0) == 19) == (shape.width == 256));
    CHECK(encoded.bytes.at(0) >= 12);
    const std::span<const std::uint8_t> chunks[] = {encoded.bytes};
    const std::size_t counts[] = {frames.size()};
    CHECK(decode_gops(*predictor, shape, chunks, counts, {})[0] == frames);
    const auto head = std::span<const std::uint8_t>(encoded.bytes).first(std::min(encoded.bytes.size(), kChunkHeadBytes));
    CHECK(chunk_kind(*predictor, head) == "previous");
  }
}

TEST_CASE("a chunk decoded with other settings or counts is refused", "[gop]") {
  const FrameShape shape{16, 16, 1, 255};
  const auto frames = moving_scene(shape, 3, 6);
  const auto predictor = make_classical_predictor("previous");
  CodingSettings settings;
  settings.pixel_chunks = false;  // a predictive chunk, which the quantizer's settings shape (this small scene codes sparse)
  const GopFrames* gops[] = {&frames};
  auto encoded = encode_gops(*predictor, shape, gops, settings);
  const std::span<const std::uint8_t> chunks[] = {encoded[0].bytes};
  const std::size_t wrong_count[] = {4};
  CHECK_THROWS(decode_gops(*predictor, shape, chunks, wrong_count, settings));
  CodingSettings interval = settings;
  interval.quantizer = QuantizerKind::Interval;
  const std::size_t counts[] = {3};
  CHECK_THROWS(decode_gops(*predictor, shape, chunks, counts, interval));
}

// Where a gray chunk's header (version, quantizer, predictor choice, frame count, then per frame
// its plane's tolerance, mode, runs) holds each frame's mode byte.
std::vector<std::size_t> gray_mode_offsets(std::span<const std::uint8_t> chunk) {
  ByteReader in(chunk, "chunk");
  in.u8(), in.u8(), in.u8();
  std::vector<std::size_t> offsets(in.varint());
  for (auto& offset : offsets) {
    in.varint();
    offset = chunk.size() - in.remaining();
    in.u8();
    in.varint();
  }
  return offsets;
}

// A simulated field of 16-bit values: waves drifting across the frame by `speed` a frame, smooth
// in space and, where the speed is small, in time.
GopFrames wave_field(const FrameShape& shape, std::size_t count, double speed) {
  GopFrames frames;
  for (std::size_t t = 0; t < count; ++t) {
    std::vector<std::uint16_t> f(std::size_t(shape.width) * shape.height);
    for (std::uint32_t y = 0; y < shape.height; ++y)
      for (std::uint32_t x = 0; x < shape.width; ++x)
        f[y * shape.width + x] = std::uint16_t(std::lround(32000 + 12000 * std::sin(0.09 * x + 0.05 * y + speed * double(t)) *
                                                                     std::cos(0.07 * y - 0.03 * x - 0.6 * speed * double(t))));
    frames.emplace_back(f.begin(), f.end());
  }
  return frames;
}

TEST_CASE("smooth fields take the gradient and interpolation transforms and interpolated planes (chunk versions 14, 15), exactly",
          "[gop][transform]") {
  // Slow waves: what the previous frame leaves bends, where the median transform's clamp is not
  // exact. Fast waves: each frame is far from the one before, and its own pixels interpolate best.
  const FrameShape shape{64, 48, 1, 65535};
  const auto predictor = make_classical_predictor("previous");
  for (const double speed : {0.4, 3.0}) {
    const auto frames = wave_field(shape, 6, speed);
    for (const auto& bound : {ErrorBound{BoundMode::Lossless, 0, 0}, ErrorBound{BoundMode::Abs, 2, 0}}) {
      INFO("speed " << speed << " " << codecs::describe(bound));
      std::size_t bytes[2] = {};
      for (const bool allowed : {false, true}) {
        CodingSettings settings;
        settings.bound = bound;
        settings.pixel_chunks = false;
        settings.smooth_modes = allowed;
        const GopFrames* gops[] = {&frames};
        auto encoded = encode_gops(*predictor, shape, gops, settings);
        const auto& chunk = encoded[0].bytes;
        // Version 15 where a bounded plane is interpolated (quantized in closed loop), 14 lossless.
        const bool lossless = bound.mode == BoundMode::Lossless;
        REQUIRE(chunk[0] == (allowed ? (lossless ? 14 : 15) : 12));
        // Plane modes: 4 the gradient, 5 the interpolation of the residual, 6 an interpolated plane,
        // 7 (bounded) the residual interpolated in closed loop. The key frame's own pixels
        // interpolate best; with fast waves the later frames' too.
        std::vector<std::uint8_t> modes;
        for (const std::size_t offset : gray_mode_offsets(chunk)) modes.push_back(chunk[offset] & 0x0f);
        CHECK((modes[0] == 6) == allowed);
        const auto later = [&](std::uint8_t m) { return std::count(modes.begin() + 1, modes.end(), m); };
        if (speed < 1) CHECK((later(4) + later(5) + later(7) > 0) == allowed);
        if (speed > 1) CHECK((later(6) > 0) == allowed);
        const std::span<const std::uint8_t> chunks[] = {chunk};
        const std::size_t counts[] = {frames.size()};
        const auto decoded = decode_gops(*predictor, shape, chunks, counts, settings);
        REQUIRE(decoded[0] == encoded[0].reconstruction);
        check_bound(bound, shape, frames, decoded[0]);
        bytes[allowed] = chunk.size();
        if (!allowed) continue;
        // A reader of version 13 had none of these plane modes: the chunk says it is newer, and one
        // that claims 13 is refused.
        std::vector<std::uint8_t> older = chunk;
        older[0] = 13;
        const std::span<const std::uint8_t> older_chunks[] = {older};
        CHECK_THROWS_WITH(decode_gops(*predictor, shape, older_chunks, counts, settings),
                          Catch::Contains("in a chunk before version 14"));
        // Version 14 read bounded interpolated planes as the interpolation transform of their bins:
        // such a chunk decodes, to other pixels (each version's planes are their own); it had no
        // mode 7, which it refuses.
        if (!lossless) {
          std::vector<std::uint8_t> open_loop = chunk;
          open_loop[0] = 14;
          const std::span<const std::uint8_t> open_chunks[] = {open_loop};
          if (later(7) > 0)
            CHECK_THROWS_WITH(decode_gops(*predictor, shape, open_chunks, counts, settings),
                              Catch::Contains("an interpolated residual in a chunk before version 15"));
          else
            CHECK(decode_gops(*predictor, shape, open_chunks, counts, settings)[0] != encoded[0].reconstruction);
        }
        // An interpolated plane has no forecast to move: motion on it is refused.
        std::vector<std::uint8_t> moved = chunk;
        for (const std::size_t offset : gray_mode_offsets(chunk))
          if ((moved[offset] & 0x0f) == 6) moved[offset] |= 0x40;
        const std::span<const std::uint8_t> moved_chunks[] = {moved};
        CHECK_THROWS_WITH(decode_gops(*predictor, shape, moved_chunks, counts, settings),
                          Catch::Contains("an interpolated plane in colour, or with a forecast map or motion"));
      }
      // Measured against the GOP without them, never larger; on these fields far smaller.
      INFO("with the smooth modes " << bytes[1] << " bytes, without " << bytes[0]);
      CHECK(bytes[1] * 10 < bytes[0] * 9);
    }
  }
}

TEST_CASE("bounded forecast planes interpolate their residual in closed loop where it pays (chunk version 15), exactly",
          "[gop][transform]") {
  // Waves that drift slowly: a frame's residual against the one before is a smoother surface than
  // the frame itself, and its interpolation in closed loop (plane mode 7) codes it where the
  // interpolation is weighed on every bounded forecast plane (--profile max).
  const FrameShape shape{64, 48, 1, 65535};
  const auto predictor = make_classical_predictor("previous");
  const auto frames = wave_field(shape, 6, 0.05);
  CodingSettings settings;
  settings.bound = ErrorBound{BoundMode::Abs, 16, 0};
  settings.pixel_chunks = false;
  settings.interpolate_every_plane = true;
  const GopFrames* gops[] = {&frames};
  const auto encoded = encode_gops(*predictor, shape, gops, settings);
  const auto& chunk = encoded[0].bytes;
  REQUIRE(chunk[0] == 15);
  std::vector<std::uint8_t> modes;
  for (const std::size_t offset : gray_mode_offsets(chunk)) modes.push_back(chunk[offset] & 0x0f);
  CHECK(std::count(modes.begin() + 1, modes.end(), std::uint8_t{7}) > 0);
  const std::span<const std::uint8_t> chunks[] = {chunk};
  const std::size_t counts[] = {frames.size()};
  const auto decoded = decode_gops(*predictor, shape, chunks, counts, settings);
  REQUIRE(decoded[0] == encoded[0].reconstruction);
  check_bound(settings.bound, shape, frames, decoded[0]);
  // Without the weighing, and without the smooth modes, the GOP is larger.
  CodingSettings gated = settings, none = settings;
  gated.interpolate_every_plane = false;
  none.smooth_modes = false;
  const auto gated_size = encode_gops(*predictor, shape, gops, gated)[0].bytes.size();
  const auto none_size = encode_gops(*predictor, shape, gops, none)[0].bytes.size();
  INFO("weighed everywhere " << chunk.size() << " bytes, gated " << gated_size << ", without smooth modes " << none_size);
  CHECK(chunk.size() < gated_size);
  CHECK(chunk.size() < none_size);
  // A chunk that claims version 14 had no mode 7: refused; a lossless plane cannot take it.
  std::vector<std::uint8_t> older = chunk;
  older[0] = 14;
  const std::span<const std::uint8_t> older_chunks[] = {older};
  CHECK_THROWS_WITH(decode_gops(*predictor, shape, older_chunks, counts, settings),
                    Catch::Contains("an interpolated residual in a chunk before version 15"));
}

TEST_CASE("classical predictors forecast what they promise", "[predictor]") {
  const FrameShape shape{4, 1, 1, 255};
  const std::vector<std::uint16_t> f0 = {10, 100, 200, 250}, f1 = {20, 90, 230, 255};
  auto check = [&](const char* kind, std::vector<std::uint16_t> expected) {
    const auto p = make_classical_predictor(kind);
    auto state = p->begin_gop(shape, f0);
    GopState* states[] = {state.get()};
    const std::span<const std::uint16_t> seen[] = {f1};
    p->observe(states, seen);
    std::vector<std::uint16_t> out(4);
    const std::span<std::uint16_t> views[] = {out};
    p->forecast(states, views);
    CHECK(out == expected);
  };
  check("previous", f1);
  check("linear", {30, 80, 255, 255});  // 2*f1 - f0, clamped to [0, 255]
  CHECK(make_classical_predictor("intra")->intra_only());
  CHECK_THROWS_AS(make_classical_predictor("oracle"), std::invalid_argument);
}

TEST_CASE("colour channels whose residuals move together are coded as differences", "[gop][colour]") {
  // Three channels of one noisy moving scene (as from a colour camera: the same noise in each).
  const FrameShape colour{64, 48, 3, 255}, gray{64, 48, 1, 255};
  const auto base = moving_scene(gray, 6, 8);
  // Each channel has its own small noise too, so that no channel repeats another (zstd would find that).
  std::mt19937 rng(12);
  const GopFrames frames = colour_scene(base, [&](std::uint32_t ch, std::uint16_t v) {
    return std::uint16_t(std::clamp(int(v) - 20 * int(ch) + (rng() % 64 == 0 ? 1 : 0), 0, 255));
  });
  GopFrames one_channel;
  for (const auto& f : frames) one_channel.emplace_back(f.begin(), f.begin() + std::ptrdiff_t(gray.size()));
  for (const char* kind : {"intra", "previous"}) {
    const auto predictor = make_classical_predictor(kind);
    for (const ErrorBound bound : {ErrorBound{}, ErrorBound{BoundMode::Abs, 2, 0}}) {
      CodingSettings settings;
      settings.bound = bound;
      settings.colour_transform = false;  // the channel plans under test, on the pixels
      INFO(kind << " " << codecs::describe(bound));
      const GopFrames* gops[] = {&frames};
      const GopFrames* gray_gops[] = {&one_channel};
      const auto coded = encode_gops(*predictor, colour, gops, settings);
      const auto coded_gray = encode_gops(*predictor, gray, gray_gops, settings);
      // Without the differences three channels cost about three times one.
      INFO("colour " << coded[0].bytes.size() << " bytes, one channel " << coded_gray[0].bytes.size());
      CHECK(coded[0].bytes.size() < 2 * coded_gray[0].bytes.size());
      // Every frame's channel plan codes the second and third planes against earlier ones; no
      // plane carries the channel-delta flag of chunk versions 3-5.
      const auto header = read_colour_header(coded[0].bytes);
      REQUIRE(header.plans.size() == frames.size());
      for (std::size_t t = 0; t < frames.size(); ++t) {
        INFO("frame " << t);
        const auto plan = codecs::ChannelPlan::from_byte(coded[0].bytes[header.plans[t]]);
        CHECK(plan.second != codecs::ChannelRef::None);
        CHECK(plan.third != codecs::ChannelRef::None);
        for (const auto mode : header.modes[t]) CHECK((coded[0].bytes[mode] & 0x20) == 0);
      }
      const auto decoded = round_trip(*predictor, colour, frames, settings);
      if (bound.mode == BoundMode::Lossless) CHECK(decoded == frames);
      check_bound(bound, colour, frames, decoded);
    }
  }
}

TEST_CASE("a colour GOP's channel plans code first the channel the others follow, and decode exactly", "[gop][colour]") {
  // Channel 2 carries the moving scene; channels 0 and 1 are it plus a little noise of their own,
  // as a colour camera whose green is its cleanest channel.
  const FrameShape colour{48, 40, 3, 255}, gray{48, 40, 1, 255};
  const auto base = moving_scene(gray, 7, 21);
  std::mt19937 rng(4);
  const GopFrames frames = colour_scene(base, [&](std::uint32_t ch, std::uint16_t v) {
    return ch == 2 ? v : std::uint16_t(std::clamp(int(v) + int(rng() % 7) - 3, 0, 255));
  });
  for (const char* kind : {"previous", "bidirectional", "intra"}) {
    const auto predictor = make_classical_predictor(kind);
    for (const ErrorBound bound : {ErrorBound{}, ErrorBound{BoundMode::Abs, 1, 0}}) {
      CodingSettings settings;
      settings.bound = bound;
      settings.colour_transform = false;  // the channel plans under test, on the pixels
      INFO(kind << " " << codecs::describe(bound));
      const GopFrames* gops[] = {&frames};
      const auto coded = encode_gops(*predictor, colour, gops, settings);
      const auto header = read_colour_header(coded[0].bytes);
      for (std::size_t t = 0; t < frames.size(); ++t) {
        INFO("frame " << t);
        const auto plan = codecs::ChannelPlan::from_byte(coded[0].bytes[header.plans[t]]);
        CHECK(plan.order[0] == 2);
        // The key frame's planes, the scene itself, are coded against it (the others' residuals
        // may be their noise alone, which differences do not shrink).
        if (t == 0) CHECK(plan.second == codecs::ChannelRef::First);
      }
      const auto decoded = round_trip(*predictor, colour, frames, settings);
      if (bound.mode == BoundMode::Lossless) CHECK(decoded == frames);
      check_bound(bound, colour, frames, decoded);
    }
  }
}

TEST_CASE("a colour chunk with a bad channel plan is refused with a clear error", "[gop][colour]") {
  const FrameShape colour{32, 24, 3, 255};
  const auto frames = moving_scene(colour, 4, 3);
  const auto predictor = make_classical_predictor("previous");
  const std::size_t counts[] = {frames.size()};
  const GopFrames* gops[] = {&frames};
  const auto refused = [&](std::vector<std::uint8_t> chunk, const CodingSettings& settings, const std::string& why) {
    const std::span<const std::uint8_t> chunks[] = {chunk};
    CHECK_THROWS_WITH(decode_gops(*predictor, colour, chunks, counts, settings), Catch::Contains(why));
  };
  CodingSettings settings;
  settings.pixel_chunks = false;  // a predictive chunk, whatever the scene
  settings.colour_transform = false;
  const auto coded = encode_gops(*predictor, colour, gops, settings);
  const auto header = read_colour_header(coded[0].bytes);
  for (const std::uint8_t b : {0x06, 0x07, 0x40, 0x80}) {
    auto bad = coded[0].bytes;
    bad[header.plans[1]] = b;
    refused(bad, settings, "unknown channel plan");
  }
  auto flagged = coded[0].bytes;
  flagged[header.modes[1][1]] |= 0x20;
  refused(flagged, settings, "channel delta flag in a chunk of version 6");
  // Interval-coded planes have no symbols to relate.
  CodingSettings interval = settings;
  interval.bound = ErrorBound{BoundMode::Abs, 2, 0};
  interval.quantizer = QuantizerKind::Interval;
  auto runs = encode_gops(*predictor, colour, gops, interval)[0].bytes;
  const auto run_header = read_colour_header(runs);
  CHECK(runs[run_header.plans[1]] == 0);
  runs[run_header.plans[1]] = codecs::ChannelPlan{{0, 1, 2}, codecs::ChannelRef::First, codecs::ChannelRef::None}.byte();
  refused(runs, interval, "channel plan on interval-coded planes");
}

TEST_CASE("the bundled colour sample decodes bit for bit and within its bound, default settings", "[gop][colour]") {
  // Real colour video: its inter planes are coded as channel differences of spatially transformed
  // residuals, which the decoder inverts a few rows at a time (rows above a block are read as they
  // were before the difference).
  const fs::path samples = fs::path(TEZIP_SOURCE_DIR) / "datasets/sample/vtest";
  test::TempDir dir;
  for (const char* mode : {"lossless", "abs"}) {
    CompressOptions options;
    options.threads = 2;
    if (std::string(mode) == "abs") options.coding.bound = ErrorBound{BoundMode::Abs, 2, 0};
    const fs::path archive = dir.path() / (std::string(mode) + ".tzp");
    compress(samples, archive, options);
    const auto report = verify(archive, samples, 2);
    INFO(mode);
    for (const auto& f : report.failures) INFO(f);
    REQUIRE(report.failures.empty());
    REQUIRE(report.pixels_out_of_bound == 0);
    if (std::string(mode) == "lossless") REQUIRE(report.max_error == 0);
  }
}

TEST_CASE("bounded GOPs of real camera frames take the forecast's side classes, within the bound", "[gop][side]") {
  // The bundled camera sample at abs 2: the forecast's detail in the residuals' contexts (chunk
  // version 11) made it 2.1% smaller when measured; every pixel stays within the bound either way.
  const fs::path samples = fs::path(TEZIP_SOURCE_DIR) / "datasets/sample/mire";
  test::TempDir dir;
  std::uintmax_t size[2] = {};
  for (const bool side : {false, true}) {
    CompressOptions options;
    options.threads = 2;
    options.coding.bound = ErrorBound{BoundMode::Abs, 2, 0};
    options.coding.side_classes = side;
    const fs::path archive = dir.path() / (side ? "side.tzp" : "plain.tzp");
    compress(samples, archive, options);
    const auto report = verify(archive, samples, 2);
    INFO("side classes " << side);
    for (const auto& f : report.failures) INFO(f);
    REQUIRE(report.failures.empty());
    REQUIRE(report.pixels_out_of_bound == 0);
    REQUIRE(report.max_error <= 2);
    size[side] = fs::file_size(archive);
  }
  INFO("with side classes " << size[1] << " bytes, without " << size[0]);
  CHECK(size[1] * 100 < size[0] * 99);
}

TEST_CASE("auto's trial ranks the choices of a small GOP of real video as its whole frames do", "[gop][auto]") {
  // The bundled colour sample at abs 2 (16 frames of 160 x 120): `previous` codes it 3.7% smaller
  // than `bidirectional`. A trial on one band of 32 rows (82k pixels) chose `bidirectional`; the
  // trial's floor on its pixels (kAutoTrialPixels) keeps it to the whole GOP here.
  const fs::path samples = fs::path(TEZIP_SOURCE_DIR) / "datasets/sample/vtest";
  test::TempDir dir;
  const auto archive_bytes = [&](const std::string& predictor) {
    CompressOptions options;
    options.threads = 2;
    options.predictor = predictor;
    options.coding.bound = ErrorBound{BoundMode::Abs, 2, 0};
    const fs::path archive = dir.path() / (predictor + ".tzp");
    compress(samples, archive, options);
    return fs::file_size(archive);
  };
  std::uintmax_t smallest = UINTMAX_MAX;
  std::string sizes;
  for (const char* choice : {"previous", "intra", "linear", "bidirectional"}) {
    const std::uintmax_t bytes = archive_bytes(choice);
    sizes += std::string(choice) + " " + std::to_string(bytes) + " bytes; ";
    smallest = std::min(smallest, bytes);
  }
  const std::uintmax_t chosen = archive_bytes("auto");
  INFO(sizes << "auto " << chosen << " bytes");
  CHECK(chosen <= smallest * 1005 / 1000);
}

TEST_CASE("the auto predictor chooses per GOP, records it, and decodes what it chose", "[gop][auto]") {
  const FrameShape shape{64, 48, 1, 1000};
  // GOP 0: a still scene with sensor noise (the previous frame predicts it); GOP 1: a piecewise
  // smooth image whose content jumps every frame (only the spatial coder predicts it).
  GopFrames still, jumping;
  std::mt19937 rng(3);
  std::vector<std::uint16_t> base(shape.size());
  for (std::size_t i = 0; i < base.size(); ++i) base[i] = std::uint16_t(200 + (i % 64) * 7 + rng() % 400);
  for (int t = 0; t < 8; ++t) {
    auto f = base;
    for (auto& v : f) v = std::uint16_t(std::clamp(int(v) + int(rng() % 3) - 1, 0, 1000));
    still.emplace_back(f.begin(), f.end());
    // Flat rectangles of random levels at random places, new ones every frame (a depth map of a
    // scene cut every frame): exact zeros spatially, large differences in time.
    std::vector<std::uint16_t> j(shape.size(), 500);
    for (int r = 0; r < 6; ++r) {
      const std::uint32_t x0 = rng() % 48, y0 = rng() % 32, w = 8 + rng() % 16, h = 8 + rng() % 16;
      const std::uint16_t level = std::uint16_t(rng() % 1000);
      for (std::uint32_t y = y0; y < std::min(shape.height, y0 + h); ++y)
        for (std::uint32_t x = x0; x < std::min(shape.width, x0 + w); ++x) j[y * shape.width + x] = level;
    }
    jumping.emplace_back(j.begin(), j.end());
  }
  const auto predictor = make_classical_predictor("auto");
  REQUIRE(predictor->identity().kind == "auto");
  REQUIRE(predictor->choices().size() == 4);
  for (const codecs::ErrorBound bound : {codecs::ErrorBound{}, codecs::ErrorBound{BoundMode::Abs, 2, 0}}) {
    INFO(codecs::describe(bound));
    CodingSettings settings;
    settings.bound = bound;
    settings.pixel_chunks = false;  // predictive chunks, the choice's (the rectangles' 500 background codes sparse)
    // Without level maps: the rectangles' frames use a few levels each, and through their maps
    // `bidirectional` snaps its interpolated forecast to them, a chunk zstd then wins at level 19
    // (583 bytes, 676 without maps), a pass auto's trial does not run (it ranked it last, 745).
    settings.level_maps = false;
    const GopFrames* gops[] = {&still, &jumping};
    const auto coded = encode_gops(*predictor, shape, gops, settings);
    // Chunk bytes: version, quantizer, predictor choice (index + 1 into choices(): previous, intra,
    // linear, bidirectional).
    CHECK(coded[0].bytes[2] != 2);  // a temporal choice for the still scene (not intra)
    CHECK((coded[1].bytes[2] >= 1 && coded[1].bytes[2] <= 4));
    // The choice is the smaller of what each candidate codes.
    for (std::size_t g = 0; g < 2; ++g) {
      const GopFrames* one[] = {gops[g]};
      for (const auto* candidate : predictor->choices())
        CHECK(coded[g].bytes.size() <= encode_gops(*candidate, shape, one, settings)[0].bytes.size() * 102 / 100);
    }
    // --profile max: every GOP coded whole with each choice, the smallest kept, exactly.
    CodingSettings whole = settings;
    whole.whole_gop_trials = true;
    const auto best = encode_gops(*predictor, shape, gops, whole);
    for (std::size_t g = 0; g < 2; ++g) {
      const GopFrames* one[] = {gops[g]};
      std::size_t smallest = SIZE_MAX;
      for (const auto* candidate : predictor->choices())
        smallest = std::min(smallest, encode_gops(*candidate, shape, one, settings)[0].bytes.size());
      CHECK(best[g].bytes.size() == smallest);
      CHECK(best[g].bytes.size() <= coded[g].bytes.size());
      const std::span<const std::uint8_t> chunk[] = {best[g].bytes};
      const std::size_t count[] = {8};
      CHECK(decode_gops(*predictor, shape, chunk, count, whole)[0] == best[g].reconstruction);
    }
    const std::span<const std::uint8_t> chunks[] = {coded[0].bytes, coded[1].bytes};
    const std::size_t counts[] = {8, 8};
    const auto decoded = decode_gops(*predictor, shape, chunks, counts, settings);
    CHECK(decoded[0] == coded[0].reconstruction);
    CHECK(decoded[1] == coded[1].reconstruction);
    check_bound(bound, shape, still, decoded[0]);
    check_bound(bound, shape, jumping, decoded[1]);

    // A choice the predictor does not offer, or any choice under a predictor without choices, is refused.
    auto bad = coded[1].bytes;
    bad[2] = 5;
    const std::span<const std::uint8_t> bad_chunks[] = {bad};
    const std::size_t one_count[] = {8};
    CHECK_THROWS_AS(decode_gops(*predictor, shape, bad_chunks, one_count, settings), DataError);
    const auto intra = make_classical_predictor("intra");
    const std::span<const std::uint8_t> chosen_chunk[] = {coded[1].bytes};
    CHECK_THROWS_AS(decode_gops(*intra, shape, chosen_chunk, one_count, settings), DataError);
  }
}

TEST_CASE("auto's trial sees the whole GOP: cuts away from its start and middle", "[gop][auto]") {
  // Two still textures under fresh sensor noise, the GOP cutting between them six times, never in its
  // first three frames nor in the three from its middle on. There, bidirectional prediction
  // averages the noise of both sides and wins; over the GOP it loses: each cut costs it two badly
  // predicted frames (the anchor after the cut and the frame between), `previous` one. Trials on
  // whole frames at the start and the middle chose `bidirectional`; bands of rows through every
  // frame see the cuts.
  const FrameShape shape{64, 96, 1, 255};
  std::mt19937 rng(41);
  std::normal_distribution<double> noise(0, 0.8);
  std::uniform_int_distribution<int> texture(30, 220);  // far costlier to code than the noise
  std::vector<std::uint16_t> a(shape.size()), b(shape.size());
  for (auto& v : a) v = std::uint16_t(texture(rng));
  for (auto& v : b) v = std::uint16_t(texture(rng));
  GopFrames gop;
  bool on_b = false;
  for (std::size_t t = 0; t < 24; ++t) {
    if (t == 4 || t == 7 || t == 10 || t == 16 || t == 19 || t == 22) on_b = !on_b;
    auto f = on_b ? b : a;
    for (auto& v : f) v = std::uint16_t(std::clamp(double(v) + noise(rng), 0.0, 255.0));
    gop.emplace_back(f.begin(), f.end());
  }
  const auto predictor = make_classical_predictor("auto");
  {  // lossless (at abs 2 the noise quantizes away and every choice codes the same)
    const CodingSettings settings;
    const GopFrames* gops[] = {&gop};
    const auto coded = encode_gops(*predictor, shape, gops, settings);
    std::size_t smallest = SIZE_MAX;
    std::string sizes;
    for (const auto* candidate : predictor->choices()) {
      const std::size_t bytes = encode_gops(*candidate, shape, gops, settings)[0].bytes.size();
      sizes += candidate->identity().kind + " " + std::to_string(bytes) + " bytes; ";
      smallest = std::min(smallest, bytes);
    }
    INFO(sizes << "auto " << coded[0].bytes.size() << " bytes, choice " << int(coded[0].bytes[2]));
    CHECK(coded[0].bytes.size() <= smallest * 102 / 100);
    const std::span<const std::uint8_t> chunks[] = {coded[0].bytes};
    const std::size_t counts[] = {gop.size()};
    CHECK(decode_gops(*predictor, shape, chunks, counts, settings)[0] == coded[0].reconstruction);
  }
}

TEST_CASE("auto's trials reuse repeated work without changing a byte", "[gop][auto]") {
  // Moving scenes (the motion search runs), several GOPs in one batch, gray, colour and 16-bit:
  // every chunk is the same with the reuse of searches and trial chunks as without it.
  const auto predictor = make_classical_predictor("auto");
  for (const FrameShape shape : {FrameShape{64, 48, 1, 255}, FrameShape{48, 32, 3, 255}, FrameShape{40, 40, 1, 4095}}) {
    const auto a = moving_scene(shape, 12, 5), b = moving_scene(shape, 9, 6), c = moving_scene(shape, 4, 7);
    const GopFrames* gops[] = {&a, &b, &c};
    for (const auto quantizer : {QuantizerKind::Linear, QuantizerKind::Interval})
      for (const codecs::ErrorBound bound : {codecs::ErrorBound{}, codecs::ErrorBound{BoundMode::Abs, 2, 0},
                                             codecs::ErrorBound{BoundMode::PwRel, 0, 0.05}}) {
        INFO(codecs::describe(bound) << " quantizer " << int(quantizer) << " channels " << shape.channels << " max "
                                     << shape.max_value);
        CodingSettings reused;
        reused.bound = bound;
        reused.quantizer = quantizer;
        CodingSettings computed = reused;
        computed.reuse_trial_work = false;
        const auto x = encode_gops(*predictor, shape, gops, reused);
        const auto y = encode_gops(*predictor, shape, gops, computed);
        REQUIRE(x.size() == 3);
        for (std::size_t g = 0; g < 3; ++g) {
          CHECK(x[g].bytes == y[g].bytes);
          CHECK(x[g].reconstruction == y[g].reconstruction);
        }
      }
  }
}

TEST_CASE("bidirectional GOPs code frames out of order within the bound, and pay on a still noisy scene", "[gop][bidirectional]") {
  const auto bidirectional = make_classical_predictor("bidirectional");
  const auto previous = make_classical_predictor("previous");
  REQUIRE(bidirectional->bidirectional());
  // A still scene under fresh sensor noise each frame: interpolating both sides averages the noise.
  const FrameShape shape{64, 48, 1, 255};
  std::mt19937 rng(21);
  std::normal_distribution<double> noise(0, 3);
  std::vector<std::uint16_t> scene(shape.size());
  for (std::size_t i = 0; i < scene.size(); ++i) scene[i] = std::uint16_t(60 + (i % 64) + (i / 64) * 2);
  GopFrames still;
  for (int t = 0; t < 17; ++t) {
    auto f = scene;
    for (auto& v : f) v = std::uint16_t(std::clamp(double(v) + noise(rng), 0.0, 255.0));
    still.emplace_back(f.begin(), f.end());
  }
  CodingSettings abs2;
  abs2.bound = codecs::ErrorBound{BoundMode::Abs, 2, 0};
  // The frames' intra planes by the median, as the figures below were measured: the mean of four
  // (chunk version 17) takes this noise from both structures' intra planes, `previous`'s more.
  abs2.intra_mean = false;
  const GopFrames* gops[] = {&still};
  const auto two = encode_gops(*previous, shape, gops, abs2);  // with a second reference (t - 2)
  abs2.second_reference = false;
  const auto b = encode_gops(*bidirectional, shape, gops, abs2);
  const auto p = encode_gops(*previous, shape, gops, abs2);
  abs2.coded_motion = false;
  const auto b0 = encode_gops(*bidirectional, shape, gops, abs2);
  const auto p0 = encode_gops(*previous, shape, gops, abs2);
  INFO("bidirectional " << b[0].bytes.size() << " bytes, previous " << p[0].bytes.size() << " (with a second reference "
                         << two[0].bytes.size() << "); without motion " << b0[0].bytes.size() << " and " << p0[0].bytes.size());
  // Without coded motion, interpolation averages the noise of every other frame (the frames between
  // anchors; measured: 4% smaller); with it, the fractional vectors of `previous` and smoothed
  // forecasts (chunk version 12) smooth the noise too, and bi-prediction keeps a smaller lead
  // (10,692 against 10,832 bytes). `previous` with its second reference led before smoothed
  // forecasts; on this still scene they now take its averaging (10,836 bytes): the estimate's
  // choices may cost it a little, not more.
  CHECK(b0[0].bytes.size() * 100 < p0[0].bytes.size() * 97);
  CHECK(b[0].bytes.size() < p[0].bytes.size());
  CHECK(two[0].bytes.size() * 100 < p[0].bytes.size() * 101);

  // Every mode, both quantizers, colour and GOPs of uneven lengths round trip within the bound.
  const FrameShape colour{40, 24, 3, 1023};
  for (const std::size_t length : {1, 2, 3, 6, 9}) {
    const auto frames = moving_scene(colour, length, std::uint32_t(length));
    for (const codecs::ErrorBound bound : {codecs::ErrorBound{}, codecs::ErrorBound{BoundMode::Abs, 3, 0},
                                           codecs::ErrorBound{BoundMode::PwRel, 0, 0.05}}) {
      for (const QuantizerKind quantizer : {QuantizerKind::Linear, QuantizerKind::Interval}) {
        if (quantizer == QuantizerKind::Interval && bound.mode == BoundMode::Lossless) continue;
        INFO(length << " frames, " << codecs::describe(bound));
        CodingSettings settings;
        settings.bound = bound;
        settings.quantizer = quantizer;
        const auto decoded = round_trip(*bidirectional, colour, frames, settings);
        if (bound.mode == BoundMode::Lossless) CHECK(decoded == frames);
        check_bound(bound, colour, frames, decoded);
      }
    }
  }
}
