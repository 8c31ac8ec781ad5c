#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "codecs/entropy/rank_remap.hpp"  // SymbolBuffer
#include "codecs/simd.hpp"

namespace tezip::codecs {

// Rans: 2 interleaved states (1-D streams, and 2-D streams of archives before StripedRans);
// StripedRans: up to 32 stripes of rows, decoded 8 or 16 at a time by SIMD kernels; Lzma: the
// zstd path's bytes in raw LZMA2 (codecs/entropy/lzma_frame.hpp).
enum class EntropyCoderKind : std::uint8_t { Zstd = 1, Adaptive = 2, Rans = 3, StripedRans = 4, Lzma = 5 };

// The entropy coders, in the order `tezip info` lists them: with encode_symbols and decode_symbols
// below, the one place that knows which coders exist (a new coder is added here, in
// symbol_coder.cpp, and nowhere else).
std::span<const EntropyCoderKind> entropy_coders();
// "zstd", "rans", "rans-striped", "adaptive", "lzma"; "?" for a value no coder has.
const char* coder_name(EntropyCoderKind kind);
// Whether a byte read from a file names one of entropy_coders().
bool is_entropy_coder(std::uint8_t kind);

// zstd's level of the gate before the chosen level's pass (symbol_coder.cpp says why); auto's trial
// codes at it too (compressor/gop_codec.cpp).
inline constexpr int kZstdGateLevel = 6;

struct SymbolCoderOptions {
  int zstd_level = 3;          // 1..22
  // Where zstd at zstd_level wins (sparse and synthetic data: Moving MNIST, rendered depth), the
  // stream is compressed again at this level and the smaller kept; zstd decodes as fast whatever
  // the level, so only encoding pays. 0 (or a level not above zstd_level): no second try.
  int zstd_win_level = 0;
  // ... also where zstd came within this factor of the winner (1: only where it won). Level 19 was
  // 0.886 (castle) and 0.897 (Moving MNIST) of level 9's size where zstd won: 1.15 (the archive
  // settings' default).
  double zstd_win_margin = 1.0;
  bool allow_adaptive = true;  // try the adaptive context coder too and keep the smaller
  bool allow_rans = true;      // try the static context rANS coder too (decodes several times faster)
  bool allow_lzma = false;     // try LZMA2 too (smaller than zstd on sparse and repetitive data, slower to decode)
  // The rANS coders may take the symbols as their own ranks where the striped coder's estimate says
  // they cost less so than frequency ranks (rank_remap's `kept()`; docs/defaults.md).
  bool allow_kept_symbols = true;
  // Rows per segment for the striped rANS coder (a plane, so that a SymbolReader delivers plane by
  // plane); 0: the whole stream is one segment.
  std::size_t segment_rows = 0;
  // Segments come in cycles of this many (a frame's channel planes): the striped coder may give
  // each its own frequency tables.
  std::size_t segment_period = 1;
  // The estimated size of another chunk of the same frames (a sparse chunk), which a larger output
  // would lose to (SIZE_MAX: none), asked for only where zstd's passes are about to run: where
  // neither the rANS stream nor the probe's estimate of zstd at its strongest level is below it,
  // they are skipped. Empty: no rival.
  std::function<std::size_t()> rival_bytes{};
};

struct SymbolCoderStats {
  EntropyCoderKind chosen = EntropyCoderKind::Zstd;
  std::size_t zstd_bytes = 0;      // whole output size the zstd path gave (0 if not tried or given up)
  std::size_t adaptive_bytes = 0;  // whole output size the adaptive path gave (0 if not tried)
  std::size_t rans_bytes = 0;      // whole output size the rANS path gave (0 if not tried)
  std::size_t lzma_bytes = 0;      // whole output size the LZMA path gave (0 if not tried)
  std::size_t distinct_symbols = 0;
  bool symbols_kept = false;       // the rANS coders took the symbols as their own ranks (rank_remap's `kept()`)
  bool zstd_probed_only = false;   // zstd_bytes is the probe's: the chosen level could not have won
  bool zstd_given_up = false;      // zstd at the chosen level passed the rANS stream (times the margin) and was dropped
  bool zstd_gated = false;         // ... or, before it ran, the cheaper gate level did (zstd_given_up is set too)
  bool zstd_stronger_tried = false;  // zstd ran again at zstd_win_level (its prefix estimate came close enough)
  bool zstd_rivalled = false;  // zstd was not run: its estimate could not come below rival_bytes
  std::size_t column_parts = 1;  // the striped rANS stream's column parts, where it won (chunk version 19)
};

// Codes `symbols` laid out as rows of `row_width` (the context model uses the left and upper
// neighbours; row_width == 0 means a 1-D stream). Output is self-describing (coder kind, count, rank table).
std::vector<std::uint8_t> encode_symbols(std::span<const std::uint32_t> symbols, std::size_t row_width,
                                         const SymbolCoderOptions& options, SymbolCoderStats* stats = nullptr);
// The same, working in the symbols' buffer (a GOP's plane symbols are hundreds of MB). `side`:
// empty, or a side class per symbol for the striped rANS coder (codecs/entropy/striped_rans.hpp), which
// the reader must then be given too.
std::vector<std::uint8_t> encode_symbols(SymbolBuffer&& symbols, std::size_t row_width,
                                         const SymbolCoderOptions& options, SymbolCoderStats* stats = nullptr,
                                         std::span<const std::uint8_t> side = {});

// Decodes exactly `out.size()` symbols (the caller knows the count from its own header and passes the
// same row_width). Throws CodecError on any inconsistency: truncated, trailing garbage, bad table,
// count mismatch. Allocation is bounded by out.size() and the input size.
void decode_symbols(std::span<const std::uint8_t> bytes, std::size_t row_width, std::span<std::uint32_t> out);
// The same for streams of zigzagged signed values: `out` receives them already unzigzagged (the
// small rank table is mapped, not every symbol).
void decode_signed_symbols(std::span<const std::uint8_t> bytes, std::size_t row_width, std::span<std::int32_t> out);

// Reads a stream of zigzagged signed values, written by encode_symbols, piece by piece and in order:
// a striped rANS stream decodes segment by segment straight into the caller's buffer (a plane still
// in cache for what comes next), a zstd stream's bytes are parsed as they are read, the other
// coders decode all of it on construction. Throws CodecError like decode_signed_symbols; finish()
// checks that the stream was consumed exactly. `path`: the kernels' (simd_supported(path) must
// hold); the same values on every path.
class SignedSymbolReader {
 public:
  SignedSymbolReader(std::span<const std::uint8_t> bytes, std::size_t row_width, std::size_t count,
                     SimdPath path = simd_path());
  ~SignedSymbolReader();
  SignedSymbolReader(SignedSymbolReader&&) noexcept;
  SignedSymbolReader& operator=(SignedSymbolReader&&) noexcept;

  // The next out.size() values (for striped streams, whole segments or up to the end), with
  // their side classes where the encoder was given them (other coders ignore them).
  void read(std::span<std::int32_t> out, std::span<const std::uint8_t> side = {});
  // Whether read() needs the side classes (a striped rANS stream coded with them).
  bool wants_side() const;
  void finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace tezip::codecs
