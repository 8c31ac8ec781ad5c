#include "codecs/entropy/rank_remap.hpp"

#include <zstd.h>

#include <algorithm>
#include <numeric>

#include "codecs/codec_error.hpp"
#include "codecs/entropy/histogram.hpp"
#include "codecs/entropy/zstd_frame.hpp"

namespace tezip::codecs {
namespace {

// Dense counting is used while the histogram stays small next to the input (or small outright);
// beyond that a sort keeps memory proportional to the input rather than to the largest value.
constexpr std::uint64_t kDenseLimit = std::uint64_t{1} << 20;

// The largest symbol a kept stream may hold (its table then lists every value up to it, and a
// decoder takes no more entries than symbols).
constexpr std::uint32_t kKeepLimit = std::uint32_t{1} << 20;

// Alphabets up to this size are counted in four histograms at once (rank_remap).
constexpr std::size_t kSplitHistogramLimit = std::size_t{1} << 16;

// Tables shorter than this are never worth a zstd frame (its header alone is ~10 bytes).
constexpr std::size_t kMinTableForZstd = 48;
constexpr int kTableZstdLevel = 9;

enum class TableMode : std::uint8_t { Raw = 0, Zstd = 1 };

std::uint64_t zigzag(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
std::int64_t unzigzag(std::uint64_t v) {
  return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}

// The largest value, and each value replaced by table[value]: whole-stream passes that the
// compiler vectorizes with AVX2 (vpmaxud; the lookup as vpgatherdd), compiled for it and for the
// baseline, the CPU picking at load time. The same values either way.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TEZIP_REMAP_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TEZIP_REMAP_CLONES
#endif
TEZIP_REMAP_CLONES std::uint32_t largest(const std::uint32_t* v, std::size_t n) {
  std::uint32_t m = 0;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, v[i]);
  return m;
}
TEZIP_REMAP_CLONES void look_up(std::uint32_t* v, std::size_t n, const std::uint32_t* table) {
  for (std::size_t i = 0; i < n; ++i) v[i] = table[v[i]];
}

struct SymbolCount {
  std::uint32_t symbol;
  std::uint64_t count;
};

std::vector<std::uint32_t> order_by_frequency(std::vector<SymbolCount>& counts) {
  std::sort(counts.begin(), counts.end(), [](const SymbolCount& a, const SymbolCount& b) {
    return a.count != b.count ? a.count > b.count : a.symbol < b.symbol;
  });
  std::vector<std::uint32_t> table(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) table[i] = counts[i].symbol;
  return table;
}

// In rank order, ties are sorted by symbol, so the long tail of rare symbols is ascending and its
// deltas are small positive numbers; the head of residual data is near 0, 1, 2, ... as well.
std::vector<std::uint8_t> raw_table_bytes(std::span<const std::uint32_t> table) {
  std::vector<std::uint8_t> out;
  out.reserve(table.size() * 2);
  std::int64_t prev = 0;
  for (std::uint32_t s : table) {
    append_varint(zigzag(static_cast<std::int64_t>(s) - prev), out);
    prev = s;
  }
  return out;
}

std::vector<std::uint32_t> parse_raw_table(std::span<const std::uint8_t> bytes, std::size_t n) {
  std::vector<std::uint32_t> table(n);
  std::size_t pos = 0;
  std::int64_t prev = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t z = read_varint(bytes, pos);
    const std::int64_t delta = unzigzag(z);
    // Deltas of 32-bit values fit in 33 bits; anything larger could overflow the sum below.
    if (delta > (std::int64_t{1} << 32) || delta < -(std::int64_t{1} << 32)) {
      throw CodecError("rank table: delta out of range");
    }
    const std::int64_t s = prev + delta;
    if (s < 0 || s > std::int64_t{UINT32_MAX}) throw CodecError("rank table: symbol out of range");
    table[i] = static_cast<std::uint32_t>(s);
    prev = s;
  }
  if (pos != bytes.size()) throw CodecError("rank table: trailing bytes");
  return table;
}

void check_distinct(std::span<const std::uint32_t> table) {
  std::vector<std::uint32_t> sorted(table.begin(), table.end());
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw CodecError("rank table: symbol listed twice");
  }
}

}  // namespace

RankRemap rank_remap(SymbolBuffer symbols, const KeepSymbols& keep) {
  RankRemap result;
  if (symbols.empty()) return result;
  const std::uint32_t max_symbol = largest(symbols.data(), symbols.size());
  // The ranks replace the symbols in their own buffer.
  result.ranks = std::move(symbols);
  SymbolBuffer& values = result.ranks;

  if (max_symbol < std::max<std::uint64_t>(kDenseLimit, 2 * std::uint64_t{values.size()})) {
    std::vector<std::uint32_t> histogram(std::size_t{max_symbol} + 1, 0);
    if (histogram.size() <= kSplitHistogramLimit) {
      SplitHistogram<std::uint32_t> split(histogram.size());
      split.add(std::span<const std::uint32_t>(values));
      histogram = split.counts();
    } else {
      for (std::uint32_t s : values) ++histogram[s];
    }
    std::vector<SymbolCount> counts;
    for (std::size_t s = 0; s < histogram.size(); ++s) {
      if (histogram[s] != 0) counts.push_back({static_cast<std::uint32_t>(s), histogram[s]});
    }
    result.rank_to_symbol = order_by_frequency(counts);
    // Reuse the histogram as the symbol -> rank lookup.
    for (std::uint32_t r = 0; r < result.rank_to_symbol.size(); ++r) histogram[result.rank_to_symbol[r]] = r;
    if (keep && result.rank_to_symbol.size() >= 2 && max_symbol < kKeepLimit &&
        max_symbol < values.size() && keep(values, histogram)) {
      result.symbol_to_rank = std::move(histogram);
      return result;
    }
    look_up(values.data(), values.size(), histogram.data());
    return result;
  }

  std::vector<std::uint32_t> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<SymbolCount> counts;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    counts.push_back({sorted[i], j - i});
    i = j;
  }
  // counts is in symbol order here: keep that order as the lookup keys before sorting by frequency.
  std::vector<std::uint32_t> keys(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) keys[i] = counts[i].symbol;
  result.rank_to_symbol = order_by_frequency(counts);
  std::vector<std::uint32_t> key_rank(keys.size());
  for (std::uint32_t r = 0; r < result.rank_to_symbol.size(); ++r) {
    const auto it = std::lower_bound(keys.begin(), keys.end(), result.rank_to_symbol[r]);
    key_rank[static_cast<std::size_t>(it - keys.begin())] = r;
  }
  for (auto& v : values) v = key_rank[static_cast<std::size_t>(std::lower_bound(keys.begin(), keys.end(), v) - keys.begin())];
  return result;
}

RankRemap rank_remap(std::span<const std::uint32_t> symbols) {
  return rank_remap(SymbolBuffer(symbols.begin(), symbols.end()));
}

// Layout: varint n; if n > 0: one mode byte, then either the raw deltas, or varint length + a zstd
// frame of them (used only when smaller).
void append_rank_table(std::span<const std::uint32_t> rank_to_symbol, std::vector<std::uint8_t>& out) {
  append_varint(rank_to_symbol.size(), out);
  if (rank_to_symbol.empty()) return;
  const std::vector<std::uint8_t> raw = raw_table_bytes(rank_to_symbol);
  if (rank_to_symbol.size() >= kMinTableForZstd) {
    const std::vector<std::uint8_t> packed = compress_zstd_frame(raw, kTableZstdLevel);
    const std::size_t n = packed.size();
    if (n + 5 < raw.size()) {
      out.push_back(static_cast<std::uint8_t>(TableMode::Zstd));
      append_varint(n, out);
      out.insert(out.end(), packed.begin(), packed.begin() + static_cast<std::ptrdiff_t>(n));
      return;
    }
  }
  out.push_back(static_cast<std::uint8_t>(TableMode::Raw));
  out.insert(out.end(), raw.begin(), raw.end());
}

std::vector<std::uint32_t> read_rank_table(std::span<const std::uint8_t> bytes, std::size_t& pos,
                                           std::size_t max_entries) {
  const std::uint64_t n = read_varint(bytes, pos);
  if (n > max_entries) throw CodecError("rank table: more entries than symbols");
  if (n == 0) return {};
  if (pos >= bytes.size()) throw CodecError("rank table: truncated");
  const std::uint8_t mode = bytes[pos++];
  std::vector<std::uint32_t> table;
  if (mode == static_cast<std::uint8_t>(TableMode::Raw)) {
    // Each entry takes at least one byte, which bounds n by the input before anything is allocated.
    if (n > bytes.size() - pos) throw CodecError("rank table: truncated");
    // The raw form has no length, so find its end by scanning n varints.
    std::size_t end = pos;
    for (std::uint64_t i = 0; i < n; ++i) {
      while (end < bytes.size() && (bytes[end] & 0x80) != 0) ++end;
      if (end >= bytes.size()) throw CodecError("rank table: truncated");
      ++end;
    }
    table = parse_raw_table(bytes.subspan(pos, end - pos), n);
    pos = end;
  } else if (mode == static_cast<std::uint8_t>(TableMode::Zstd)) {
    const std::uint64_t packed_size = read_varint(bytes, pos);
    if (packed_size > bytes.size() - pos) throw CodecError("rank table: truncated");
    const auto packed = bytes.subspan(pos, packed_size);
    // A zigzagged 33-bit delta takes at most 5 varint bytes.
    const PooledBytes raw = decompress_zstd_frame(packed, n, 5 * n, "rank table");
    table = parse_raw_table(raw, n);
    pos += packed_size;
  } else {
    throw CodecError("rank table: unknown mode");
  }
  check_distinct(table);
  return table;
}

}  // namespace tezip::codecs
