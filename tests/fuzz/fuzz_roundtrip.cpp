// libFuzzer round trip: the input chooses a small sequence (or two), every setting the encoder has
// (error mode and bound, classical predictor including motion, quantizer, static or dynamic GOP,
// coder, zstd level) and the pixels; the target compresses it with 1 and with 3 threads, requires
// the two archives to be byte-identical, decodes every chunk and requires every pixel to be exact
// (lossless) or within the bound. Any failure traps, so libFuzzer keeps the input.
//
// Layout: [w][h][frames][flags][mode][abs][rel][gop][coder][seed] then pixel bytes (cycled, and
// shifted per frame so that predictors have motion to find). flags: bit 0 colour, bit 1 16-bit,
// bits 2-3 predictor, bit 4 interval quantizer, bit 5 dynamic GOP, bit 6 a second sequence, bit 7
// the predictors auto and bidirectional instead (by bits 2-3); coder byte bit 7: coded motion off.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec_error.hpp"
#include "format/archive.hpp"
#include "compressor/decoder.hpp"
#include "compressor/encoder.hpp"
#include "format/errors.hpp"
#include "io/source.hpp"
#include "../support/memory_source.hpp"

namespace {

namespace fs = std::filesystem;
using namespace tezip;

constexpr std::size_t kHeader = 10;

using test::MemorySource;

struct Case {
  Geometry geometry;
  std::vector<std::vector<std::vector<std::uint16_t>>> sequences;  // [sequence][frame][pixel]
  CompressOptions options;
};

[[noreturn]] void bug(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_roundtrip: %s %s\n", what, detail.c_str());
  __builtin_trap();
}

Case make_case(const std::uint8_t* data, std::size_t size) {
  Case c;
  auto& g = c.geometry;
  g.width = 1 + data[0] % 24;
  g.height = 1 + data[1] % 16;
  const std::size_t frames = 1 + data[2] % 12;
  const std::uint8_t flags = data[3];
  g.channels = (flags & 1) ? 3 : 1;
  g.type = (flags & 2) ? PixelType::U16 : PixelType::U8;
  static const char* const predictors[] = {"intra", "previous", "linear", "motion"};
  static const char* const others[] = {"auto", "bidirectional", "auto", "bidirectional"};
  auto& o = c.options;
  o.predictor = (flags & 128) ? others[(flags >> 2) & 3] : predictors[(flags >> 2) & 3];
  o.coding.quantizer = (flags & 16) ? QuantizerKind::Interval : QuantizerKind::Linear;
  auto& b = o.coding.bound;
  b.mode = codecs::BoundMode(data[4] % 5);
  const double scale = g.type == PixelType::U16 ? 257 : 1;
  switch (b.mode) {
    case codecs::BoundMode::Lossless: break;
    case codecs::BoundMode::Abs: b.abs = data[5] / 4.0 * scale; break;
    case codecs::BoundMode::Rel:
    case codecs::BoundMode::PwRel: b.rel = data[6] / 512.0; break;
    case codecs::BoundMode::AbsRel: b.abs = data[5] / 4.0 * scale, b.rel = data[6] / 512.0; break;
  }
  o.gop.size = 1 + data[7] % 8;
  if (flags & 32) {
    o.gop.kind = GopKind::Dynamic;
    o.gop.mse_threshold = (data[7] >> 3) / 4096.0;
  }
  const std::uint8_t coder = data[8];
  o.coding.rans_coder = (coder & 3) != 2;  // fast, best or zstd alone
  o.coding.adaptive_coder = (coder & 3) == 1;
  o.coding.zstd_level = 1 + (coder >> 2) % 6;
  o.coding.coded_motion = !(coder & 128);
  const std::uint8_t seed = data[9];

  const std::uint8_t* pixels = data + kHeader;
  const std::size_t available = size - kHeader;
  const std::size_t sequences = (flags & 64) ? 2 : 1;
  const std::uint32_t max = g.max_value();
  std::size_t k = 0;
  c.sequences.resize(sequences);
  for (auto& sequence : c.sequences)
    for (std::size_t t = 0; t < frames; ++t) {
      std::vector<std::uint16_t> frame(g.pixel_count());
      for (std::size_t i = 0; i < frame.size(); ++i) {
        // Cycled input bytes, shifted by one pixel per frame: content that moves.
        const std::size_t at = available ? (i + t + k * 7) % available : 0;
        std::uint32_t v = available ? pixels[at] : std::uint32_t((i * 13 + t * 5 + seed) & 0xff);
        if (g.type == PixelType::U16) v = (v << 8) | (available ? pixels[(at + 1) % available] : seed);
        // Extremes matter (clamping at 0 and max): the seed pushes some pixels there.
        if ((i + seed) % 17 == 0) v = (seed & 1) ? max : 0;
        frame[i] = std::uint16_t(std::min(v, max));
      }
      sequence.push_back(std::move(frame));
      ++k;
    }
  return c;
}

std::vector<std::unique_ptr<SequenceSource>> sources_of(const Case& c) {
  std::vector<std::unique_ptr<SequenceSource>> out;
  for (std::size_t s = 0; s < c.sequences.size(); ++s)
    out.push_back(std::make_unique<MemorySource>(c.sequences.size() == 1 ? "" : "seq" + std::to_string(s), c.geometry, c.sequences[s]));
  return out;
}

std::vector<std::uint8_t> read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

const fs::path& work_dir() {
  static const fs::path dir = [] {
    const fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path d = base / ("tezip-fuzz-roundtrip-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < kHeader) return 0;
  Case c = make_case(data, size);
  const fs::path one = work_dir() / "t1.tzp", three = work_dir() / "t3.tzp";
  c.options.overwrite = true;
  c.options.threads = 1;
  try {
    compress_sources(sources_of(c), one, c.options);
    c.options.threads = 3;
    compress_sources(sources_of(c), three, c.options);
  } catch (const std::exception& e) {
    bug("compress failed:", e.what());  // every input here is a valid sequence
  }
  if (read_all(one) != read_all(three)) bug("archives differ between 1 and 3 threads");

  try {
    const ArchiveDecoder decoder(one);
    const auto& index = decoder.index();
    const auto& bound = index.settings.coding.bound;
    const std::size_t plane = c.geometry.plane_size();
    std::size_t frames_seen = 0;
    for (std::size_t i = 0; i < index.chunks.size(); ++i) {
      const auto& chunk = index.chunks[i];
      const GopFrames decoded = decoder.decode_chunk(i);
      if (decoded.size() != chunk.frame_count) bug("wrong frame count in a chunk");
      for (std::size_t f = 0; f < decoded.size(); ++f) {
        const auto& x = c.sequences[chunk.sequence][chunk.first_frame + f];
        const auto& y = decoded[f];
        if (y.size() != x.size()) bug("wrong frame size");
        for (std::uint32_t ch = 0; ch < c.geometry.channels; ++ch) {
          const auto* xs = x.data() + ch * plane;
          const auto [lo, hi] = std::minmax_element(xs, xs + plane);
          for (std::size_t p = 0; p < plane; ++p) {
            const std::size_t at = ch * plane + p;
            if (bound.mode == codecs::BoundMode::Lossless ? x[at] != y[at] : !bound.allows(x[at], y[at], *lo, *hi))
              bug("pixel out of bound:", std::to_string(x[at]) + " -> " + std::to_string(y[at]) + " (" + codecs::describe(bound) + ")");
          }
        }
        ++frames_seen;
      }
    }
    if (frames_seen != c.sequences.size() * c.sequences[0].size()) bug("frames missing after decoding");
  } catch (const std::exception& e) {
    bug("decode failed:", e.what());
  }
  return 0;
}
