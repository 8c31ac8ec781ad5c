#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "codecs/buffer_pool.hpp"  // BufferAllocator: symbol buffers filled in full, never zeroed
#include "codecs/varint.hpp"  // append_varint, read_varint: the rank table's and the coders' varints

namespace tezip::codecs {

// A stream's symbols (or ranks), written in full before they are read: pooled and not zeroed (a
// GOP's buffer is 56 MB for 32 gray 768 x 576 frames; zeroing it on each append was 3.5% of encoding).
using SymbolBuffer = std::vector<std::uint32_t, BufferAllocator<std::uint32_t>>;

// Frequency-rank remapping: each symbol becomes its rank by frequency within one chunk (0 = most
// frequent; ties go to the smaller symbol so the mapping is deterministic). Entropy coders then see
// small numbers for likely symbols whatever the symbols' own values are.
struct RankRemap {
  SymbolBuffer ranks;                         // one per input symbol (kept(): the symbol itself)
  std::vector<std::uint32_t> rank_to_symbol;  // distinct symbols, most frequent first
  // Where the caller's choice kept the symbols as they are (their ranks not applied): each
  // present symbol's rank by frequency, symbol_to_rank[s] (others' entries are meaningless).
  std::vector<std::uint32_t> symbol_to_rank;
  bool kept() const { return !symbol_to_rank.empty(); }
};

// Asked, where the symbols are a dense alphabet (their largest below 2^20 and below their count)
// with two or more distinct ones, whether to keep them as they are:
// keep(symbols, symbol_to_rank).
using KeepSymbols = std::function<bool(std::span<const std::uint32_t>, std::span<const std::uint32_t>)>;

RankRemap rank_remap(std::span<const std::uint32_t> symbols);
// The same in the symbols' own buffer.
RankRemap rank_remap(SymbolBuffer symbols, const KeepSymbols& keep = {});

// Appends the rank -> symbol table in a compact self-delimiting form.
void append_rank_table(std::span<const std::uint32_t> rank_to_symbol, std::vector<std::uint8_t>& out);

// Reads a table written by append_rank_table starting at `pos` and advances `pos` past it. Throws
// CodecError when the table is malformed, holds a symbol twice, or has more than `max_entries` entries.
std::vector<std::uint32_t> read_rank_table(std::span<const std::uint8_t> bytes, std::size_t& pos,
                                           std::size_t max_entries);

}  // namespace tezip::codecs
