#include "codecs/entropy/symbol_coder.hpp"

#include <zstd.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#pragma GCC diagnostic push  // GCC bug 105593, as in striped_rans.cpp
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include "codecs/codec_error.hpp"
#include "codecs/transform/plane_transform.hpp"  // zigzag
#include "codecs/entropy/rank_map_avx2.hpp"
#include "codecs/entropy/lzma_frame.hpp"
#include "codecs/entropy/zstd_frame.hpp"
#include "codecs/entropy/range_coder.hpp"
#include "codecs/entropy/rans_coder.hpp"
#include "codecs/entropy/rank_remap.hpp"
#include "codecs/entropy/striped_rans.hpp"

// Layout: 1 byte coder kind, varint symbol count, rank table, payload to the end.
// A chunk with fewer than two distinct symbols has an empty payload: the table says it all.

namespace tezip::codecs {
namespace {

// Ranks below this take one byte in the zstd payload; larger ones an escape byte and a varint.
constexpr std::uint32_t kEscape = 255;

// The zstd probe (docs/performance.md, "The encoder"): level 1 costs about a ninth of level 9,
// and over every plane stream of the datasets and the sample (lossless, abs 2, pwrel 0.05) level
// 9 was never below 0.78 times level 1; 0.75 leaves a margin. Measured again on 2026-12-02 with
// coded motion and channel deltas (docs/performance.md, "The zstd trial"): 0.70 on vtest's
// lossless 3-frame trial windows, where level 1 was 1.09-1.17x the rANS stream, so the probe did
// not skip them; no stream that the probe skipped would have won at level 9.
constexpr int kProbeLevel = 1;

constexpr double kLevelGain = 0.75;
// Before the pass at the chosen level (9) that decides whether zstd is in play, one at this level
// with the same limit: zstd's level 6 (lazy, searchLog 3) codes within 1.005-1.048x of level 9's
// size on every stream measured (zstd -b on GOP and trial streams dumped from mire2, castle and
// vtest: camera, depth maps, video; docs/performance.md) at 1.5-1.8x its speed, so where level 6
// passes the limit, level 9 would have come within 5% of it, never below the rANS stream; where it
// stays within, level 9 runs as before. (The archives of every dataset and sample, lossless to
// pwrel 0.05, were byte for byte the same with the gate.) Camera residuals, where rANS wins by
// 15-20%, stop paying level 9 (a third of mire2's encoding). Only where the probe lost to the rANS
// stream (camera, video): where it won (sparse frames, depth maps), zstd is in play and the gate
// would be one pass more. The gate's level-6 size is itself estimated (zstd_estimate) where the
// stream is long enough: the probe's size times level 6 over level 1 on an eighth of the stream,
// which costs a fifth of the gate's pass over most of the stream (2026-12-03: every archive of the
// 12 inputs of docs/performance.md byte for byte the same; lossless video 1.09-1.13x faster to
// encode, `compress -T 1` user time). kZstdGateLevel (symbol_coder.hpp).
constexpr int kGateLevel = kZstdGateLevel;
// LZMA codes the zstd path's bytes; it is tried only where zstd's output times this is below the
// best so far. On the castle depth residuals LZMA (preset 9e) was 0.76 of zstd level 9; 0.6 leaves a
// margin, and spares the streams where the context coders win by far (camera video).
constexpr double kLzmaGain = 0.6;

std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// The byte stream the zstd payload packs: ranks below kEscape as one byte, others escaped.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
// Ranks [0, n) narrowed to bytes while none reaches the escape: whole blocks of 64 with no branch
// per rank (loops the compiler vectorizes: 4% of encoding colour vtest with --profile fast went
// to the rank-by-rank loop), up to the first block that holds an escape. Returns where it stopped.
std::size_t narrow_below_escape(const std::uint32_t* ranks, std::size_t n, std::uint8_t* out) {
  constexpr std::size_t kBlock = 64;
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    std::uint32_t m = 0;
    for (std::size_t k = 0; k < kBlock; ++k) m = std::max(m, ranks[i + k]);
    if (m >= kEscape) break;
    for (std::size_t k = 0; k < kBlock; ++k) out[i + k] = static_cast<std::uint8_t>(ranks[i + k]);
  }
  for (; i < n && ranks[i] < kEscape; ++i) out[i] = static_cast<std::uint8_t>(ranks[i]);
  return i;
}

using ZstdInput = std::vector<std::uint8_t, BufferAllocator<std::uint8_t>>;

// The zstd and LZMA coders' bytes of the ranks, or with `rank_of` (kept symbols) of
// rank_of[symbol] for each symbol.
ZstdInput zstd_input(std::span<const std::uint32_t> ranks, std::span<const std::uint32_t> rank_of = {}) {
  // One byte a rank (most streams have no escape), from the first escape on each escape's varint
  // too, into a buffer of the size counted first: growing it had copied a GOP's bytes again
  // (lossless camera streams have a few escapes), and zeroing it had touched them once more.
  const auto rank = [&](std::size_t i) { return rank_of.empty() ? ranks[i] : rank_of[ranks[i]]; };
  ZstdInput bytes;
  std::size_t i = 0;
  if (rank_of.empty()) {
    bytes.resize(ranks.size());
    i = narrow_below_escape(ranks.data(), ranks.size(), bytes.data());
    if (i == ranks.size()) return bytes;
  }
  std::size_t size = i;
  for (std::size_t j = i; j < ranks.size(); ++j) size += rank(j) < kEscape ? 1 : 1 + varint_size(rank(j) - kEscape);
  bytes.resize(size);
  std::uint8_t* out = bytes.data() + i;
  for (; i < ranks.size(); ++i) {
    const std::uint32_t r = rank(i);
    if (r < kEscape) {
      *out++ = static_cast<std::uint8_t>(r);
    } else {
      *out++ = static_cast<std::uint8_t>(kEscape);
      out = write_varint(r - kEscape, out);
    }
  }
  return bytes;
}

// The symbols of a zstd or LZMA payload's bytes: each rank (a byte, or an escape and a varint)
// through `table`.
void parse_rank_bytes(std::span<const std::uint8_t> view, std::span<const std::uint32_t> table, std::span<std::uint32_t> out,
                      const std::string& what) {
  const std::uint32_t* t = table.data();
  if (table.size() <= kEscape && view.size() == out.size()) {
    // No rank needs an escape: a byte per symbol. One pass finds the largest, one maps them
    // (Moving MNIST: a third of decoding went to the general loop).
    std::uint8_t largest = 0;
    for (const std::uint8_t b : view) largest = std::max(largest, b);
    if (largest >= table.size()) throw CodecError(what + ": rank outside the table");
    for (std::size_t i = 0; i < view.size(); ++i) out[i] = t[view[i]];
    return;
  }
  std::size_t pos = 0;
  for (std::uint32_t& r : out) {
    if (pos >= view.size()) throw CodecError(what + ": too few symbols");
    const std::uint8_t b = view[pos++];
    std::uint64_t rank = b;
    if (b == kEscape) rank = kEscape + read_varint(view, pos);
    if (rank >= table.size()) throw CodecError(what + ": rank outside the table");
    r = t[rank];
  }
  if (pos != view.size()) throw CodecError(what + ": trailing bytes");
}

// The largest size a valid payload's bytes can have; nothing in a frame is trusted beyond it.
std::uint64_t max_rank_bytes(std::uint64_t alphabet_size, std::size_t count) {
  const std::uint64_t max_rank = alphabet_size - 1;
  return (max_rank < kEscape ? 1 : 1 + varint_size(max_rank - kEscape)) * count;
}

void decode_zstd(std::span<const std::uint8_t> payload, std::span<const std::uint32_t> table, std::span<std::uint32_t> out) {
  const PooledBytes bytes =
      decompress_zstd_frame(payload, out.size(), max_rank_bytes(table.size(), out.size()), "zstd payload");
  parse_rank_bytes(bytes, table, out, "zstd payload");
}

void decode_lzma(std::span<const std::uint8_t> payload, std::span<const std::uint32_t> table, std::span<std::uint32_t> out) {
  const PooledBytes bytes =
      decompress_lzma_frame(payload, out.size(), max_rank_bytes(table.size(), out.size()), "lzma payload");
  parse_rank_bytes(bytes, table, out, "lzma payload");
}

struct CoderEntry {
  EntropyCoderKind kind;
  const char* name;
};
constexpr CoderEntry kCoders[] = {
    {EntropyCoderKind::Zstd, "zstd"},
    {EntropyCoderKind::Rans, "rans"},
    {EntropyCoderKind::StripedRans, "rans-striped"},
    {EntropyCoderKind::Adaptive, "adaptive"},
    {EntropyCoderKind::Lzma, "lzma"},
};
constexpr std::array<EntropyCoderKind, std::size(kCoders)> kCoderKinds = [] {
  std::array<EntropyCoderKind, std::size(kCoders)> kinds{};
  for (std::size_t i = 0; i < kinds.size(); ++i) kinds[i] = kCoders[i].kind;
  return kinds;
}();

}  // namespace

std::span<const EntropyCoderKind> entropy_coders() { return kCoderKinds; }

const char* coder_name(EntropyCoderKind kind) {
  for (const auto& c : kCoders)
    if (c.kind == kind) return c.name;
  return "?";
}

bool is_entropy_coder(std::uint8_t kind) {
  for (const auto& c : kCoders)
    if (static_cast<std::uint8_t>(c.kind) == kind) return true;
  return false;
}

std::vector<std::uint8_t> encode_symbols(std::span<const std::uint32_t> symbols, std::size_t row_width,
                                         const SymbolCoderOptions& options, SymbolCoderStats* stats) {
  return encode_symbols(SymbolBuffer(symbols.begin(), symbols.end()), row_width, options, stats);
}

std::vector<std::uint8_t> encode_symbols(SymbolBuffer&& symbol_buffer, std::size_t row_width,
                                         const SymbolCoderOptions& options, SymbolCoderStats* stats,
                                         std::span<const std::uint8_t> side) {
  if (options.zstd_level < 1 || options.zstd_level > ZSTD_maxCLevel()) {
    throw std::invalid_argument("encode_symbols: zstd level out of range");
  }
  const std::size_t count = symbol_buffer.size();
  const bool rows = row_width > 0 && count % row_width == 0;
  // The striped coder's symbols in their own order where its estimate says they cost less so
  // (docs/defaults.md, "Symbols as their own ranks"): residuals zigzagged, whose order is their
  // magnitude's and whose parity is their sign, give its contexts and left classes what frequency
  // ranks only approximate. zstd and LZMA are given the frequency ranks whatever this says.
  const KeepSymbols keep = [&](std::span<const std::uint32_t> symbols, std::span<const std::uint32_t> symbol_to_rank) {
    const auto alphabet = static_cast<std::uint32_t>(symbol_to_rank.size());  // the largest symbol + 1
    const auto bits = [&](std::span<const std::uint32_t> rank_of) {
      return estimate_striped_bits(symbols, row_width, alphabet, rank_of, options.segment_rows, options.segment_period);
    };
    return options.allow_rans && options.allow_kept_symbols && rows && bits({}) < bits(symbol_to_rank);
  };
  const RankRemap remap = rank_remap(std::move(symbol_buffer), keep);
  std::vector<std::uint8_t> header;  // for zstd and LZMA (and every coder where the symbols were not kept)
  header.push_back(static_cast<std::uint8_t>(EntropyCoderKind::Zstd));
  append_varint(count, header);
  append_rank_table(remap.rank_to_symbol, header);
  // The rANS coders' alphabet and header: with kept symbols, a table of every value up to the
  // largest, in order (the decoder computes that map: StripedRansDecoder).
  std::size_t alphabet = remap.rank_to_symbol.size();
  std::vector<std::uint8_t> kept_header;
  if (remap.kept()) {
    alphabet = remap.symbol_to_rank.size();
    std::vector<std::uint32_t> identity(alphabet);
    std::iota(identity.begin(), identity.end(), 0u);
    kept_header.assign(header.begin(), header.begin() + 1);
    append_varint(count, kept_header);
    append_rank_table(identity, kept_header);
  }
  const std::vector<std::uint8_t>& rans_header = remap.kept() ? kept_header : header;

  SymbolCoderStats local;
  local.distinct_symbols = remap.rank_to_symbol.size();
  local.symbols_kept = remap.kept();
  std::vector<std::uint8_t> out;
  if (remap.rank_to_symbol.size() < 2) {
    out = std::move(header);
  } else {
    std::vector<std::uint8_t> rans_payload;
    if (options.allow_rans) {
      // Rows go to the striped coder, which SIMD kernels decode; 1-D streams to the 2-lane one.
      rans_payload = rows ? encode_striped_rans(remap.ranks, row_width, options.segment_rows, alphabet,
                                                StripedContext::measured, options.segment_period, true, simd_path(), side)
                          : encode_rans(remap.ranks, row_width, alphabet);
      local.rans_bytes = rans_header.size() + rans_payload.size();
    }
    // zstd at the chosen level costs most of encoding. A pass at kProbeLevel first: when even
    // kLevelGain times it is larger than the rANS stream, the chosen level cannot win either. The
    // probe and the gate look back as far as the chosen level does (a cup trial window whose second
    // frame repeats the first, 900 KB back: level 1 1.45x the rANS stream in its own window, 0.84x
    // in level 9's; level 9 0.78x, level 19 0.66x).
    const ZstdInput zstd_bytes = zstd_input(remap.ranks, remap.kept() ? std::span<const std::uint32_t>(remap.symbol_to_rank)
                                                                     : std::span<const std::uint32_t>());
    std::vector<std::uint8_t> zstd_payload;
    bool probe_lost = false;  // the probe is larger than the rANS stream
    std::size_t probe_size = 0;
    if (options.allow_rans && options.zstd_level > kProbeLevel) {
      std::vector<std::uint8_t> probe = compress_zstd_frame(zstd_bytes, kProbeLevel, options.zstd_level);
      probe_lost = probe.size() > rans_payload.size();
      probe_size = probe.size();
      if (double(probe.size()) * kLevelGain > double(rans_payload.size())) {
        zstd_payload = std::move(probe);
        local.zstd_probed_only = true;
      }
    }
    // Where another chunk of the frames is estimated smaller than the rANS stream (rival_bytes), zstd
    // decides whether this chunk can win at all: the probe's size scaled to zstd's strongest level by
    // an eighth of the stream (zstd_estimate). Not below the rival: the rANS stream stands for this
    // chunk, which loses anyway, and zstd's passes (levels 9 and 19: 40% of encoding castle's
    // depth maps, whose sparse chunks won every GOP) are spared.
    const auto rivalled = [&] {
      if (!options.rival_bytes || probe_size == 0 || options.allow_lzma) return false;
      const std::size_t rival = options.rival_bytes();
      if (rival == SIZE_MAX || rans_header.size() + rans_payload.size() < rival) return false;
      const int strongest = std::max(options.zstd_level, std::min(options.zstd_win_level, ZSTD_maxCLevel()));
      const std::size_t estimate = zstd_estimate(zstd_bytes, kProbeLevel, probe_size, strongest);
      local.zstd_rivalled = estimate != SIZE_MAX && header.size() + estimate >= rival;
      local.zstd_given_up = local.zstd_rivalled;
      return local.zstd_rivalled;
    };
    // Where only zstd and rANS compete, zstd at the chosen level matters only if it comes within
    // zstd_win_margin of the rANS stream: it is given up as soon as its output passes that (on
    // camera video, where rANS wins, a part of the stream is never compressed).
    const bool bounded = options.allow_rans && !options.allow_adaptive && !options.allow_lzma;
    if (zstd_payload.empty() && bounded) {
      const auto limit = std::size_t(double(rans_payload.size()) * std::max(1.0, options.zstd_win_margin));
      const auto gate = [&] {
        const std::size_t estimate = zstd_estimate(zstd_bytes, kProbeLevel, probe_size, kGateLevel);
        if (estimate != SIZE_MAX) return estimate;
        return options.zstd_level == kGateLevel ? 0 : zstd_size_within(zstd_bytes, kGateLevel, limit, options.zstd_level);
      };
      // At the gate's own level too (auto's trial codes at it), an estimate past the limit spares
      // the pass over most of the stream; without an estimate that pass is itself the gate.
      if (probe_lost && options.zstd_level >= kGateLevel && gate() > limit) {
        local.zstd_given_up = true;
        local.zstd_gated = true;
      } else if (!rivalled()) {
        if (auto frame = compress_zstd_frame_within(zstd_bytes, options.zstd_level, limit))
          zstd_payload = std::move(*frame);
        else
          local.zstd_given_up = true;
      }
    } else if (zstd_payload.empty() && !rivalled()) {
      zstd_payload = compress_zstd_frame(zstd_bytes, options.zstd_level);
    }
    local.zstd_bytes = local.zstd_given_up ? 0 : header.size() + zstd_payload.size();
    // Candidates in order of decoding speed; a later one must be strictly smaller to win.
    std::vector<std::uint8_t>* payload = &zstd_payload;
    if (local.zstd_given_up) {
      payload = &rans_payload;
      local.chosen = rows ? EntropyCoderKind::StripedRans : EntropyCoderKind::Rans;
    }
    auto consider = [&](std::vector<std::uint8_t>& candidate, EntropyCoderKind kind) {
      if (candidate.size() < payload->size()) {
        payload = &candidate;
        local.chosen = kind;
      }
    };
    if (options.allow_rans) consider(rans_payload, rows ? EntropyCoderKind::StripedRans : EntropyCoderKind::Rans);
    std::vector<std::uint8_t> adaptive_payload;
    if (options.allow_adaptive) {
      adaptive_payload = encode_adaptive(remap.ranks, row_width, alphabet);
      local.adaptive_bytes = rans_header.size() + adaptive_payload.size();
      consider(adaptive_payload, EntropyCoderKind::Adaptive);
    }
    std::vector<std::uint8_t> lzma_payload;
    if (options.allow_lzma && double(zstd_payload.size()) * kLzmaGain < double(payload->size())) {
      lzma_payload = compress_lzma_frame(zstd_bytes);
      local.lzma_bytes = header.size() + lzma_payload.size();
      consider(lzma_payload, EntropyCoderKind::Lzma);
    }
    // zstd at the stronger level, where it won, or came within zstd_win_margin of the winner and a
    // prefix says the stronger level may win (zstd_may_reach: level 19 costs 18x level 9, and on
    // mire2's intra residuals, 9 within the margin, it was tried on every GOP and never won). (A
    // margin of 1.15 made mire2 and vtest take 4 times as long to encode while the rANS coder had
    // six neighbours; with eight and left classes level 9 seldom comes that close there, and the
    // encoding time did not move: docs/defaults.md, "Left classes".)
    const int stronger_level = std::min(options.zstd_win_level, ZSTD_maxCLevel());
    if (!local.zstd_probed_only && !local.zstd_given_up && options.zstd_win_level > options.zstd_level &&
        (payload == &zstd_payload ||
         (double(zstd_payload.size()) < options.zstd_win_margin * double(payload->size()) &&
          codecs::zstd_may_reach(zstd_bytes, options.zstd_level, zstd_payload.size(), stronger_level, payload->size())))) {
      local.zstd_stronger_tried = true;
      std::vector<std::uint8_t> stronger = compress_zstd_frame(zstd_bytes, stronger_level);
      local.zstd_bytes = header.size() + std::min(zstd_payload.size(), stronger.size());
      if (payload == &zstd_payload) {
        if (stronger.size() < zstd_payload.size()) zstd_payload = std::move(stronger);
      } else if (stronger.size() < payload->size()) {
        zstd_payload = std::move(stronger);
        payload = &zstd_payload;
        local.chosen = EntropyCoderKind::Zstd;
      }
    }
    // The ranks' table of the winner: the rANS coders' (kept symbols: in order), else by frequency.
    const bool ranked = payload == &zstd_payload || payload == &lzma_payload;
    out = ranked || !remap.kept() ? std::move(header) : std::move(kept_header);
    out[0] = static_cast<std::uint8_t>(local.chosen);
    out.insert(out.end(), payload->begin(), payload->end());
    if (local.chosen == EntropyCoderKind::StripedRans) local.column_parts = striped_rans_column_parts(rans_payload, alphabet);
  }
  if (stats != nullptr) *stats = local;
  return out;
}

namespace {

// Decodes into `out`, mapping ranks through the table after `map` has been applied to its entries.
template <class Map>
void decode_mapped(std::span<const std::uint8_t> bytes, std::size_t row_width, std::span<std::uint32_t> out, Map map) {
  if (bytes.empty()) throw CodecError("symbol stream: empty");
  const std::uint8_t kind = bytes[0];
  if (!is_entropy_coder(kind)) {
    throw CodecError("symbol stream: unknown coder kind");
  }
  std::size_t pos = 1;
  const std::uint64_t count = read_varint(bytes, pos);
  if (count != out.size()) throw CodecError("symbol stream: symbol count differs from the expected count");
  std::vector<std::uint32_t> table = read_rank_table(bytes, pos, out.size());
  for (auto& v : table) v = map(v);
  if (table.empty() != out.empty()) throw CodecError("symbol stream: rank table does not match the count");
  const auto payload = bytes.subspan(pos);
  if (table.size() < 2) {
    if (!payload.empty()) throw CodecError("symbol stream: trailing bytes");
    if (!table.empty()) std::fill(out.begin(), out.end(), table[0]);
    return;
  }
  if (kind == static_cast<std::uint8_t>(EntropyCoderKind::Zstd)) {
    decode_zstd(payload, table, out);  // maps ranks to symbols itself
    return;
  } else if (kind == static_cast<std::uint8_t>(EntropyCoderKind::Rans)) {
    decode_rans(payload, row_width, table.size(), out, table);  // maps ranks to symbols itself
    return;
  } else if (kind == static_cast<std::uint8_t>(EntropyCoderKind::StripedRans)) {
    decode_striped_rans(payload, row_width, table.size(), out, table);
    return;
  } else if (kind == static_cast<std::uint8_t>(EntropyCoderKind::Lzma)) {
    decode_lzma(payload, table, out);
    return;
  } else {
    decode_adaptive(payload, row_width, table.size(), out);
  }
  // All decoders have checked every rank against the table size.
  const std::uint32_t* t = table.data();
  for (std::uint32_t& v : out) v = t[v];
}

}  // namespace

void decode_symbols(std::span<const std::uint8_t> bytes, std::size_t row_width, std::span<std::uint32_t> out) {
  decode_mapped(bytes, row_width, out, [](std::uint32_t v) { return v; });
}

// Maps b[0..n) through `table` into `out` up to the first byte at or above `limit` (an escape, or a
// rank outside the table); returns how many it mapped. All paths give the same values.
using MapPlainFn = std::size_t(const std::uint8_t* b, std::size_t n, const std::uint32_t* table, std::uint32_t limit,
                               std::int32_t* out);

std::size_t map_plain_portable(const std::uint8_t* b, std::size_t n, const std::uint32_t* table, std::uint32_t limit,
                               std::int32_t* out) {
  std::size_t i = 0;
  while (i < n && b[i] < limit) {
    out[i] = static_cast<std::int32_t>(table[b[i]]);
    ++i;
  }
  return i;
}

#if defined(__x86_64__) || defined(__i386__)
// Sixteen bytes a step where none is at or above the limit: ranks below 64 (most of them: ranks
// are numbered by frequency) from the table's first 64 entries held in four registers, the rest by
// a gather of those lanes only.
[[gnu::target("avx2,avx512f,avx512vl,avx512bw,avx512dq")]] std::size_t map_plain_avx512(
    const std::uint8_t* b, std::size_t n, const std::uint32_t* table, std::uint32_t limit, std::int32_t* out) {
  const std::uint32_t size = limit;  // every mapped rank is below it, so the table has that many
  __m512i t[4];
  for (std::uint32_t k = 0; k < 4; ++k) {
    const std::uint32_t from = 16 * k, valid = size > from ? std::min<std::uint32_t>(size - from, 16) : 0;
    t[k] = _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << valid) - 1), table + from);
  }
  const __m512i lim = _mm512_set1_epi32(static_cast<int>(limit)), bit5 = _mm512_set1_epi32(32);
  const __m512i far = _mm512_set1_epi32(63);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i r = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    if (_mm512_cmpge_epu32_mask(r, lim) != 0) break;
    const __m512i low = _mm512_permutex2var_epi32(t[0], r, t[1]), high = _mm512_permutex2var_epi32(t[2], r, t[3]);
    __m512i v = _mm512_mask_blend_epi32(_mm512_test_epi32_mask(r, bit5), low, high);
    const __mmask16 beyond = _mm512_cmpgt_epu32_mask(r, far);
    if (beyond != 0) v = _mm512_mask_i32gather_epi32(v, beyond, r, table, 4);
    _mm512_storeu_si512(out + i, v);
  }
  return i + map_plain_portable(b + i, n - i, table, limit, out + i);
}

// Eight bytes a step, ranks below 16 from two registers (rank_map_avx2.hpp), the rest gathered.
[[gnu::target("avx2")]] std::size_t map_plain_avx2(const std::uint8_t* b, std::size_t n, const std::uint32_t* table,
                                                   std::uint32_t limit, std::int32_t* out) {
  const int* t = reinterpret_cast<const int*>(table);
  const RankMap16 map16 = load_rank_map16(t, limit);  // every mapped rank is below limit
  const __m256i lim = _mm256_set1_epi32(static_cast<int>(limit)), far = _mm256_set1_epi32(15);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i r = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + i)));
    if (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(lim, r))) != 0xFF) break;
    __m256i v = look_up16(map16, r);
    const __m256i beyond = _mm256_cmpgt_epi32(r, far);
    if (!_mm256_testz_si256(beyond, beyond)) v = _mm256_mask_i32gather_epi32(v, t, r, beyond, 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), v);
  }
  return i + map_plain_portable(b + i, n - i, table, limit, out + i);
}
#endif

MapPlainFn* map_plain_kernel(SimdPath path) {
#if defined(__x86_64__) || defined(__i386__)
  if (path >= SimdPath::avx512) return map_plain_avx512;
  if (path >= SimdPath::avx2) return map_plain_avx2;
#else
  (void)path;
#endif
  return map_plain_portable;
}

// A zstd payload's ranks, parsed as its bytes stream in: a GOP's plane symbols decode plane by
// plane without the whole byte stream (a byte per pixel) in memory, unless zstd would hold it
// all anyway (then it is decoded whole: ZstdFrameReader).
class ZstdRankStream {
 public:
  ZstdRankStream(std::span<const std::uint8_t> payload, std::uint64_t alphabet_size, std::size_t count, SimdPath path)
      : alphabet_(alphabet_size),
        frame_(payload, count, max_bytes_per_rank(alphabet_size) * count, "zstd payload"),
        map_plain_(map_plain_kernel(path)) {
    if (frame_.decoded_whole()) {  // all of it in view: no refills
      const std::span<const std::uint8_t> whole = frame_.take_whole();
      data_ = whole.data();
      end_ = whole.size();
    } else {
      buf_.resize(kBuffer);
      data_ = buf_.data();
    }
  }

  void read(std::span<std::int32_t> out, const std::vector<std::uint32_t>& table) {
    const std::uint32_t* t = table.data();
    // With more than kEscape ranks every byte below the escape is one; else bytes are checked.
    const std::uint32_t byte_limit = alphabet_ > kEscape ? kEscape : std::uint32_t(alphabet_);
    std::size_t i = 0;
    while (i < out.size()) {
      if (end_ - pos_ < kMaxVarint + 1) refill();
      if (pos_ >= end_) throw CodecError("zstd payload: too few symbols");
      // Plain bytes up to a margin that holds an escape's varint, in a local loop without the
      // refill test (castle's 16-bit depth maps: a fifth of decoding was the general loop).
      const std::uint8_t* b = data_;
      const std::size_t start = pos_, stop = end_ - pos_ > kMaxVarint + 1 ? end_ - (kMaxVarint + 1) : pos_;
      const std::size_t plain = map_plain_(b + start, std::min(stop - std::min(stop, start), out.size() - i), t,
                                           byte_limit, out.data() + i);
      i += plain;
      pos_ = start + plain;
      if (i == out.size()) break;
      if (pos_ == stop && stop > start) continue;  // at the margin: refill first
      // One symbol the general way: an escape, a byte outside the table, or the stream's last bytes.
      const std::uint8_t c = data_[pos_++];
      std::uint64_t rank = c;
      if (c == kEscape) rank = kEscape + read_varint(std::span<const std::uint8_t>(data_, end_), pos_);
      if (rank >= alphabet_) throw CodecError("zstd payload: rank outside the table");
      out[i++] = static_cast<std::int32_t>(t[rank]);
    }
  }

  void finish() {
    refill();
    if (pos_ != end_) throw CodecError("zstd payload: trailing bytes");
    frame_.finish();
  }

 private:
  static constexpr std::size_t kBuffer = std::size_t{1} << 17, kMaxVarint = 10;

  static std::size_t max_bytes_per_rank(std::uint64_t alphabet_size) {
    const std::uint64_t max_rank = alphabet_size - 1;
    return max_rank < kEscape ? 1 : 1 + varint_size(max_rank - kEscape);
  }
  void refill() {
    if (buf_.empty()) return;  // the whole frame is in view
    std::copy(buf_.begin() + static_cast<std::ptrdiff_t>(pos_), buf_.begin() + static_cast<std::ptrdiff_t>(end_), buf_.begin());
    end_ -= pos_;
    pos_ = 0;
    end_ += frame_.read(std::span(buf_).subspan(end_));
  }

  std::uint64_t alphabet_;
  ZstdFrameReader frame_;
  MapPlainFn* map_plain_;
  std::vector<std::uint8_t> buf_;   // streamed frames: the bytes read and not yet parsed
  const std::uint8_t* data_ = nullptr;  // buf_ or the frame decoded whole
  std::size_t pos_ = 0, end_ = 0;
};

struct SignedSymbolReader::State {
  std::unique_ptr<StripedRansDecoder> striped;  // or:
  std::unique_ptr<ZstdRankStream> zstd;         // with `table`, or:
  std::vector<std::uint32_t> table;
  std::vector<std::int32_t> all;
  std::size_t count = 0, done = 0;
};

SignedSymbolReader::SignedSymbolReader(std::span<const std::uint8_t> bytes, std::size_t row_width, std::size_t count,
                                       SimdPath path)
    : s_(std::make_unique<State>()) {
  s_->count = count;
  const auto unzig = [](std::uint32_t v) { return static_cast<std::uint32_t>(unzigzag(v)); };
  const bool striped = !bytes.empty() && bytes[0] == static_cast<std::uint8_t>(EntropyCoderKind::StripedRans);
  const bool zstd = !bytes.empty() && bytes[0] == static_cast<std::uint8_t>(EntropyCoderKind::Zstd);
  if (striped || zstd) {
    std::size_t pos = 1;
    if (read_varint(bytes, pos) != count) throw CodecError("symbol stream: symbol count differs from the expected count");
    std::vector<std::uint32_t> table = read_rank_table(bytes, pos, count);
    for (auto& v : table) v = unzig(v);
    if (table.size() >= 2 && striped) {
      s_->striped = std::make_unique<StripedRansDecoder>(bytes.subspan(pos), row_width, count, table.size(), table, path);
      return;
    }
    if (table.size() >= 2) {
      s_->zstd = std::make_unique<ZstdRankStream>(bytes.subspan(pos), table.size(), count, path);
      s_->table = std::move(table);
      return;
    }
  }
  s_->all.resize(count);
  const std::span<std::uint32_t> raw(reinterpret_cast<std::uint32_t*>(s_->all.data()), count);
  decode_mapped(bytes, row_width, raw, unzig);
}

SignedSymbolReader::~SignedSymbolReader() = default;
SignedSymbolReader::SignedSymbolReader(SignedSymbolReader&&) noexcept = default;
SignedSymbolReader& SignedSymbolReader::operator=(SignedSymbolReader&&) noexcept = default;

void SignedSymbolReader::read(std::span<std::int32_t> out, std::span<const std::uint8_t> side) {
  State& s = *s_;
  if (out.size() > s.count - s.done) throw std::invalid_argument("SignedSymbolReader: read past the end");
  if (s.striped) {
    s.striped->decode(std::span(reinterpret_cast<std::uint32_t*>(out.data()), out.size()), side);
  } else if (s.zstd) {
    s.zstd->read(out, s.table);
  } else {
    std::copy_n(s.all.begin() + static_cast<std::ptrdiff_t>(s.done), out.size(), out.begin());
  }
  s.done += out.size();
}

bool SignedSymbolReader::wants_side() const { return s_->striped && s_->striped->uses_side(); }

void SignedSymbolReader::finish() {
  if (s_->done != s_->count) throw std::logic_error("SignedSymbolReader: finished before the last symbol");
  if (s_->striped) s_->striped->finish();
  if (s_->zstd) s_->zstd->finish();
}

void decode_signed_symbols(std::span<const std::uint8_t> bytes, std::size_t row_width, std::span<std::int32_t> out) {
  SignedSymbolReader reader(bytes, row_width, out.size());
  reader.read(out);
  reader.finish();
}

}  // namespace tezip::codecs
