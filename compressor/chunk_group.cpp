#include "compressor/chunk_group.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "codecs/codec_error.hpp"
#include "codecs/entropy/lzma_frame.hpp"
#include "codecs/quantize/pixel_frames.hpp"
#include "codecs/entropy/zstd_frame.hpp"
#include "format/byte_io.hpp"
#include "format/errors.hpp"

namespace tezip {
namespace {

// LZMA 9e, which on Moving MNIST's groups is 10% smaller than zstd -19 (docs/ratio_gaps.md, "Moving
// MNIST: groups of sequences"), with preset 9e's literal contexts or with those of pixels (one
// byte of context, lc 1, for 8-bit samples; the sample's alignment, lp = pb = 1, for 16-bit ones),
// whichever codes the group's first kTrialBytes smaller (on MNIST the pixels' contexts were 1.8%
// smaller). Two looks first spare the LZMA passes where the group cannot win, each scaled from a
// prefix to the whole group: zstd's level 1 on the first kFastTrialBytes, at about 100 times LZMA
// 9e's speed, must come within kFastTrialMargin of the members' own chunks (MNIST 1.25x; short
// clips of gray video, vtest at 192 x 144 in clips of 16 frames, whose predictive chunks are far
// smaller, 1.76x: there LZMA was 1.25x their own chunks, and its trials had made encoding take
// 3.3x as long); then the trial with the pixels' contexts within kTrialMargin.
constexpr std::size_t kFastTrialBytes = std::size_t{1} << 20, kTrialBytes = std::size_t{1} << 18;
constexpr double kFastTrialMargin = 1.6, kTrialMargin = 1.2;
constexpr int kFastTrialLevel = 1;

}  // namespace

std::optional<std::vector<std::uint8_t>> encode_group(const FrameShape& shape, std::span<const GopFrames* const> members,
                                                      std::uint64_t own, ChunkStats& stats) {
  std::vector<std::uint8_t> packed;
  std::size_t frames = 0;
  for (const GopFrames* m : members) frames += m->size();
  packed.reserve(frames * shape.size() * codecs::sample_bytes(shape.max_value));
  for (const GopFrames* m : members)
    for (const Pixels& frame : *m) {
      if (frame.size() != shape.size()) throw std::invalid_argument("encode_group: a frame of another shape");
      codecs::pack_samples(frame, shape.max_value, packed);
    }
  // A prefix of `bytes` and what scales its sizes to the whole group's.
  const auto prefix = [&](std::size_t bytes) { return std::span<const std::uint8_t>(packed).first(std::min(packed.size(), bytes)); };
  const auto scale = [&](std::span<const std::uint8_t> part) { return double(packed.size()) / double(part.size()); };
  const auto fast = prefix(kFastTrialBytes);
  if (codecs::zstd_size_within(fast, kFastTrialLevel, std::size_t(kFastTrialMargin * double(own) / scale(fast))) == SIZE_MAX)
    return std::nullopt;
  const auto trial = prefix(kTrialBytes);
  const bool wide = codecs::sample_bytes(shape.max_value) > 1;
  const codecs::LzmaContexts candidates[] = {wide ? codecs::LzmaContexts{0, 1, 1} : codecs::LzmaContexts{1, 0, 0}, {}};
  std::vector<std::uint8_t> payload;
  codecs::LzmaContexts chosen;
  for (const auto& contexts : candidates) {
    auto coded = codecs::compress_lzma_frame(trial, contexts);
    if (payload.empty() && double(coded.size()) * scale(trial) > kTrialMargin * double(own)) return std::nullopt;
    if (payload.empty() || coded.size() < payload.size()) payload = std::move(coded), chosen = contexts;
  }
  if (trial.size() < packed.size()) payload = codecs::compress_lzma_frame(packed, chosen);
  ByteWriter out;
  out.u8(kGroupChunk);
  out.u8(std::uint8_t(codecs::EntropyCoderKind::Lzma));
  out.varint(members.size());
  for (const GopFrames* m : members) out.varint(m->size());
  out.blob(payload);
  if (out.bytes().size() >= own) return std::nullopt;
  stats = ChunkStats{};
  stats.symbol_bytes = payload.size();
  stats.coder = codecs::EntropyCoderKind::Lzma;
  stats.pixels = true;
  return std::move(out.bytes());
}

std::vector<std::uint8_t> group_member_chunk(std::size_t member) {
  if (member == 0) throw std::invalid_argument("group_member_chunk: member 0 holds the group");
  ByteWriter out;
  out.u8(kGroupMemberChunk);
  out.varint(member);
  return std::move(out.bytes());
}

DecodedGroup::DecodedGroup(const FrameShape& shape, std::span<const std::uint8_t> chunk, std::span<const std::size_t> frame_counts)
    : shape_(shape) {
  ByteReader in(chunk, "group chunk");
  if (in.u8() != kGroupChunk) in.fail("not a group chunk");
  if (in.u8() != std::uint8_t(codecs::EntropyCoderKind::Lzma)) in.fail("unknown coder");
  if (in.varint() != frame_counts.size()) in.fail("member count differs from the index");
  first_.push_back(0);
  for (const std::size_t count : frame_counts) {
    if (in.varint() != count) in.fail("a member's frame count differs from the index");
    first_.push_back(first_.back() + count);
  }
  const std::size_t bytes = first_.back() * shape.size() * codecs::sample_bytes(shape.max_value);
  const auto payload = in.blob();
  in.expect_end();
  try {
    packed_ = codecs::decompress_lzma_frame(payload, bytes, bytes, "group chunk");  // pooled, its size checked first
  } catch (const codecs::CodecError& e) {
    throw DataError(e.what());
  }
}

GopFrames DecodedGroup::member(std::size_t k) const {
  if (k >= members()) throw std::out_of_range("DecodedGroup::member: no such member");
  const std::size_t frame_bytes = shape_.size() * codecs::sample_bytes(shape_.max_value);
  GopFrames frames;
  try {
    for (std::size_t t = first_[k]; t < first_[k + 1]; ++t)
      codecs::unpack_samples(std::span<const std::uint8_t>(packed_).subspan(t * frame_bytes, frame_bytes), shape_.max_value,
                             frames.emplace_back(shape_.size()));
  } catch (const codecs::CodecError& e) {
    throw DataError(std::string("group chunk: ") + e.what());
  }
  return frames;
}

std::size_t group_member_of(std::span<const std::uint8_t> chunk) {
  ByteReader in(chunk, "member chunk");
  if (in.u8() != kGroupMemberChunk) in.fail("not a member of a group");
  const std::size_t member = in.varint();
  in.expect_end();
  if (member == 0) in.fail("member 0 of a group");
  return member;
}

}  // namespace tezip
