// libFuzzer targets for everything that reads untrusted bytes. One source, built once per target
// with TEZIP_FUZZ_MODE set (see CMakeLists.txt):
//   archive  a whole archive file: ArchiveReader, then ArchiveDecoder::decode_chunk on every chunk
//   index    parse_index on the bytes of an index
//   symbols  codecs::decode_symbols: [u16 row width][u24 count] then the coded bytes
//   chunk    decode_gops on one chunk: [22-byte shape and settings header] then the chunk bytes.
//            read_chunk's checksum stops the archive target at the door; this one goes past it.
// Damaged input may throw tezip::DataError, tezip::InputError or codecs::CodecError; anything else
// (std::bad_alloc, std::out_of_range, a crash, a sanitizer report) is a bug.
//
// Built with TEZIP_FUZZ_SEEDS instead, the same file is `fuzz_seeds OUTDIR [ARCHIVE...]`: it compresses
// synthetic sequences in several modes (plus any archives given) and cuts the archives into seed
// inputs for each target (OUTDIR/archive, OUTDIR/index, OUTDIR/symbols, OUTDIR/chunk).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "codecs/codec_error.hpp"
#include "codecs/entropy/symbol_coder.hpp"
#include "format/archive.hpp"
#include "format/byte_io.hpp"
#include "compressor/chunk_group.hpp"
#include "compressor/decoder.hpp"
#include "format/errors.hpp"
#include "compressor/gop_codec.hpp"

#define TEZIP_MODE_ARCHIVE 1
#define TEZIP_MODE_INDEX 2
#define TEZIP_MODE_SYMBOLS 3
#define TEZIP_MODE_CHUNK 4

namespace {

using Bytes = std::vector<std::uint8_t>;

// Caps that keep one input's work small; they bound the harness, not the code under test.
constexpr std::size_t kMaxSymbols = std::size_t(1) << 20;
constexpr std::size_t kMaxChunkValues = std::size_t(1) << 18;
constexpr std::size_t kChunkHeader = 22;

std::uint32_t load_le(const std::uint8_t* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint32_t(p[i]) << (8 * i);
  return v;
}

// The chunk target's header: what the archive index would otherwise say about the chunk.
struct ChunkSetup {
  tezip::FrameShape shape;
  std::string predictor;
  tezip::CodingSettings settings;
  std::size_t frames = 0;
};

// Layout: width-1, height-1, flags (bit 0 colour, bit 1 16-bit, bits 2-3 predictor, bit 4 interval
// quantizer, bit 5 bidirectional instead), error mode, frames-1, reserved, f64 abs, f64 rel. False when the setup is one the
// index parser would refuse (or too large for a fuzz run).
bool parse_chunk_setup(const std::uint8_t* p, ChunkSetup& s) {
  s.shape.width = std::uint32_t(p[0]) + 1;
  s.shape.height = std::uint32_t(p[1]) + 1;
  s.shape.channels = (p[2] & 1) ? 3 : 1;
  s.shape.max_value = (p[2] & 2) ? 65535 : 255;
  static const char* const predictors[] = {"intra", "previous", "linear", "auto"};
  s.predictor = (p[2] & 32) ? "bidirectional" : predictors[(p[2] >> 2) & 3];
  s.settings.quantizer = (p[2] & 16) ? tezip::QuantizerKind::Interval : tezip::QuantizerKind::Linear;
  if (p[3] > std::uint8_t(tezip::codecs::BoundMode::PwRel)) return false;
  s.settings.bound.mode = tezip::codecs::BoundMode(p[3]);
  s.frames = std::size_t(p[4]) + 1;
  std::memcpy(&s.settings.bound.abs, p + 6, 8);
  std::memcpy(&s.settings.bound.rel, p + 14, 8);
  const auto& b = s.settings.bound;
  if (!std::isfinite(b.abs) || !std::isfinite(b.rel) || b.abs < 0 || b.rel < 0) return false;  // as read_settings
  return s.shape.size() * s.frames <= kMaxChunkValues;
}

void write_chunk_setup(const ChunkSetup& s, Bytes& out) {
  std::uint8_t flags = (s.shape.channels == 3 ? 1 : 0) | (s.shape.max_value > 255 ? 2 : 0) |
                       (s.settings.quantizer == tezip::QuantizerKind::Interval ? 16 : 0);
  if (s.predictor == "previous") flags |= 1 << 2;
  if (s.predictor == "linear") flags |= 2 << 2;
  if (s.predictor == "auto") flags |= 3 << 2;
  if (s.predictor == "bidirectional") flags |= 32;
  const std::uint8_t head[6] = {std::uint8_t(s.shape.width - 1), std::uint8_t(s.shape.height - 1), flags,
                                std::uint8_t(s.settings.bound.mode), std::uint8_t(s.frames - 1), 0};
  out.insert(out.end(), head, head + 6);
  const auto* abs = reinterpret_cast<const std::uint8_t*>(&s.settings.bound.abs);
  const auto* rel = reinterpret_cast<const std::uint8_t*>(&s.settings.bound.rel);
  out.insert(out.end(), abs, abs + 8);
  out.insert(out.end(), rel, rel + 8);
}

}  // namespace

#ifndef TEZIP_FUZZ_SEEDS

namespace {

#if TEZIP_FUZZ_MODE == TEZIP_MODE_ARCHIVE
// One memory file per process, rewritten for every input and opened by path like any archive.
const std::string& archive_path() {
  static const std::string path = [] {
    const int fd = ::memfd_create("tezip-fuzz", 0);
    if (fd < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    return "/proc/self/fd/" + std::to_string(fd);
  }();
  return path;
}

void run_archive(const std::uint8_t* data, std::size_t size) {
  const std::string& path = archive_path();
  const int fd = std::stoi(path.substr(path.rfind('/') + 1));
  if (::ftruncate(fd, 0) != 0 || (size > 0 && ::pwrite(fd, data, size, 0) != ssize_t(size))) std::abort();
  try {
    const tezip::ArchiveDecoder decoder(path);
    for (std::size_t i = 0; i < decoder.index().chunks.size(); ++i) {
      try {
        decoder.decode_chunk(i);
      } catch (const tezip::DataError&) {
      }
    }
  } catch (const tezip::DataError&) {
  } catch (const tezip::InputError&) {
  }
}
#endif

#if TEZIP_FUZZ_MODE == TEZIP_MODE_INDEX
void run_index(const std::uint8_t* data, std::size_t size) {
  try {
    const auto index = tezip::parse_index({data, size}, std::uint64_t(1) << 24, tezip::ArchiveLimits{});
    // What `tezip info` and the decoder compute from an accepted index must be safe too.
    (void)index.raw_bytes();
    (void)index.frame_count();
    for (std::size_t c = 0; c < index.chunks.size(); ++c) {
      const auto& chunk = index.chunks[c];
      if (index.chunk_of(chunk.sequence, chunk.first_frame) != c) std::abort();
    }
  } catch (const tezip::DataError&) {
  }
}
#endif

#if TEZIP_FUZZ_MODE == TEZIP_MODE_SYMBOLS
void run_symbols(const std::uint8_t* data, std::size_t size) {
  if (size < 5) return;
  const std::size_t row_width = load_le(data, 2);
  const std::size_t count = load_le(data + 2, 3);
  if (count > kMaxSymbols) return;
  std::vector<std::uint32_t> out(count);
  try {
    tezip::codecs::decode_symbols({data + 5, size - 5}, row_width, out);
  } catch (const tezip::codecs::CodecError&) {
  }
}
#endif

#if TEZIP_FUZZ_MODE == TEZIP_MODE_CHUNK
void run_chunk(const std::uint8_t* data, std::size_t size) {
  if (size < kChunkHeader) return;
  ChunkSetup s;
  if (!parse_chunk_setup(data, s)) return;
  const auto predictor = tezip::make_classical_predictor(s.predictor);
  const std::span<const std::uint8_t> chunks[] = {{data + kChunkHeader, size - kChunkHeader}};
  const std::size_t counts[] = {s.frames};
  try {
    const auto frames = tezip::decode_gops(*predictor, s.shape, chunks, counts, s.settings);
    if (frames.size() != 1 || frames[0].size() != s.frames) std::abort();
    for (const auto& f : frames[0]) {
      if (f.size() != s.shape.size()) std::abort();
      for (auto v : f)
        if (v > s.shape.max_value) std::abort();  // a decoded pixel out of range would be written out as garbage
    }
  } catch (const tezip::DataError&) {
  } catch (const tezip::codecs::CodecError&) {
  }
}
#endif

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
#if TEZIP_FUZZ_MODE == TEZIP_MODE_ARCHIVE
  run_archive(data, size);
#elif TEZIP_FUZZ_MODE == TEZIP_MODE_INDEX
  run_index(data, size);
#elif TEZIP_FUZZ_MODE == TEZIP_MODE_SYMBOLS
  run_symbols(data, size);
#elif TEZIP_FUZZ_MODE == TEZIP_MODE_CHUNK
  run_chunk(data, size);
#else
#error "define TEZIP_FUZZ_MODE"
#endif
  return 0;
}

#else  // TEZIP_FUZZ_SEEDS

#include "../support/synthetic.hpp"
#include "compressor/encoder.hpp"

namespace {

int seed_number = 0;

void write_seed(const std::filesystem::path& dir, const Bytes& bytes) {
  std::filesystem::create_directories(dir);
  std::ofstream out(dir / ("seed-" + std::to_string(seed_number++)), std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

void symbols_seed(const std::filesystem::path& dir, std::size_t row_width, std::size_t count,
                  std::span<const std::uint8_t> blob) {
  if (count > kMaxSymbols || row_width > 0xffff) return;
  Bytes seed = {std::uint8_t(row_width), std::uint8_t(row_width >> 8), std::uint8_t(count), std::uint8_t(count >> 8),
                std::uint8_t(count >> 16)};
  seed.insert(seed.end(), blob.begin(), blob.end());
  write_seed(dir, seed);
}

// Splits a chunk the way decode_gops reads it, to give each coded stream to the symbols target.
void cut_streams(const std::filesystem::path& dir, const tezip::FrameShape& shape, std::span<const std::uint8_t> chunk) {
  tezip::ByteReader in(chunk, "chunk");
  const std::uint8_t version = in.u8();
  // A pixel chunk (one zstd frame of pixels), a group's chunk or a member's: no symbol streams.
  if (version == 0x80 || version == tezip::kGroupChunk || version == tezip::kGroupMemberChunk) return;
  in.u8();
  if (version >= 4) in.u8();  // the predictor choice
  const std::size_t count = in.varint();
  const std::size_t plane = std::size_t(shape.width) * shape.height;
  std::size_t symbols = 0, runs = 0;
  for (std::size_t t = 0; t < count; ++t) {
    if (shape.channels > 1 && version >= 6) in.u8();  // the frame's channel plan
    for (std::size_t c = 0; c < shape.channels; ++c) {
      in.varint();
      in.u8();
      const std::size_t r = in.varint();
      runs += r;
      symbols += r == 0 ? plane : 0;
    }
  }
  symbols_seed(dir, shape.width, symbols, in.blob());
  symbols_seed(dir, 0, runs, in.blob());
  symbols_seed(dir, 0, runs, in.blob());
  const std::size_t literals = in.varint();
  symbols_seed(dir, 0, literals, in.blob());
  in.blob();  // block maps (their count needs the plane modes)
  if (version >= 4) {
    const std::size_t motion = in.varint();
    symbols_seed(dir, 0, motion, in.blob());
  }
}

void cut_archive(const std::filesystem::path& out, const std::filesystem::path& archive) {
  std::ifstream in(archive, std::ios::binary);
  const Bytes file((std::istreambuf_iterator<char>(in)), {});
  write_seed(out / "archive", file);
  const tezip::ArchiveReader reader(archive);
  const auto& index = reader.index();
  std::uint64_t index_offset;
  std::memcpy(&index_offset, file.data() + file.size() - 32, 8);
  write_seed(out / "index", Bytes(file.begin() + std::ptrdiff_t(index_offset), file.end() - 32));
  for (std::size_t c = 0; c < index.chunks.size(); ++c) {
    const auto& chunk = index.chunks[c];
    const auto& g = index.sequences[chunk.sequence].geometry;
    const auto bytes = reader.read_chunk(c);
    ChunkSetup s;
    s.shape = tezip::shape_of(g);
    s.predictor = index.settings.predictor.kind;
    s.settings = index.settings.coding;
    s.frames = chunk.frame_count;
    cut_streams(out / "symbols", s.shape, bytes);
    if (g.width > 256 || g.height > 256 || s.frames > 256 || s.shape.size() * s.frames > kMaxChunkValues) continue;
    Bytes seed;
    write_chunk_setup(s, seed);
    seed.insert(seed.end(), bytes.begin(), bytes.end());
    write_seed(out / "chunk", seed);
  }
}

// A chunk target seed of `frames` coded with `previous` under `settings` (default: losslessly),
// where its chunk's first byte is `kind` (a chunk mode or version the scene was made for: the
// encoder's measured choice may refuse it).
bool write_chunk_seed(const std::filesystem::path& out, const tezip::FrameShape& shape, const tezip::GopFrames& frames,
                      std::uint8_t kind, const tezip::CodingSettings& settings = {}) {
  ChunkSetup s;
  s.shape = shape;
  s.settings = settings;
  s.predictor = "previous";
  s.frames = frames.size();
  const auto predictor = tezip::make_classical_predictor(s.predictor);
  const tezip::GopFrames* gops[] = {&frames};
  const auto encoded = tezip::encode_gops(*predictor, shape, gops, s.settings);
  if (encoded[0].bytes.empty() || encoded[0].bytes[0] != kind) return false;
  Bytes seed;
  write_chunk_setup(s, seed);
  seed.insert(seed.end(), encoded[0].bytes.begin(), encoded[0].bytes.end());
  write_seed(out / "chunk", seed);
  return true;
}

// Four frames of `shape` (gray): a soft ramp under fresh noise each frame (a generator seeded by
// `state`), each value times num / den.
tezip::GopFrames noisy_ramp(const tezip::FrameShape& shape, std::uint32_t state, std::uint32_t num = 1, std::uint32_t den = 1) {
  tezip::GopFrames frames;
  for (std::uint32_t t = 0; t < 4; ++t) {
    tezip::Pixels f(shape.size());
    for (std::size_t i = 0; i < f.size(); ++i) {
      state = state * 1103515245u + 12345u;
      f[i] = std::uint16_t((100 + (i % shape.width) / 2 + (state >> 16) % 13) * num / den);
    }
    frames.push_back(std::move(f));
  }
  return frames;
}

// Small synthetic archives covering every mode, quantizer, predictor, coder and pixel type.
void make_archives(const std::filesystem::path& work, const std::filesystem::path& out) {
  using tezip::codecs::BoundMode;
  struct Case {
    int channels, bits;
    BoundMode mode;
    double abs, rel;
    tezip::QuantizerKind quantizer;
    const char* predictor;
    bool adaptive, dynamic;
    bool clean = false;  // noise-free frames: some GOPs become pixel chunks
  };
  const auto linear = tezip::QuantizerKind::Linear, interval = tezip::QuantizerKind::Interval;
  const Case cases[] = {
      {1, 8, BoundMode::Lossless, 0, 0, linear, "previous", true, false},
      {3, 8, BoundMode::Lossless, 0, 0, linear, "linear", false, false},
      {1, 16, BoundMode::Lossless, 0, 0, linear, "intra", true, false},
      {3, 8, BoundMode::Abs, 2.5, 0, linear, "previous", true, false},
      {1, 16, BoundMode::Abs, 100, 0, interval, "linear", true, false},
      {1, 8, BoundMode::Rel, 0, 0.01, interval, "previous", true, true},
      {3, 16, BoundMode::AbsRel, 50, 0.001, linear, "previous", true, false},
      {1, 8, BoundMode::PwRel, 0, 0.05, linear, "previous", true, false},
      {3, 16, BoundMode::PwRel, 0, 0.01, interval, "linear", false, false},
      {1, 8, BoundMode::Lossless, 0, 0, linear, "auto", false, false},
      {3, 8, BoundMode::Abs, 2, 0, linear, "auto", false, false},
      {1, 8, BoundMode::Lossless, 0, 0, linear, "bidirectional", false, false},
      {3, 16, BoundMode::Abs, 3, 0, interval, "bidirectional", false, false},
      {1, 8, BoundMode::Abs, 1, 0, linear, "bidirectional", false, false},
      {1, 8, BoundMode::Lossless, 0, 0, linear, "auto", false, false, true},
      {3, 16, BoundMode::Abs, 2, 0, linear, "previous", false, false, true},
      {1, 8, BoundMode::PwRel, 0, 0.05, linear, "previous", false, false, true},
  };
  int n = 0;
  for (const auto& c : cases) {
    const auto data = work / ("data-" + std::to_string(n));
    tezip::test::SyntheticSpec spec;
    spec.width = 16 + 3 * n, spec.height = 12 + n, spec.frames = 5, spec.channels = c.channels, spec.bits = c.bits;
    spec.seed = unsigned(n), spec.noise = c.clean ? 0 : 1.5;
    tezip::test::write_synthetic_sequence(data / "a", spec);
    spec.frames = 2, spec.seed += 100;
    tezip::test::write_synthetic_sequence(data / "b", spec);
    tezip::CompressOptions options;
    options.coding.bound.mode = c.mode;
    options.coding.bound.abs = c.abs;
    options.coding.bound.rel = c.rel;
    options.coding.quantizer = c.quantizer;
    options.coding.adaptive_coder = c.adaptive;
    options.predictor = c.predictor;
    options.gop.size = 3;
    if (c.dynamic) options.gop.kind = tezip::GopKind::Dynamic, options.gop.mse_threshold = 30;
    options.threads = 1;
    options.overwrite = true;
    const auto archive = work / ("seed-" + std::to_string(n++) + ".tzp");
    tezip::compress(data, archive, options);
    cut_archive(out, archive);
  }
  // Groups of short sequences (archive version 6): six sequences of two clean frames, the same
  // scene each, which LZMA finds again from one to the next.
  {
    const auto data = work / ("data-" + std::to_string(n));
    tezip::test::SyntheticSpec spec;
    spec.width = 24, spec.height = 16, spec.frames = 2, spec.channels = 1, spec.bits = 8, spec.seed = 5, spec.noise = 0;
    for (int k = 0; k < 6; ++k) tezip::test::write_synthetic_sequence(data / ("s" + std::to_string(k)), spec);
    tezip::CompressOptions options;
    options.threads = 1;
    options.overwrite = true;
    const auto archive = work / ("seed-" + std::to_string(n++) + ".tzp");
    tezip::compress(data, archive, options);
    cut_archive(out, archive);
  }
  // Planes tall enough for the striped coder's 16 and 32 lanes: column halves of 16 stripes (an
  // even width), 32 stripes of rows (an odd one), so that the symbols target mutates those layouts.
  for (const auto& [width, height] : {std::pair{40u, 100u}, std::pair{33u, 200u}}) {
    const auto data = work / ("data-" + std::to_string(n));
    tezip::test::SyntheticSpec spec;
    spec.width = width, spec.height = height, spec.frames = 3, spec.channels = 1, spec.bits = 8;
    spec.seed = unsigned(n), spec.noise = 1.5;
    tezip::test::write_synthetic_sequence(data / "a", spec);
    tezip::CompressOptions options;
    options.predictor = "previous";
    options.threads = 1;
    options.overwrite = true;
    const auto archive = work / ("seed-" + std::to_string(n++) + ".tzp");
    tezip::compress(data, archive, options);
    cut_archive(out, archive);
  }
  // Sparse chunks: frames of exact zeros around a noisy tilted patch (a depth map in miniature),
  // 8 and 16 bits, gray and colour, coded losslessly, kept where they became sparse chunks.
  for (const auto& shape : {tezip::FrameShape{40, 30, 1, 65535}, tezip::FrameShape{32, 24, 3, 255}}) {
    tezip::GopFrames frames;
    std::uint32_t state = 1;
    for (std::uint32_t t = 0; t < 4; ++t) {
      tezip::Pixels f(shape.size(), 0);
      for (std::uint32_t c = 0; c < shape.channels; ++c)
        for (std::uint32_t y = 6; y < 18; ++y)
          for (std::uint32_t x = 5 + t; x < 20 + t; ++x) {
            state = state * 1103515245u + 12345u;
            f[(std::size_t(c) * shape.height + y) * shape.width + x] =
                std::uint16_t(shape.max_value / 3 + (c + 1) * x + 2 * y + (state >> 16) % 3);
          }
      frames.push_back(std::move(f));
    }
    write_chunk_seed(out, shape, frames, 0x81);
  }
  // A colour-transformed chunk (0x82): decoded colour video in miniature, a drifting texture as
  // luma and smooth chroma, turned into B, G, R as a decoder does, coded losslessly.
  {
    const tezip::FrameShape shape{48, 32, 3, 255};
    const std::size_t plane = std::size_t(shape.width) * shape.height;
    tezip::GopFrames frames;
    std::uint32_t state = 7;
    std::vector<int> texture(std::size_t(shape.width + 8) * shape.height);
    for (auto& v : texture) state = state * 1103515245u + 12345u, v = 60 + int((state >> 16) % 120);
    for (std::uint32_t t = 0; t < 6; ++t) {
      tezip::Pixels f(shape.size());
      for (std::uint32_t y = 0; y < shape.height; ++y)
        for (std::uint32_t x = 0; x < shape.width; ++x) {
          const int luma = texture[std::size_t(y) * (shape.width + 8) + x + t], u = int(x / 4) - 6, v = int(y / 4) - 4;
          const std::size_t i = std::size_t(y) * shape.width + x;
          f[i] = std::uint16_t(std::clamp(luma + 2 * u, 0, 255));
          f[plane + i] = std::uint16_t(std::clamp(luma - u / 2 - v, 0, 255));
          f[2 * plane + i] = std::uint16_t(std::clamp(luma + 3 * v / 2, 0, 255));
        }
      frames.push_back(std::move(f));
    }
    if (!write_chunk_seed(out, shape, frames, 0x82))
      std::fprintf(stderr, "fuzz_seeds: the colour scene did not take the colour transform; no such seed\n");
  }
  // More references (chunk version 16): a still texture under fresh noise each frame at abs 2, whose
  // frames average four references.
  {
    const tezip::FrameShape shape{48, 32, 1, 255};
    tezip::GopFrames frames;
    std::uint32_t state = 11;
    std::vector<int> texture(shape.size());
    for (auto& v : texture) state = state * 1103515245u + 12345u, v = 60 + int((state >> 16) % 120);
    for (std::uint32_t t = 0; t < 8; ++t) {
      tezip::Pixels f(shape.size());
      for (std::size_t i = 0; i < f.size(); ++i) {
        state = state * 1103515245u + 12345u;
        f[i] = std::uint16_t(texture[i] + int((state >> 16) % 7) - 3);
      }
      frames.push_back(std::move(f));
    }
    tezip::CodingSettings abs2;
    abs2.bound = tezip::codecs::ErrorBound{tezip::codecs::BoundMode::Abs, 2, 0};
    abs2.intra_mean = false;  // version 16 itself (its key frame may take the mean of four: 17)
    if (!write_chunk_seed(out, shape, frames, 16, abs2))
      std::fprintf(stderr, "fuzz_seeds: the still scene took no more references; no such seed\n");
  }
  // Intra planes forecast by the mean of four (chunk version 17): a soft ramp under fresh noise each
  // frame, losslessly and at abs 2.
  {
    const tezip::FrameShape shape{48, 32, 1, 255};
    const tezip::GopFrames frames = noisy_ramp(shape, 29);
    tezip::CodingSettings abs2;
    abs2.bound = tezip::codecs::ErrorBound{tezip::codecs::BoundMode::Abs, 2, 0};
    if (!write_chunk_seed(out, shape, frames, 17) || !write_chunk_seed(out, shape, frames, 17, abs2))
      std::fprintf(stderr, "fuzz_seeds: the noisy ramp took no intra plane by the mean of four; no such seed\n");
  }
  // Level maps (chunk version 18): the noisy ramp after a gain of 9 / 8, every ninth level unused,
  // losslessly, its key frame and forecast frames.
  {
    const tezip::FrameShape shape{48, 32, 1, 255};
    const tezip::GopFrames frames = noisy_ramp(shape, 37, 9, 8);
    if (!write_chunk_seed(out, shape, frames, 18))
      std::fprintf(stderr, "fuzz_seeds: the gained ramp took no level map; no such seed\n");
  }
  // Column parts whose cuts see their neighbours (chunk version 19): a ramp 256 wide and too short
  // for 8 stripes of rows, under noise of 3 levels and of 25 in bands of 32 columns (which the
  // striped coder's contexts see), so one stripe in sixteenths.
  {
    const tezip::FrameShape shape{256, 48, 1, 255};
    tezip::GopFrames frames;
    std::uint32_t state = 41;
    for (std::uint32_t t = 0; t < 4; ++t) {
      tezip::Pixels f(shape.size());
      for (std::size_t i = 0; i < f.size(); ++i) {
        state = state * 1103515245u + 12345u;
        const std::size_t x = i % shape.width;
        f[i] = std::uint16_t(100 + x / 2 + (state >> 16) % (x / 32 % 2 ? 25 : 3));
      }
      frames.push_back(std::move(f));
    }
    if (!write_chunk_seed(out, shape, frames, 19))
      std::fprintf(stderr, "fuzz_seeds: the banded ramp took no column parts; no such seed\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fuzz_seeds OUTDIR [ARCHIVE...]\n");
    return 1;
  }
  const std::filesystem::path out = argv[1];
  try {
    const auto work = out / "work";
    std::filesystem::create_directories(work);
    make_archives(work, out);
    for (int a = 2; a < argc; ++a) cut_archive(out, argv[a]);
    std::filesystem::remove_all(work);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_seeds: %s\n", e.what());
    return 1;
  }
  std::printf("%d seeds in %s\n", seed_number, out.c_str());
  return 0;
}

#endif
