#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "codecs/buffer_pool.hpp"
#include "compressor/gop_codec.hpp"
#include "format/settings.hpp"

namespace tezip {

// Groups of short sequences (archive version 6): a dataset of many sequences of a few frames each
// (Moving MNIST: 100 sequences of 20 64 x 64 frames, 82 KB each) gains from statistics learnt
// across sequences, which a chunk of one sequence, decoded on its own, never has (LZMA on 25
// sequences at once is 10% smaller than zstd -19 on each alone: docs/ratio_gaps.md). Consecutive
// sequences of one geometry, each a single GOP, may be stored as one group: the group's first
// sequence's chunk holds every member's frames (a group chunk), each later member's chunk names
// its place in the group (a member chunk, two or three bytes), and the index marks them
// (ChunkStats::grouped, member). The encoder keeps a group only where it is smaller than the
// members' own chunks. Random access is then per group: the readers decode a group once and
// hand out its members (ArchiveDecoder keeps the last groups decoded; the Stream shuffles and
// deals a group's sequences together).

// The first byte of a group chunk and of a member chunk, where a predictive chunk has its version.
inline constexpr std::uint8_t kGroupChunk = 0x83;
inline constexpr std::uint8_t kGroupMemberChunk = 0x84;

// The chunk of a group: `members` (each a whole sequence's frames, planar, of `shape`: the frames
// as reconstructed) with their frame counts, every frame's samples (codecs/quantize/pixel_frames.hpp) in one
// LZMA frame, with the literal contexts that code a prefix of the group smaller; or nothing where
// the group would not come below `own` bytes (the members' own chunks). `stats` describes it.
std::optional<std::vector<std::uint8_t>> encode_group(const FrameShape& shape, std::span<const GopFrames* const> members,
                                                      std::uint64_t own, ChunkStats& stats);

// The chunk of member `member` (>= 1) of a group.
std::vector<std::uint8_t> group_member_chunk(std::size_t member);

// A group chunk decoded: every member's samples, unpacked member by member as they are wanted.
class DecodedGroup {
 public:
  // `frame_counts`: the members' frame counts, as the index gives them (checked against the
  // chunk's). Throws DataError on a damaged chunk.
  DecodedGroup(const FrameShape& shape, std::span<const std::uint8_t> chunk, std::span<const std::size_t> frame_counts);
  std::size_t members() const { return first_.size() - 1; }
  // Member k's frames, planar.
  GopFrames member(std::size_t k) const;

 private:
  FrameShape shape_;
  codecs::PooledBytes packed_;
  std::vector<std::size_t> first_;  // each member's first frame in packed_, then the frame count
};

// The member a member chunk names; throws DataError where `chunk` is not a member chunk.
std::size_t group_member_of(std::span<const std::uint8_t> chunk);

}  // namespace tezip
