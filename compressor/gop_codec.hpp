#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "format/frame.hpp"
#include "format/settings.hpp"
#include "predictor/predictor.hpp"

namespace tezip {

struct EncodedGop {
  std::vector<std::uint8_t> bytes;
  std::vector<Pixels> reconstruction;  // what the decoder will produce, frame by frame
  ChunkStats stats;
};

using GopFrames = std::vector<Pixels>;  // planar frames of one GOP, in order

// Codes GOPs of one shape in lockstep, so the predictor forecasts frame t of all of them in one
// call. The first frame of each GOP is its key frame, coded by the spatial (intra) coder.
std::vector<EncodedGop> encode_gops(const Predictor& predictor, const FrameShape& shape,
                                    std::span<const GopFrames* const> gops, const CodingSettings& settings);

// Told of a plane's rows as soon as their pixels are final, while they are in cache (a checksum's
// moment): the chunk's index in decode_gops' `chunks`, the frame's in its GOP, the channel, the
// first row, whole rows of pixels (valid as long as the decoded frames; they lie in the decoded
// frame's planar buffer, which starts `channel` planes and `first_row` rows before them). A plane's rows come in
// order, a few at a time or all at once; colour planes finish in their channel plan's order, the
// frames of bidirectional GOPs out of order.
using RowsDone = std::function<void(std::size_t chunk, std::size_t frame, std::size_t channel, std::size_t first_row,
                                    std::span<const std::uint16_t> rows)>;

// Whether a caller of decode_gops reads the frames it returns, or only what `done` hears of them
// (a checksum): Streamed decodes a GOP in a few frames' memory where its references allow (a frame
// into the buffer of one no later frame reads), and the frames returned are then not the GOP's.
// `done`'s rows then stay valid until every row of their frame and of the frames before it has
// been told (so a checksum fed in order may keep rows that came early); bidirectional GOPs, whose
// frames finish out of order, keep every frame.
enum class Frames { Returned, Streamed };

// Decodes chunks produced by encode_gops; frame_counts[i] is what the archive index says chunk i
// holds; `done`, where given, hears of every row once. Throws DataError or codecs::CodecError on
// damaged bytes.
std::vector<GopFrames> decode_gops(const Predictor& predictor, const FrameShape& shape,
                                   std::span<const std::span<const std::uint8_t>> chunks,
                                   std::span<const std::size_t> frame_counts, const CodingSettings& settings,
                                   const RowsDone& done = {}, Frames wanted = Frames::Returned);

// What a chunk is, from its first bytes (kChunkHeadBytes, or fewer where the chunk is shorter):
// "pixels" or "sparse" for chunks in the pixel domain, else the predictor its GOP was coded with
// (for `auto`, the choice the chunk records), by `predictor`'s identity, after "rct " where the GOP
// went through the colour transform, and " + level maps" after it where a plane record in the
// head (frames of `channels`) has a level map (chunk version 18 on). For `tezip info`. (The
// records of a GOP of 256 colour frames fit in the head.)
inline constexpr std::size_t kChunkHeadBytes = 4096;
std::string chunk_kind(const Predictor& predictor, std::span<const std::uint8_t> head, std::size_t channels = 1);

// Mean squared error between two frames of pixels normalised to [0, 1], so that one threshold
// means the same on 8- and 16-bit data: the dynamic window's key-frame test.
double mean_squared_error(std::span<const std::uint16_t> a, std::span<const std::uint16_t> b, std::uint32_t max_value);

}  // namespace tezip
