#include "compressor/gop_codec.hpp"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <bit>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>

#include "codecs/transform/block_motion.hpp"
#include "codecs/buffer_pool.hpp"
#include "codecs/transform/channel_plan.hpp"
#include "codecs/codec_error.hpp"
#include "codecs/transform/colour_transform.hpp"
#include "codecs/transform/forecast_blocks.hpp"
#include "codecs/transform/level_map.hpp"
#include "codecs/entropy/histogram.hpp"
#include "codecs/quantize/interval_quantizer.hpp"
#include "codecs/quantize/linear_quantizer.hpp"
#include "codecs/entropy/lzma_frame.hpp"
#include "codecs/quantize/pixel_frames.hpp"
#include "codecs/transform/plane_transform.hpp"
#include "codecs/transform/polyphase.hpp"
#include "codecs/transform/sparse_frames.hpp"
#include "codecs/entropy/striped_rans.hpp"
#include "codecs/entropy/symbol_coder.hpp"
#include "codecs/entropy/zstd_frame.hpp"
#include "compressor/chunk_group.hpp"
#include "format/byte_io.hpp"

namespace tezip {
namespace {

using codecs::PlaneTransform;

// 2: per-block forecast maps; 3: channel deltas; 4: coded motion; 5: the striped rANS coder's
// eight-neighbour context (codecs/entropy/striped_rans.hpp), which older readers would misread; 6: a
// channel plan per colour frame (codecs/transform/channel_plan.hpp) in place of the channel-delta flags; 7:
// spatial blocks in motion fields (codecs::kSpatialBlock), which older readers refuse; 8: the
// striped rANS coder's column halves (codecs/entropy/striped_rans.cpp), which older readers refuse as
// bad options; 9: its column quarters and eighths, the same; 10: a second reference for the
// frames of sequential GOPs with coded motion (second_reference, below), a flag in every such
// frame's motion symbols that older readers would misread; 11: side classes of the forecast in the
// striped rANS coder's contexts (codecs/entropy/striped_rans.hpp), which older readers refuse as bad options;
// 12: a flags symbol in every frame's motion symbols (kMotionFlagsVersion, below); 13: planes'
// symbols in the polyphase layout (kPolyphaseFlag), written only by chunks that have such planes; 14:
// the smooth modes: planes in the gradient or interpolation transform (PlaneTransform::Gradient,
// Interpolation) and interpolated planes (kInterpolatedPlane), the same; 15: bounded interpolated
// planes quantized in closed loop (kClosedInterpolationVersion), the same; 16: more than two
// references for a sequential GOP's bi-predicted frames (kMoreReferencesVersion), counted in the
// flags symbol, which older readers refuse as bad motion flags; 17: intra planes forecast by the
// mean of four (kIntraMeanPlane), which older readers refuse as an unknown plane mode; 18: level
// maps (kLevelMapFlag), which older readers refuse as a channel-delta flag; 19: striped symbols
// in column parts whose cuts see the neighbouring parts, or in sixteenths (kColumnPartsVersion),
// which older readers refuse as bad options of the striped coder.
constexpr std::uint8_t kChunkVersion = 19;
// The plane-mode byte: a PlaneTransform of the inter residual, or this: coded spatially, as in a
// key frame, because the forecast missed (a scene cut, an object appearing, moving depth edges).
constexpr std::uint8_t kIntraPlane = 3;
// Or this (chunk version 14, gray planes of lossless and uniform-tolerance modes, on any frame):
// coded spatially by the interpolation transform (PlaneTransform::Interpolation) of its pixels'
// bins, as an inter plane against a forecast of zeros; from version 15 a bounded one (tolerance
// above 0) by the interpolation quantized in closed loop (codecs::quantize_plane_interpolated).
// A smooth field's planes, where the median's pixel-by-pixel prediction leaves its curvature
// (docs/defaults.md, "Smooth fields: the gradient and interpolation transforms, interpolated
// planes", and "Interpolated planes quantized in closed loop").
constexpr std::uint8_t kInterpolatedPlane = 6;
// Or this (chunk version 15, gray planes of uniform tolerances above 0, on forecast frames): the
// residual against the plane's forecast interpolated in closed loop, each pixel's prediction its
// forecast plus the interpolation of the reconstructed residual (codecs::quantize_plane_interpolated
// with a forecast); its forecast flags (0x10, 0x40) as an inter plane's. A smooth field whose
// frames change slowly, where the residual is smoother than the frame.
constexpr std::uint8_t kInterpolatedResidual = 7;
// Or this (chunk version 17, any plane of any mode): coded spatially as kIntraPlane, on a key frame
// too (whose planes otherwise record no mode), each pixel forecast by the mean of its four
// reconstructed neighbours (codecs::IntraPredictor::mean) instead of the median. Flat scenes under
// sensor noise (docs/defaults.md, "Intra planes forecast by the mean of four").
constexpr std::uint8_t kIntraMeanPlane = 8;
// Added to the mode of an inter plane whose forecast is built per block (codecs/transform/forecast_blocks.hpp)
// from the predictor's forecast and the previous frame; its map is in the chunk's map stream.
constexpr std::uint8_t kBlockMapFlag = 0x10;
// Chunk versions 3-5: added to the mode of a plane of channel c > 0 whose symbols are coded as the
// difference from channel c - 1's (before the spatial transform). Version 6 records a channel plan
// per colour frame instead, which holds these deltas and more (codecs/transform/channel_plan.hpp).
constexpr std::uint8_t kChannelDeltaFlag = 0x20;
// From chunk version 18 the same bit, on a lossless plane: the plane is coded as the indices of its
// pixels among the levels it uses (codecs::LevelMap), its forecast as the index of each forecast
// value's nearest level; its map is in the chunk's level-map stream (docs/format.md), in the
// order code_plane meets the planes (a frame's in channel order, whatever its plan).
constexpr std::uint8_t kLevelMapFlag = 0x20;
constexpr std::uint8_t kLevelMapVersion = 18;
constexpr std::uint8_t kColumnPartsVersion = 19;
// A plane takes its level map where the estimate of its symbols by the map is below this times the
// estimate without it: the map costs a few bytes, and where it removes only a few scattered
// levels the two estimates differ by their noise alone.
constexpr double kLevelMapGain = 0.99;
// Added to the mode of an inter plane whose forecast is the previous reconstruction of the plane
// displaced by coded block motion (codecs/transform/block_motion.hpp); its vectors are in the motion stream.
constexpr std::uint8_t kMotionFlag = 0x40;
// From chunk version 13, added to the mode of a plane with symbols (not interval-coded) whose
// symbols, after its channel reference and spatial transform, are stored in the polyphase layout
// (codecs/transform/polyphase.hpp), and its side classes with them; older readers refuse the mode as unknown.
constexpr std::uint8_t kPolyphaseFlag = 0x80;
constexpr std::uint8_t kPolyphaseVersion = 13;
constexpr std::uint8_t kSmoothVersion = 14;
constexpr std::uint8_t kClosedInterpolationVersion = 15;
// More than two references for a sequential GOP's bi-predicted frames (kMoreReferencesShift, below).
constexpr std::uint8_t kMoreReferencesVersion = 16;
constexpr std::uint8_t kIntraMeanVersion = 17;
// The layout is taken where the contexts' estimate of it is below this times the raster order's.
// The estimate reads a quarter of the rows: where the layout changes nothing it still differs by
// a few percent from one to the other (ViSP's mbt/cube, a gray camera, its key frames: 0.97-1.00,
// and taken at those the archive grew 0.2%), while on planes held in 2 x 2 blocks it is 0.2-0.9
// (docs/defaults.md, "Chroma stored at half resolution: the polyphase layout").
constexpr double kPolyphaseGain = 0.97;
// An intra plane is forecast by the mean of four where the estimate of its sampled symbols is below
// this times the median's: both read the same rows (a bounded plane's forecasts from its original
// pixels, not the reconstructed ones), so a plane where the two are about even keeps the median,
// whose decoder runs sixteen rows a vector.
constexpr double kIntraMeanGain = 0.98;
// The mean of four's estimate is not weighed against a limit the median's is above by more than
// this factor's inverse: the mean's largest lead measured was 7% of the median's estimate, so a
// quarter leaves a wide margin.
constexpr double kIntraMeanMost = 0.75;
constexpr std::uint8_t kModeFlags = kBlockMapFlag | kChannelDeltaFlag | kMotionFlag | kPolyphaseFlag;
// A plane coded spatially on a frame with a forecast (by either predictor).
bool intra_plane(std::uint8_t mode) {
  const std::uint8_t base = mode & ~kModeFlags;
  return base == kIntraPlane || base == kIntraMeanPlane;
}
// The first byte of a pixel chunk (codecs/quantize/pixel_frames.hpp), where a predictive chunk has its
// version (2-13): the GOP's frames as they are (bounded modes: snapped to bins within each plane's
// tolerance), in one zstd (or, with --coder best, LZMA) frame. Older readers refuse it as an
// unknown chunk version.
constexpr std::uint8_t kPixelChunk = 0x80;
// The first byte of a sparse chunk (codecs/transform/sparse_frames.hpp): the tolerance of the pixels' bins (0:
// lossless) and the GOP's background bin, then in one zstd (or LZMA) frame the foreground bins'
// median residuals of every plane, then every plane's mask of foreground bins.
constexpr std::uint8_t kSparseChunk = 0x81;
// The first byte of a colour-transformed chunk: a colour GOP whose frames went through a reversible
// colour transform before they were coded (the next byte: codecs::kRctTransform for a lossless
// GOP; codecs::kRctBoundedTransform for a bounded one, whose chroma planes are exact;
// codecs::kGreenSplitTransform for a bounded one through subtract green, its bound split between G
// and the chroma); a predictive chunk of the transformed frames (planes Y or G, U, V, pixels in
// [0, 2 M]) follows.
constexpr std::uint8_t kColourChunk = 0x82;

// `count` frames of `size` pixels, not zeroed: for frames that are written whole before they are read.
std::vector<Pixels> unwritten_frames(std::size_t count, std::size_t size) {
  std::vector<Pixels> frames(count);
  for (auto& frame : frames) frame = Pixels(size);
  return frames;
}

// Where one plane's symbols went, as recorded in the chunk header.
struct PlaneRecord {
  std::uint32_t tolerance = 0;
  std::uint8_t mode = std::uint8_t(PlaneTransform::None);  // a PlaneTransform, or kIntraPlane
  std::uint64_t run_count = 0;  // interval-quantized planes only
};

// A plane record's mode byte that is one of the smooth modes (chunk versions 14 and 15).
bool smooth_mode(std::uint8_t mode) {
  const std::uint8_t base = mode & ~kModeFlags;
  return base == std::uint8_t(PlaneTransform::Gradient) || base == std::uint8_t(PlaneTransform::Interpolation) ||
         base == kInterpolatedPlane || base == kInterpolatedResidual;
}

// Whether some plane record of a predictive chunk (after a colour transform's two bytes; of
// version 6 or later), frames of `channels`, has a mode for which has(frame, mode): the records
// after the frame count, as serialize writes them (a colour frame's plan byte, then each plane's
// tolerance, mode and run count). False past the end of `chunk` (a head of it).
template <class Has>
bool any_plane_mode(std::span<const std::uint8_t> chunk, std::size_t channels, Has has) {
  if (chunk.size() >= 2 && chunk[0] == kColourChunk) chunk = chunk.subspan(2);
  if (chunk.size() < 4) return false;
  ByteReader in(chunk.subspan(3), "chunk");  // after the version, quantizer and choice
  try {
    for (std::uint64_t t = 0, frames = in.varint(); t < frames; ++t) {
      if (channels > 1) in.u8();
      for (std::size_t c = 0; c < channels; ++c) {
        in.varint();
        if (has(std::size_t(t), in.u8())) return true;
        in.varint();
      }
    }
  } catch (const DataError&) {  // the head ends first
  }
  return false;
}

// Everything a GOP's chunk holds, before and after entropy coding.
struct GopSymbols {
  std::vector<std::vector<PlaneRecord>> planes;  // [frame][channel]
  // Colour: [frame], the ChannelPlan byte of the frame's symbol planes (codecs/transform/channel_plan.hpp).
  std::vector<std::uint8_t> channel_plans;
  // Linear planes, transformed, in coding order, zigzagged as they are appended: the symbol coder
  // takes the buffer itself (a GOP of 32 colour 768 x 576 frames is 170 MB; a zigzagged copy of it
  // was a second such block, zeroed, at the peak of encoding).
  codecs::SymbolBuffer symbols;
  // Encoding, from chunk version 11: each symbol's side class (codecs::side_classes of its plane's
  // forecast; 0 in planes coded spatially), which the striped rANS coder may put in its contexts.
  std::vector<std::uint8_t> side;
  std::vector<std::int32_t> run_values;
  std::vector<std::uint32_t> run_lengths;
  std::vector<std::uint16_t> literals;
  std::vector<std::uint32_t> block_maps;  // forecast source per block, planes with kBlockMapFlag
  std::vector<std::uint32_t> motion;      // motion fields of the planes with kMotionFlag, in plane order
  std::vector<std::uint32_t> level_maps;  // the level maps of the planes with kLevelMapFlag, in plane order
  bool more_references = false;           // encoding: a frame's flags count more references (version 16)
  std::uint8_t version = kChunkVersion;   // decoding: the chunk's version
};

// What auto's trials compute more than once, kept by a fingerprint (XXH3-128) of everything the
// result depends on, so that the same work again costs a hash. In a trial window of 3 frames,
// `linear` codes its one frame with two references exactly as `previous` does wherever motion or
// the previous frame wins (every window of mire2, castle and Moving MNIST, lossless and abs 2), and
// the final coding of a GOP searches its first frames' motion again. The results are the same
// values computed once, so the archives are byte for byte those without the memo.
class EncodeMemo {
 public:
  using Key = std::pair<std::uint64_t, std::uint64_t>;

  class Hasher {
   public:
    Hasher() {
      if (!state_) throw std::bad_alloc();
      XXH3_128bits_reset(state_.get());
    }
    template <class T>
    Hasher& add(std::span<const T> values) {
      const std::uint64_t n = values.size();
      XXH3_128bits_update(state_.get(), &n, sizeof n);
      XXH3_128bits_update(state_.get(), values.data(), values.size_bytes());
      return *this;
    }
    template <class T>
    Hasher& value(const T& v) {
      static_assert(std::is_trivially_copyable_v<T>);
      XXH3_128bits_update(state_.get(), &v, sizeof v);
      return *this;
    }
    Key key() const {
      const XXH128_hash_t h = XXH3_128bits_digest(state_.get());
      return {h.low64, h.high64};
    }

   private:
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state_{XXH3_createState(), &XXH3_freeState};
  };

  struct Chunk {
    std::vector<std::uint8_t> bytes;
    ChunkStats stats;
  };

  const codecs::MotionSearch* search(const Key& k) const {
    const auto it = searches_.find(k);
    return it == searches_.end() ? nullptr : &it->second;
  }
  const Chunk* chunk(const Key& k) const {
    const auto it = chunks_.find(k);
    return it == chunks_.end() ? nullptr : &it->second;
  }
  // Only while `recording`: the trials' results, which later trials and the final coding may meet
  // again; the final coding's own (whole GOPs) would not be met again.
  void keep(const Key& k, const codecs::MotionSearch& s) {
    if (recording) searches_.emplace(k, s);
  }
  void keep(const Key& k, std::span<const std::uint8_t> bytes, const ChunkStats& stats) {
    if (recording) chunks_.emplace(k, Chunk{{bytes.begin(), bytes.end()}, stats});
  }
  // Chunks are met again only within one GOP's trials.
  void forget_chunks() { chunks_.clear(); }

  bool recording = false;

 private:
  std::map<Key, codecs::MotionSearch> searches_;
  std::map<Key, Chunk> chunks_;
};

// The fingerprint of everything serialize() reads, but the choice byte.
EncodeMemo::Key chunk_key(const GopSymbols& g, const FrameShape& shape, const CodingSettings& settings, bool rival) {
  EncodeMemo::Hasher h;
  h.value(rival);
  h.value(shape.width).value(shape.height).value(shape.channels).value(std::uint8_t(settings.quantizer));
  h.value(settings.zstd_level).value(settings.zstd_win_level).value(settings.zstd_win_margin);
  h.value(settings.rans_coder).value(settings.adaptive_coder).value(settings.lzma_coder).value(settings.side_classes);
  h.value(settings.measured_motion_channel).value(settings.measured_residual_prices);
  h.value(std::uint64_t(g.planes.size())).add(std::span<const std::uint8_t>(g.channel_plans));
  for (const auto& frame : g.planes) {
    h.value(std::uint64_t(frame.size()));
    for (const auto& plane : frame) h.value(plane.tolerance).value(plane.mode).value(plane.run_count);
  }
  h.add(std::span<const std::uint32_t>(g.symbols)).add(std::span<const std::uint8_t>(g.side));
  h.add(std::span<const std::int32_t>(g.run_values));
  h.add(std::span<const std::uint32_t>(g.run_lengths)).add(std::span<const std::uint16_t>(g.literals));
  h.add(std::span<const std::uint32_t>(g.block_maps)).add(std::span<const std::uint32_t>(g.motion));
  h.add(std::span<const std::uint32_t>(g.level_maps));
  return h.key();
}

bool frame_is_intra(const Predictor& predictor, std::size_t t) {
  return t < std::max<std::size_t>(1, predictor.key_frames()) || predictor.intra_only();
}

codecs::PlaneBound plane_bound(const CodingSettings& settings, std::uint32_t tolerance, std::uint32_t max_value) {
  codecs::PlaneBound b;
  b.max_value = max_value;
  if (settings.bound.pointwise()) {
    b.pointwise_rel = settings.bound.rel;
  } else {
    b.tolerance = tolerance;
  }
  return b;
}

// Channel `channel`'s tolerance on `plane`; a GOP through the colour transform (at an abs bound)
// splits its bound between luma and chroma (CodingSettings::transformed_chroma, chroma_tolerance).
std::uint32_t plane_tolerance(const CodingSettings& settings, std::span<const std::uint16_t> plane,
                              std::uint32_t max_value, std::size_t channel) {
  if (settings.bound.pointwise() || settings.bound.mode == codecs::BoundMode::Lossless || plane.empty()) return 0;
  if (settings.transformed_chroma) {
    const std::uint32_t bound = settings.bound.tolerance(0, 0, max_value);
    if (settings.chroma_tolerance > bound) throw std::logic_error("chroma tolerance past the bound");
    return channel > 0 ? settings.chroma_tolerance : bound - settings.chroma_tolerance;
  }
  if (!settings.bound.spans()) return settings.bound.tolerance(0, 0, max_value);
  // A plain reduction, which the compiler vectorizes (std::minmax_element, whose iterators must
  // be the first minimum and the last maximum, does not: 11% of encoding at abs 2 went to it,
  // where the span is not even needed).
  std::uint16_t lo = UINT16_MAX, hi = 0;
  for (const std::uint16_t v : plane) lo = std::min(lo, v), hi = std::max(hi, v);
  return settings.bound.tolerance(lo, hi, max_value);
}

// Whether plane `channel` keeps the predictor's forecast where channel 0 takes coded motion: a
// colour transform's chroma planes do, unless the GOP's colour trial chose them to follow the
// motion (settings.chroma_follows_motion; lossless GOPs only). Displaced and interpolated, the
// chroma differences of decoded video, exact or within a share of the bound, coded larger (first
// 100 frames: cup at abs 2 24% larger, colour vtest 10%, at abs 4 up to 17%; losslessly vtest and
// box 8%, but cup 2% smaller), and a measured choice at each GOP's first frame with motion
// misjudged it (docs/colour.md, "Motion and the transformed chroma"); losslessly the trial's band
// judges it (cup 2.6% smaller, "The chroma follows the motion losslessly where the trial says").
bool chroma_keeps_forecast(const CodingSettings& settings, std::size_t channel) {
  return channel > 0 && settings.transformed_chroma && !settings.chroma_follows_motion;
}

void append_zigzagged(codecs::SymbolBuffer& out, std::span<const std::int32_t> values) {
  const std::size_t n = out.size();
  out.resize(n + values.size());
  std::transform(values.begin(), values.end(), out.begin() + std::ptrdiff_t(n), codecs::zigzag);
}

std::vector<std::uint32_t> zigzag_all(std::span<const std::int32_t> values) {
  std::vector<std::uint32_t> out(values.size());
  std::transform(values.begin(), values.end(), out.begin(), codecs::zigzag);
  return out;
}

// A chunk rival of a GOP (SymbolCoderOptions::rival_bytes): the estimated size of another of its
// chunks, asked for only where the predictive chunk's coder would spend zstd's passes.
using ChunkRival = std::function<std::size_t()>;

// `rival` (may be empty) is given to the plane symbols' coder.
std::vector<std::uint8_t> serialize(GopSymbols& g, const FrameShape& shape, const CodingSettings& settings,
                                    std::uint8_t choice, ChunkStats& stats, const ChunkRival& rival = {}) {
  ByteWriter out;
  // The version a reader needs: 19 where the planes' striped rANS stream has column parts (raised
  // once the symbols are coded), 18 where a plane has a level map, 17 where one is forecast by the
  // mean of four, 16 only where a frame averages more than two references, 15 where a
  // bounded plane is interpolated (modes 6 and 7), 14 where a plane takes a smooth mode, 13 where one
  // takes the polyphase layout, so that chunks without them stay readable by older readers.
  const auto any_plane = [&](auto&& has) {
    return std::any_of(g.planes.begin(), g.planes.end(),
                       [&](const std::vector<PlaneRecord>& frame) { return std::any_of(frame.begin(), frame.end(), has); });
  };
  const bool smooth = any_plane([](const PlaneRecord& p) { return smooth_mode(p.mode); });
  const bool closed = any_plane([](const PlaneRecord& p) {
    const std::uint8_t base = p.mode & ~kModeFlags;
    return (base == kInterpolatedPlane && p.tolerance > 0) || base == kInterpolatedResidual;
  });
  const bool polyphase = any_plane([](const PlaneRecord& p) { return (p.mode & kPolyphaseFlag) != 0; });
  const bool intra_mean = any_plane([](const PlaneRecord& p) { return (p.mode & ~kModeFlags) == kIntraMeanPlane; });
  const bool level_maps = any_plane([](const PlaneRecord& p) { return (p.mode & kLevelMapFlag) != 0; });
  const std::size_t version_at = out.bytes().size();  // raised below where the symbols need it
  out.u8(level_maps          ? kLevelMapVersion
         : intra_mean        ? kIntraMeanVersion
         : g.more_references ? kMoreReferencesVersion
         : closed          ? kClosedInterpolationVersion
         : smooth          ? kSmoothVersion
         : polyphase       ? kPolyphaseVersion
                           : kPolyphaseVersion - 1);
  out.u8(std::uint8_t(settings.quantizer));
  out.u8(choice);
  out.varint(g.planes.size());
  for (std::size_t t = 0; t < g.planes.size(); ++t) {
    if (shape.channels > 1) out.u8(g.channel_plans.at(t));
    for (const auto& plane : g.planes[t]) {
      out.varint(plane.tolerance);
      out.u8(plane.mode);
      out.varint(plane.run_count);
    }
  }
  codecs::SymbolCoderOptions options;
  options.zstd_level = settings.zstd_level;
  options.zstd_win_level = settings.zstd_win_level;
  options.zstd_win_margin = settings.zstd_win_margin;
  options.allow_adaptive = settings.adaptive_coder;
  options.allow_rans = settings.rans_coder;
  options.allow_lzma = settings.lzma_coder;
  options.segment_rows = shape.height;  // a plane: the decoder takes the symbols plane by plane
  options.segment_period = shape.channels;
  codecs::SymbolCoderStats coder_stats;
  // Side classes only where some plane has a forecast with detail (else they cannot change a context).
  const bool side = settings.side_classes && std::any_of(g.side.begin(), g.side.end(), [](std::uint8_t c) { return c != 0; });
  codecs::SymbolCoderOptions plane_options = options;
  plane_options.rival_bytes = rival;
  const auto symbols = codecs::encode_symbols(std::move(g.symbols), shape.width, plane_options, &coder_stats,
                                              side ? std::span<const std::uint8_t>(g.side) : std::span<const std::uint8_t>());
  const auto values = codecs::encode_symbols(zigzag_all(g.run_values), 0, options);
  const std::vector<std::uint32_t> lengths_minus_one = [&] {
    std::vector<std::uint32_t> v(g.run_lengths.size());
    std::transform(g.run_lengths.begin(), g.run_lengths.end(), v.begin(), [](std::uint32_t n) { return n - 1; });
    return v;
  }();
  const auto lengths = codecs::encode_symbols(lengths_minus_one, 0, options);
  const auto literals = codecs::encode_symbols(std::vector<std::uint32_t>(g.literals.begin(), g.literals.end()), 0, options);
  if (coder_stats.column_parts > 1) out.bytes()[version_at] = std::max(out.bytes()[version_at], kColumnPartsVersion);
  out.blob(symbols);
  out.blob(values);
  out.blob(lengths);
  out.varint(g.literals.size());
  out.blob(literals);
  out.blob(codecs::encode_symbols(g.block_maps, 0, options));
  out.varint(g.motion.size());
  out.blob(codecs::encode_symbols(g.motion, 0, options));
  if (level_maps) {
    out.varint(g.level_maps.size());
    out.blob(codecs::encode_symbols(g.level_maps, 0, options));
  }
  stats.symbol_bytes = symbols.size();
  stats.run_bytes = values.size() + lengths.size();
  stats.literal_bytes = literals.size();
  stats.literal_count = g.literals.size();
  stats.coder = coder_stats.chosen;
  return std::move(out.bytes());
}

// Drives frames 1.. of a batch of GOPs through the predictor in lockstep, identically for encoder
// and decoder: forecast frame t of every GOP that has one (one call for the batch), code or decode
// each plane against its slice of the forecast (empty for intra frames), then let the predictor
// observe the reconstructions. `code_plane(g, t, c, forecast)` does the plane; `reconstruction(g, t)`
// is the frame it produced. Where the predictor's forecast is pure, GOPs whose frame t
// `uses_forecast(g, t)` denies are not forecast: their planes get a forecast of stale values; and
// a GOP's frames after the last one that uses a forecast are not observed (a copy of each frame
// that nothing would read: 6% of decoding colour vtest at abs 2, whose GOPs take coded motion).
template <class UsesForecast, class CodePlane, class Reconstruction>
void run_lockstep(const Predictor& predictor, const FrameShape& shape, std::span<const std::unique_ptr<GopState>> states,
                  std::span<const std::size_t> lengths, UsesForecast uses_forecast, CodePlane code_plane,
                  Reconstruction reconstruction) {
  const std::size_t plane_size = std::size_t(shape.width) * shape.height;
  const std::size_t longest = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
  std::vector<GopState*> active;
  std::vector<std::size_t> active_index;
  std::vector<std::vector<std::uint16_t, codecs::BufferAllocator<std::uint16_t>>> forecasts;  // pooled
  const bool previous_frame = predictor.forecasts_previous_frame();
  std::vector<std::size_t> last_use(lengths.size(), 0);  // per GOP: observe frames before this one
  for (std::size_t g = 0; g < lengths.size(); ++g)
    for (std::size_t t = lengths[g]; t-- > 1 && last_use[g] == 0;)
      if (!predictor.forecast_is_pure() || uses_forecast(g, t)) last_use[g] = t;
  std::vector<GopState*> observers;
  for (std::size_t t = 1; t < longest; ++t) {
    active.clear();
    active_index.clear();
    for (std::size_t g = 0; g < lengths.size(); ++g)
      if (lengths[g] > t) {
        active.push_back(states[g].get());
        active_index.push_back(g);
      }
    const bool intra = frame_is_intra(predictor, t);
    if (!intra && !previous_frame) {
      forecasts.resize(active.size());
      std::vector<GopState*> asked;
      std::vector<std::span<std::uint16_t>> views;
      for (std::size_t a = 0; a < active.size(); ++a) {
        forecasts[a].resize(shape.size(), 0);  // zeros where new, as a GOP that is not asked sees them
        if (!predictor.forecast_is_pure() || uses_forecast(active_index[a], t)) {
          asked.push_back(active[a]);
          views.emplace_back(forecasts[a]);
        }
      }
      if (!asked.empty()) predictor.forecast(asked, views);
    }
    std::vector<std::span<const std::uint16_t>> observed;
    observers.clear();
    for (std::size_t a = 0; a < active.size(); ++a) {
      const std::size_t g = active_index[a];
      const std::span<const std::uint16_t> whole =
          intra ? std::span<const std::uint16_t>() : previous_frame ? reconstruction(g, t - 1) : std::span<const std::uint16_t>(forecasts[a]);
      for (std::uint32_t c = 0; c < shape.channels; ++c) {
        std::span<const std::uint16_t> forecast;
        if (!intra) forecast = whole.subspan(c * plane_size, plane_size);
        code_plane(g, t, c, forecast);
      }
      if (t < last_use[g]) observers.push_back(active[a]), observed.emplace_back(reconstruction(g, t));
    }
    if (!previous_frame && !observers.empty()) predictor.observe(observers, observed);
  }
}

constexpr std::size_t kNoFrame = SIZE_MAX;
constexpr std::uint32_t kChannelUnknown = UINT32_MAX;  // a GOP's searching channel, not measured yet
constexpr std::uint8_t kPricesUnknown = 0xff;  // a GOP's residual prices (codecs::ResidualPrices), not measured yet

// Losslessly a sequential GOP's second reference pays where a camera's sensor noise is new in each
// frame (ViSP's `cube` 1.8%, `line` 1.4%, mire2 0.8%, a still scene under noise 1.7% smaller; in
// auto's trial `previous` with it then beats `bidirectional`, which averaged both sides) and nowhere
// else measured (decoded video, film, hand-held colour: no frame took it), while searching its
// field and weighing the mean cost 17-47% more encoding time wherever it is weighed. So a GOP weighs
// it on its first two frames that may have one, then while at least a third of the frames weighed
// took it (docs/defaults.md, "A second reference losslessly").
struct SecondReferenceTrials {
  std::uint32_t weighed = 0, taken = 0;
  bool worth_weighing() const { return weighed < 2 || taken * 3 >= weighed; }
  void record(bool took) { ++weighed, taken += took ? 1 : 0; }
};

// Rows a plane's decoding carries through its per-pixel passes together (docs/performance.md).
constexpr std::size_t kRowsPerPass = 16;

// The mean of N planes, rounded half up: (sum + N / 2) / N, integers (the same bytes everywhere).
// N a constant, so that the division vectorizes. `out` may be one of the planes (each value is
// read before it is written), though the loop vectorizes only where it is none.
template <std::size_t N>
void mean_of(const std::array<const std::uint16_t*, N>& planes, std::span<std::uint16_t> out) {
  std::uint16_t* const o = out.data();
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint32_t sum = N / 2;
    for (std::size_t k = 0; k < N; ++k) sum += planes[k][i];
    o[i] = std::uint16_t(sum / N);
  }
}

// The mean of two forecasts, rounded up: bi-prediction.
void average(std::span<const std::uint16_t> a, std::span<const std::uint16_t> b, std::span<std::uint16_t> out) {
  mean_of<2>({a.data(), b.data()}, out);
}

// The forecast of a sequential GOP's frame from more than two references (kMoreReferencesVersion),
// one plane: `near` (frame t - 1 displaced by the frame's field), `far` (t - 2 displaced by its
// second field) and `planes[k]`, frame t - 3 - k displaced by `fields[k]` (into `scratch`, a plane
// each), their mean (mean_of) into `out`, which is none of them.
void mean_of_references(std::span<const std::uint16_t> near, std::span<const std::uint16_t> far,
                        std::span<const codecs::MotionField> fields, std::span<const std::span<const std::uint16_t>> planes,
                        std::uint32_t max_value, std::span<std::uint16_t> scratch, std::span<std::uint16_t> out) {
  const std::size_t size = out.size();
  for (std::size_t k = 0; k < fields.size(); ++k) codecs::compensate(fields[k], planes[k], scratch.subspan(k * size, size), max_value);
  if (fields.size() == 1) {
    mean_of<3>({near.data(), far.data(), scratch.data()}, out);
  } else if (fields.size() == 2) {
    mean_of<4>({near.data(), far.data(), scratch.data(), scratch.data() + size}, out);
  } else {
    throw std::logic_error("mean_of_references: one or two more references");
  }
}

// reference[t] of a sequential GOP of n frames: frame t - 1 (the key frame has none).
std::vector<std::size_t> sequential_references(std::size_t n) {
  std::vector<std::size_t> out(n, kNoFrame);
  for (std::size_t t = 1; t < n; ++t) out[t] = t - 1;
  return out;
}

// The field towards `far` (on either side of frame t) from a field towards `near`: its vectors
// scaled by the distances, negated where the two lie on different sides.
codecs::MotionField far_field(const codecs::MotionField& field, std::size_t t, std::size_t near, std::size_t far) {
  const int d_near = int(near > t ? near - t : t - near), d_far = int(far > t ? far - t : t - far);
  return codecs::scale_field(field, (near > t) == (far > t) ? d_far : -d_far, d_near);
}

// The second reference of a sequential GOP's frame t from chunk version 10: the frame before its
// reference (kNoFrame before frame 2). Such a frame may be forecast by the mean of both
// references, each displaced by a coded field of its own (two-hypothesis prediction, as video
// coders average two references: the references' noise, and at bounded modes their quantization
// error, averaged).
constexpr std::uint8_t kTwoReferenceVersion = 10;
// From chunk version 12 every frame's motion symbols (channel 0 with coded motion) start with a
// flags symbol: kBiPrediction (only where the frame has a far reference; before version 12 a symbol
// 0 or 1 of its own there, and none elsewhere), kSmoothedForecast or kWeaklySmoothed (the
// compensated forecast through codecs::smooth_forecast, strong or weak, then the planes' residuals
// against it; not both).
constexpr std::uint8_t kMotionFlagsVersion = 12;
constexpr std::uint32_t kBiPrediction = 1, kSmoothedForecast = 2, kWeaklySmoothed = 4;
std::size_t second_reference(std::size_t t) { return t >= 2 ? t - 2 : kNoFrame; }
// From chunk version 16 a sequential GOP's bi-predicted frame t may average more references: the
// flags symbol's bits from kMoreReferencesShift up count those past the second (at most
// kMaxMoreReferences: frames t - 3 and t - 4; mean_of_references). The references' noise and
// quantization errors are independent, and their mean has less of both (docs/defaults.md, "More
// references").
constexpr std::uint32_t kMoreReferencesShift = 3, kMaxMoreReferences = 2;
// The fields of frames t - 3 - k: the second field (towards t - 2) followed through the fields frames
// t - 2, t - 3 were coded with (`own[u]`: frame u's field towards u - 1, zeros where its channel 0
// took no motion): motion both sides have, no vectors coded (codecs::chain_field).
std::vector<codecs::MotionField> more_reference_fields(const codecs::MotionField& second, std::span<const codecs::MotionField> own,
                                                       std::size_t t, std::uint32_t count) {
  std::vector<codecs::MotionField> out;
  out.reserve(count);
  for (std::uint32_t k = 0; k < count; ++k) out.push_back(codecs::chain_field(k == 0 ? second : out.back(), own[t - 2 - k]));
  return out;
}

// A frame of a bidirectional GOP in coding order, forecast from the reconstructions of frames lo
// and hi on either side (hi == lo: from lo alone).
struct OrderedFrame {
  std::size_t t = 0, lo = 0, hi = 0;
  // The reference for coded motion: the nearer side (the earlier one on a tie).
  std::size_t reference() const { return hi - t < t - lo ? hi : lo; }
};

// The order of a bidirectional GOP of n frames after its key frame 0: anchor frames every
// kAnchorSpacing frames, each forecast from the anchor before it, and after each anchor the frames
// between it and the one before, the middle of every interval first (coarse to fine: SZ3's
// interpolation in time; B-frames in video coding). Measured with anchors every 2, 4, 8 and 31
// frames (one hierarchy per GOP), `--predictor bidirectional`, lossless / abs 2: mire2 2.834 / 7.626,
// 2.820 / 7.605, 2.805 / 7.473, 2.784 / 7.290; vtest (100 frames) 9.088 / 13.263, 8.400 / 12.752,
// 8.028 / 12.355, 7.960 / 11.937. Every 2 wins everywhere, and then auto's trial on a GOP's first 3
// frames codes exactly one anchor and the frame between: what the whole GOP repeats.
constexpr std::size_t kAnchorSpacing = 2;

std::vector<OrderedFrame> hierarchical_order(std::size_t n) {
  std::vector<OrderedFrame> order;
  if (n < 2) return order;
  for (std::size_t a = 0; a + 1 < n; a += kAnchorSpacing) {
    const std::size_t b = std::min(n - 1, a + kAnchorSpacing);
    order.push_back({b, a, a});
    std::vector<std::pair<std::size_t, std::size_t>> level{{a, b}}, next;
    while (!level.empty()) {
      next.clear();
      for (const auto& [lo, hi] : level) {
        if (hi - lo < 2) continue;
        const std::size_t mid = (lo + hi) / 2;
        order.push_back({mid, lo, hi});
        next.emplace_back(lo, mid);
        next.emplace_back(mid, hi);
      }
      level.swap(next);
    }
  }
  return order;
}

// The forecast of frame t from the frames lo < t < hi on either side: their linear interpolation in
// time, rounded to nearest (integers: the same bytes everywhere); from lo alone when hi == lo.
void interpolate(std::span<const std::uint16_t> a, std::span<const std::uint16_t> b, const OrderedFrame& f,
                 std::span<std::uint16_t> out) {
  if (f.hi == f.lo) {
    std::copy(a.begin(), a.end(), out.begin());
    return;
  }
  const std::uint32_t wa = std::uint32_t(f.hi - f.t), wb = std::uint32_t(f.t - f.lo), w = wa + wb;
  if (wa == wb) return average(a, b, out);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::uint16_t((a[i] * wa + b[i] * wb + w / 2) / w);
}

// Drives the frames of each GOP after its key frame in hierarchical order, identically for encoder
// and decoder: `code_plane(g, t, c, forecast)` codes or decodes each plane against its slice of the
// interpolated forecast; `reference[g][t]` is set before, the frame coded motion may refer to.
template <class CodePlane, class Reconstruction>
void run_hierarchical(const FrameShape& shape, std::span<const std::size_t> lengths, std::vector<std::vector<std::size_t>>& reference,
                      std::vector<std::vector<std::size_t>>& far_reference, CodePlane code_plane, Reconstruction reconstruction) {
  const std::size_t plane_size = std::size_t(shape.width) * shape.height;
  std::vector<std::uint16_t> forecast(shape.size());
  for (std::size_t g = 0; g < lengths.size(); ++g)
    for (const OrderedFrame& f : hierarchical_order(lengths[g])) {
      interpolate(reconstruction(g, f.lo), reconstruction(g, f.hi), f, forecast);
      reference[g][f.t] = f.reference();
      far_reference[g][f.t] = f.hi == f.lo ? kNoFrame : f.reference() == f.lo ? f.hi : f.lo;
      for (std::uint32_t c = 0; c < shape.channels; ++c)
        code_plane(g, f.t, c, std::span<const std::uint16_t>(forecast).subspan(c * plane_size, plane_size));
    }
}

}  // namespace

double mean_squared_error(std::span<const std::uint16_t> a, std::span<const std::uint16_t> b, std::uint32_t max_value) {
  if (a.size() != b.size() || a.empty() || max_value == 0) return 0;
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    sum += d * d;
  }
  return sum / double(a.size()) / (double(max_value) * double(max_value));
}

namespace {

// encode_gops with one predictor; `choice` is what the chunks record (0: the archive's predictor;
// k: its choices()[k - 1]).
// `rivals`: empty, or per GOP its ChunkRival (serialize).
// The GOPs whose spatial blocks are measured again without them (encode_with's spatial retry): the
// tables' share of a GOP's bytes is large and the frames' estimates few, the second coding cheap.
constexpr std::uint64_t kSpatialRetrySamples = std::uint64_t{1} << 22;
// The GOPs whose level maps are measured again without them (encode_with's level retry): those of
// fewer samples than this, and those whose maps' estimated saving is below this share of the
// estimates of the planes that weighed one.
constexpr std::uint64_t kLevelMapRetrySamples = std::uint64_t{1} << 20;
constexpr double kLevelMapSure = 1.0 / 32;

std::vector<EncodedGop> encode_with(const Predictor& predictor, std::uint8_t choice, const FrameShape& shape,
                                    std::span<const GopFrames* const> gops, const CodingSettings& settings,
                                    EncodeMemo* memo = nullptr, std::span<const ChunkRival> rivals = {}) {
  const std::size_t plane_size = std::size_t(shape.width) * shape.height;
  std::vector<EncodedGop> encoded(gops.size());
  std::vector<GopSymbols> coded(gops.size());
  std::vector<std::unique_ptr<GopState>> states(gops.size());
  std::vector<std::int32_t> plane_symbols(plane_size), transformed(plane_size), intra_symbols(plane_size);
  std::vector<std::uint16_t> intra_recon(plane_size), inter_literals, intra_literals, blended(plane_size);
  std::vector<std::uint32_t> block_map(codecs::forecast_block_count(shape.width, shape.height));
  std::vector<std::uint16_t> compensated(settings.coded_motion ? shape.size() : 0);
  std::vector<std::uint32_t> motion_symbols;
  // The last motion field searched per GOP (on channel 0): its vectors are the next frame's candidates.
  std::vector<codecs::MotionField> motion_hints(settings.coded_motion ? gops.size() : 0);
  // reference[g][t]: the reconstructed frame coded motion of frame t refers to (t - 1 in sequential
  // GOPs; the nearer coded neighbour in bidirectional ones).
  std::vector<std::vector<std::size_t>> reference(gops.size()), far_reference(gops.size());
  // far_reference[g][t]: in bidirectional GOPs, the coded frame on the other side; in sequential
  // ones with coded motion, frame t - 2 (second_reference; kNoFrame: none). A motion field may then
  // be used towards both (a second field of its own towards t - 2), and the two forecasts averaged.
  std::vector<std::uint16_t> bi_compensated(settings.coded_motion ? shape.size() : 0);
  std::vector<std::uint16_t> spatial_compensated(settings.coded_motion ? shape.size() : 0);
  // More references (sequential GOPs in bounded modes): [g][t], the field frame t's channel 0 was
  // coded with (zeros without motion), and scratch: frame t - 2 displaced, and a plane for each
  // further reference (mean_of_references).
  const bool more_references = settings.coded_motion && settings.second_reference && settings.more_references &&
                               !predictor.bidirectional();
  std::vector<std::vector<codecs::MotionField>> own_fields(gops.size());
  std::vector<std::uint16_t> more_far(more_references ? shape.size() : 0);
  std::vector<std::uint16_t> more_scratch(more_references ? kMaxMoreReferences * plane_size : 0);
  std::vector<std::uint8_t> spatial_used(gops.size(), 0);  // [g]: a frame took spatial blocks
  // [g]: the frame estimates' saving by spatial blocks, and the estimates of the frames that searched motion.
  std::vector<std::uint64_t> spatial_saving(gops.size(), 0), motion_estimate(gops.size(), 0);
  codecs::ResidualBits residual_bits;  // for the motion search, at residual_bits_tolerance
  std::uint32_t residual_bits_tolerance = 0;
  std::pair<std::size_t, std::size_t> channel0_motion{SIZE_MAX, SIZE_MAX};  // (GOP, frame) whose channel 0 took motion

  const bool fallback_blocks = predictor.block_fallback();
  // Colour frames: each plane's symbols (before any channel reference or spatial transform) wait
  // here until the frame's last plane is coded; a frame whose planes may be coded against each
  // other then goes to the GOP's symbols as it is, with the estimates of every channel reference,
  // and is recoded in the order and with the references of its GOP's channel plan when the GOP is
  // done (codecs/transform/channel_plan.hpp); any other goes out at once, in storage order.
  const bool colour = shape.channels > 1;
  struct PendingPlane {
    std::vector<std::int32_t> symbols;
    std::vector<std::uint8_t> side;  // the plane's side classes (zeros where intra)
    bool present = false, intra = false;
    std::optional<codecs::TransformChoice> own;  // its estimate as it is, where code_plane made one
  };
  std::array<PendingPlane, 3> pending;
  if (colour)
    for (auto& p : pending) p.symbols.resize(plane_size), p.side.resize(plane_size);
  std::vector<std::int32_t> channel_scratch(colour ? plane_size : 0);
  std::vector<std::uint8_t> plane_side(plane_size), side_scratch(colour ? 3 * plane_size : 0);
  // Interpolated planes (kInterpolatedPlane): gray, lossless or uniform tolerances, the linear
  // quantizer's symbols; their forecast of zeros, symbols and reconstruction.
  const bool interpolated_planes = !colour && settings.smooth_modes && !settings.bound.pointwise();
  std::vector<std::uint16_t> zeros(interpolated_planes ? plane_size : 0, 0), zero_recon(zeros.size()), zero_literals;
  std::vector<std::int32_t> zero_symbols(zeros.size()), inter_transformed(zeros.size()), residual_symbols(zeros.size());
  std::vector<std::uint16_t> residual_recon(zeros.size());
  // Lossless planes coded through their level maps (codecs::LevelMap): the plane's indices and its
  // forecast's.
  const bool level_maps = settings.level_maps && settings.bound.mode == codecs::BoundMode::Lossless;
  std::vector<std::uint16_t> level_plane(level_maps ? plane_size : 0), level_forecast(level_plane.size());
  std::vector<std::uint32_t> level_runs;  // a map's symbols, for the estimate of its bits
  // [g]: the estimates of the planes that had a level map to weigh, and what the maps taken saved by them.
  std::vector<double> level_estimates(gops.size(), 0), level_savings(gops.size(), 0);
  struct RelatedFrame {
    std::size_t t = 0, offset = 0;  // its planes' symbols start at s.symbols[offset], in storage order
    std::array<bool, 3> intra{};
    codecs::ChannelCosts costs;
  };
  std::vector<std::vector<RelatedFrame>> related_frames(gops.size());
  // A plane's symbols as the chunk stores them (after its channel reference and spatial transform),
  // in place: in the polyphase layout (codecs/transform/polyphase.hpp), its side classes with them, where the
  // contexts' estimate of that is the smaller. Offered to planes coded spatially (`intra`) and to
  // the colour transform's chroma planes (held in 2 x 2 blocks where the video was 4:2:0; offered
  // to every forecast plane, gray and bounded ones took it on the estimate's errors: mbt/cube
  // +1.7%, box at abs 2 +2.1%, docs/defaults.md). Returns the mode flag to add.
  std::vector<std::int32_t> polyphase_symbols(plane_size);
  std::vector<std::uint8_t> polyphase_side(plane_size);
  auto maybe_polyphase = [&](std::vector<std::int32_t>& symbols, std::span<std::uint8_t> side, bool intra,
                             std::size_t channel) -> std::uint8_t {
    if (!settings.polyphase || shape.width < 2 || shape.height < 2) return 0;
    if (!intra && !(settings.transformed_chroma && channel > 0)) return 0;
    const double polyphase_cost = double(codecs::estimate_context_cost(symbols, shape.width, true));
    if (polyphase_cost >= kPolyphaseGain * double(codecs::estimate_context_cost(symbols, shape.width))) return 0;
    codecs::to_polyphase(std::span<const std::int32_t>(symbols), shape.width, std::span<std::int32_t>(polyphase_symbols));
    symbols.swap(polyphase_symbols);
    if (!intra) {  // an intra plane's side classes are zeros in either layout
      codecs::to_polyphase(std::span<const std::uint8_t>(side), shape.width, std::span<std::uint8_t>(polyphase_side));
      std::copy(polyphase_side.begin(), polyphase_side.end(), side.begin());
    }
    return kPolyphaseFlag;
  };
  auto emit_symbols = [&](GopSymbols& s, std::vector<std::int32_t>& symbols, std::span<std::uint8_t> side, bool intra,
                          PlaneTransform transform, std::uint8_t& mode, std::size_t channel) {
    std::vector<std::int32_t>* stored = &symbols;
    if (!intra) {
      codecs::forward_transform(transform, symbols, shape.width, transformed);
      stored = &transformed;
    }
    mode |= maybe_polyphase(*stored, side, intra, channel);
    s.side.insert(s.side.end(), side.begin(), side.end());
    append_zigzagged(s.symbols, *stored);
  };
  // A plane's symbols: to the stream (gray), or to wait for the rest of the frame (colour: the
  // buffer is swapped with the plane's pending one, which `symbols` then holds, to be written over:
  // its last use). Inter planes come with their estimate (which holds their spatial transform).
  // `plane_side` holds the plane's side classes (put_symbols zeroes it for intra planes).
  auto put_symbols = [&](GopSymbols& s, std::size_t c, std::vector<std::int32_t>& symbols, bool intra,
                         std::optional<codecs::TransformChoice> own, PlaneRecord& record) {
    if (intra) std::fill(plane_side.begin(), plane_side.end(), std::uint8_t{0});
    if (!colour) return emit_symbols(s, symbols, plane_side, intra, own ? own->transform : PlaneTransform::None, record.mode, c);
    PendingPlane& p = pending[c];
    p.symbols.swap(symbols);
    p.side.swap(plane_side);
    p.present = true, p.intra = intra, p.own = own;
  };
  auto put_colour_frame = [&](std::size_t g, std::size_t t) {
    GopSymbols& s = coded[g];
    std::vector<PlaneRecord>& records = s.planes[t];
    s.channel_plans[t] = codecs::ChannelPlan().byte();
    const std::size_t present = std::size_t(std::count_if(pending.begin(), pending.end(), [](const PendingPlane& p) { return p.present; }));
    if (present == 0) return;  // interval-coded planes
    if (present != 3) throw std::logic_error("a colour frame with symbols in only some of its planes");
    for (auto& p : pending) p.present = false;
    // Only where the planes' symbols are bin indices of one width: equal uniform tolerances
    // (pwrel bins follow each pixel's forecast, rel tolerances each channel's range; measured on
    // vtest at pwrel 0.05: channel deltas chosen by the estimate grew the archive 1.3%).
    if (!settings.bound.pointwise() && records[0].tolerance == records[1].tolerance &&
        records[1].tolerance == records[2].tolerance) {
      RelatedFrame f{t, s.symbols.size(), {pending[0].intra, pending[1].intra, pending[2].intra}, {}};
      f.costs = codecs::estimate_channel_costs({pending[0].symbols, pending[1].symbols, pending[2].symbols}, f.intra,
                                               shape.width, channel_scratch, {pending[0].own, pending[1].own, pending[2].own},
                                               settings.smooth_modes);
      related_frames[g].push_back(f);
      for (const auto& p : pending) append_zigzagged(s.symbols, p.symbols), s.side.insert(s.side.end(), p.side.begin(), p.side.end());
      return;
    }
    for (std::size_t k = 0; k < 3; ++k) {
      const auto transform = pending[k].own ? pending[k].own->transform : PlaneTransform::None;
      if (!pending[k].intra) records[k].mode = std::uint8_t((records[k].mode & kModeFlags) | std::uint8_t(transform));
      emit_symbols(s, pending[k].symbols, pending[k].side, pending[k].intra, transform, records[k].mode, k);
    }
  };
  // A related frame's planes in the order and with the references of `plan`, each with the
  // spatial transform its estimate chose, zigzagged into `out` (3 planes; may be the frame's own
  // place in s.symbols); sets the planes' modes.
  auto code_colour_frame = [&](GopSymbols& s, const RelatedFrame& f, const codecs::ChannelPlan& plan, std::span<std::uint32_t> out) {
    for (std::size_t k = 0; k < 3; ++k) {
      const auto zigzagged = std::span<const std::uint32_t>(s.symbols).subspan(f.offset + k * plane_size, plane_size);
      std::transform(zigzagged.begin(), zigzagged.end(), pending[k].symbols.begin(), codecs::unzigzag);
    }
    const auto choice = codecs::plan_cost(f.costs, plan);
    const auto& order = plan.order;
    // The planes' side classes follow them into the plan's order.
    std::copy_n(s.side.begin() + std::ptrdiff_t(f.offset), 3 * plane_size, side_scratch.begin());
    for (std::size_t p = 0; p < 3; ++p)
      std::copy_n(side_scratch.begin() + std::ptrdiff_t(order[p] * plane_size), plane_size,
                  s.side.begin() + std::ptrdiff_t(f.offset + p * plane_size));
    for (std::size_t p = 0; p < 3; ++p) {
      const std::size_t k = order[p];
      codecs::apply_channel_ref(plan.ref(p), pending[k].symbols, pending[order[0]].symbols, pending[order[1]].symbols,
                                channel_scratch);
      std::uint8_t& mode = s.planes[f.t][k].mode;
      if (!f.intra[k]) {
        mode = std::uint8_t((mode & kModeFlags) | std::uint8_t(choice.transform[p]));
        codecs::forward_transform(choice.transform[p], channel_scratch, shape.width, transformed);
        channel_scratch.swap(transformed);
      }
      mode |= maybe_polyphase(channel_scratch, std::span<std::uint8_t>(s.side).subspan(f.offset + p * plane_size, plane_size),
                              f.intra[k], k);
      std::transform(channel_scratch.begin(), channel_scratch.end(), out.begin() + std::ptrdiff_t(p * plane_size), codecs::zigzag);
    }
  };
  // When a GOP is done: a channel order for its key frame and one for the frames after it (each
  // group has its own tables in the entropy coder), each frame's references in that order, and
  // its frames recoded by them, in place.
  auto finish_colour_gop = [&](std::size_t g) {
    GopSymbols& s = coded[g];
    std::vector<codecs::ChannelCosts> costs;
    for (const bool key : {true, false}) {
      costs.clear();
      for (const auto& f : related_frames[g])
        if ((f.t == 0) == key) costs.push_back(f.costs);
      if (costs.empty()) continue;
      const auto order = codecs::choose_channel_order(costs);
      for (const auto& f : related_frames[g]) {
        if ((f.t == 0) != key) continue;
        const auto plan = codecs::choose_channel_refs(f.costs, order);
        s.channel_plans[f.t] = plan.byte();
        code_colour_frame(s, f, plan, std::span<std::uint32_t>(s.symbols).subspan(f.offset, 3 * plane_size));
      }
    }
    related_frames[g].clear();
  };
  // Coded block motion (codecs/transform/block_motion.hpp), decided per frame: one channel searches the
  // vectors against its previous reconstruction, and every channel is displaced by them, so that
  // channel deltas still find aligned residuals (measured on colour video: with vectors or
  // decisions per channel, the deltas of channels 1 and 2 cost 25% more and the archive grew).
  // Motion is kept where the estimated cost of all channels' residuals plus the vectors is below
  // the forecast's. Fills `compensated` (all channels) and motion_symbols; returns the decision.
  // The searching channel (search_channel) is each GOP's own, measured in bounded modes with a
  // uniform tolerance at its first frame with motion: every channel's field, the frame's estimate
  // with each, the smallest kept (the decoder reads the vectors whichever channel found them).
  // Channel 0 alone, as before, gave the same pixels a 4% larger archive from a PNG folder (blue
  // first) than from RGB arrays on the film clip at abs 2 (docs/defaults.md, "The channel that
  // searches the motion").
  const std::size_t cost_size = settings.coded_motion ? plane_size : 0;
  std::array<std::vector<std::int32_t>, 2> cost_symbols{std::vector<std::int32_t>(cost_size), std::vector<std::int32_t>(cost_size)};
  std::vector<std::int32_t> cost_delta(cost_size);
  std::vector<std::uint16_t> cost_recon(cost_size);
  std::vector<std::uint16_t> cost_literals;
  // A plane that keeps its forecast (chroma_keeps_forecast) has the same residual under every
  // field a frame's choice weighs: quantized and estimated at the frame's first estimate, then
  // reused (cup at abs 2: 2 of every 3 planes' estimates in transformed GOPs).
  struct KeptPlane {
    bool known = false;
    std::uint32_t tolerance = 0;
    std::vector<std::int32_t> symbols;
    std::array<std::uint64_t, 2> cost{UINT64_MAX, UINT64_MAX};  // by in_context
    std::array<std::uint64_t, 2> cost_as_delta{UINT64_MAX, UINT64_MAX};  // of its difference from the kept plane before it
  };
  std::vector<KeptPlane> kept_planes(settings.coded_motion && settings.transformed_chroma ? shape.channels : 0);
  std::vector<std::uint32_t> search_channel(gops.size(), kChannelUnknown);
  std::vector<std::uint8_t> search_prices(gops.size(), kPricesUnknown), far_prices(gops.size(), kPricesUnknown);
  std::vector<SecondReferenceTrials> second_trials(gops.size());
  auto choose_motion = [&](std::size_t g, std::size_t t, const std::uint16_t* frame, const std::uint16_t* frame_forecast,
                           std::span<const std::uint16_t> forecast0, std::uint32_t tolerance0) {
    motion_symbols.clear();
    const std::uint16_t* previous_frame = encoded[g].reconstruction[reference[g][t]].data();
    codecs::MotionField& hint = motion_hints[g];
    const bool uniform = !settings.bound.pointwise();
    const bool interval = settings.quantizer == QuantizerKind::Interval && settings.bound.mode != codecs::BoundMode::Lossless;
    // Channel k of a frame, a plane.
    const auto channel = [&](const std::uint16_t* f, std::uint32_t k) {
      return std::span<const std::uint16_t>(f + k * plane_size, plane_size);
    };
    // The frame's estimates below measure the planes as code_plane codes them (keeps_forecast).
    const auto keeps_forecast = [&](std::uint32_t k) { return chroma_keeps_forecast(settings, k); };
    auto compensate_all = [&](const codecs::MotionField& f, std::vector<std::uint16_t>& out) {
      for (std::uint32_t k = 0; k < shape.channels; ++k)
        if (keeps_forecast(k))
          std::copy_n(frame_forecast + k * plane_size, plane_size, out.begin() + std::ptrdiff_t(k * plane_size));
        else
          codecs::compensate(f, channel(previous_frame, k), std::span<std::uint16_t>(out).subspan(k * plane_size, plane_size),
                             shape.max_value);
    };
    // A plane's estimate: its best transform's order-0 estimate, or (in_context) the contexts'
    // estimate of the plane under that transform, as the striped rANS coder codes it.
    std::vector<std::int32_t> cost_transformed;
    const auto plane_estimate = [&](const std::vector<std::int32_t>& symbols, bool in_context) {
      const auto choice = codecs::choose_transform(symbols, shape.width, codecs::simd_path(), settings.smooth_modes);
      if (!in_context) return choice.cost;
      cost_transformed.resize(symbols.size());
      codecs::forward_transform(choice.transform, symbols, shape.width, cost_transformed);
      return codecs::estimate_context_cost(cost_transformed, shape.width);
    };
    // Planes that keep their forecast are the same in every estimate of this frame (kept_planes).
    for (auto& kept : kept_planes) kept.known = false;
    // The estimate of the frame's residuals: each channel as it is, or as its difference from the
    // previous channel where the tolerances allow and that is smaller (a cheap stand-in for the
    // channel plan the GOP will take).
    auto frame_cost = [&](auto forecast_of, bool in_context = false) {
      std::uint64_t total = 0;
      std::uint32_t previous_tolerance = 0;
      const std::vector<std::int32_t>* previous = nullptr;  // the channel before's symbols
      for (std::uint32_t k = 0; k < shape.channels; ++k) {
        KeptPlane* kept = keeps_forecast(k) ? &kept_planes[k] : nullptr;
        std::vector<std::int32_t>& symbols = kept ? kept->symbols : cost_symbols[k % 2];
        std::uint32_t tolerance = kept ? kept->tolerance : 0;
        if (!kept || !kept->known) {
          const std::span<const std::uint16_t> p(frame + k * plane_size, plane_size);
          tolerance = k == 0 ? tolerance0 : plane_tolerance(settings, p, shape.max_value, k);
          cost_literals.clear();
          const auto bound = plane_bound(settings, tolerance, shape.max_value);
          symbols.resize(plane_size);
          codecs::quantize_plane(p, forecast_of(k), bound, symbols,
                                 bound.lossless() ? std::span<std::uint16_t>() : std::span<std::uint16_t>(cost_recon), cost_literals);
          if (kept) *kept = KeptPlane{true, tolerance, std::move(kept->symbols)};
        }
        const auto estimate = [&](std::uint64_t* known, auto&& of) {
          if (known && *known != UINT64_MAX) return *known;
          const std::uint64_t cost = of();
          if (known) *known = cost;
          return cost;
        };
        std::uint64_t cost = estimate(kept ? &kept->cost[in_context] : nullptr, [&] { return plane_estimate(symbols, in_context); });
        if (k > 0 && uniform && tolerance == previous_tolerance) {
          // The difference of two kept planes is the same in every estimate of the frame too.
          const bool both_kept = kept && keeps_forecast(k - 1);
          cost = std::min(cost, estimate(both_kept ? &kept->cost_as_delta[in_context] : nullptr, [&] {
            for (std::size_t i = 0; i < plane_size; ++i) cost_delta[i] = symbols[i] - (*previous)[i];
            return plane_estimate(cost_delta, in_context);
          }));
        }
        total += cost;
        previous = &symbols;
        previous_tolerance = tolerance;
      }
      return total;
    };
    // The plane estimates sample every cost_sample_step-th row; the vectors count in the same units.
    auto vector_cost_of = [&](const std::vector<std::uint32_t>& symbols) {
      std::vector<std::int32_t> signed_symbols(symbols.size());
      std::transform(symbols.begin(), symbols.end(), signed_symbols.begin(), codecs::unzigzag);
      return codecs::estimate_cost_rows(signed_symbols) / codecs::cost_sample_step(shape.height);
    };
    auto cost_with = [&](const std::vector<std::uint16_t>& forecasts, bool in_context = false) {
      return frame_cost([&](std::uint32_t k) { return std::span<const std::uint16_t>(forecasts).subspan(k * plane_size, plane_size); },
                        in_context);
    };
    // The search of channel c against `reference_plane` (that channel of a reference frame), its
    // candidates from `candidates` (through the memo), residuals estimated with c's tolerance.
    std::uint32_t c = 0;  // the searching channel
    std::uint32_t tolerance_c = tolerance0;
    // The residual prices a GOP chose (search_prices[g] or far_prices[g]), the measured ones until it
    // has (settings.measured_residual_prices).
    const auto prices_of = [&](std::uint8_t chosen) {
      if (!settings.measured_residual_prices) return codecs::ResidualPrices::table;
      return chosen == kPricesUnknown ? codecs::ResidualPrices::measured : codecs::ResidualPrices(chosen);
    };
    auto search = [&](std::span<const std::uint16_t> reference_plane, const codecs::MotionField& candidates,
                      codecs::ResidualPrices prices) {
      const std::span<const std::uint16_t> plane = channel(frame, c);
      EncodeMemo::Key key{};
      if (memo) {
        EncodeMemo::Hasher h;
        h.add(plane).add(reference_plane).value(shape.width).value(shape.max_value).value(uniform ? tolerance_c : UINT32_MAX);
        h.value(std::uint8_t(prices));
        h.value(candidates.width).value(candidates.height).add(std::span<const codecs::MotionVector>(candidates.units));
        h.add(std::span<const std::uint8_t>(candidates.modes));
        key = h.key();
        if (const codecs::MotionSearch* known = memo->search(key)) return *known;
      }
      codecs::MotionSearch found = codecs::search_motion(plane, reference_plane, shape.width,
                                                         candidates.units.empty() ? nullptr : &candidates,
                                                         uniform ? &residual_bits : nullptr, shape.max_value,
                                                         codecs::simd_path(), prices);
      if (memo) memo->keep(key, found);
      return found;
    };
    // Channel k searches from here on, its residuals estimated with its tolerance's bits.
    auto use_channel = [&](std::uint32_t k) {
      c = k;
      tolerance_c = k == 0 ? tolerance0 : plane_tolerance(settings, channel(frame, k), shape.max_value, k);
      if (uniform && (residual_bits.bits.empty() || residual_bits_tolerance != tolerance_c)) {
        residual_bits = codecs::ResidualBits::uniform(shape.max_value, tolerance_c);
        residual_bits_tolerance = tolerance_c;
      }
    };
    // A frame whose channels' fields all estimate the same (a repeated frame) decides nothing:
    // the GOP's next frame measures again.
    std::uint32_t searching = search_channel[g] == kChannelUnknown ? 0 : search_channel[g];
    std::optional<codecs::MotionSearch> kept;  // the measured channel's search, not run again below
    // The frame's estimate with a search's field: its vectors and every channel's residual.
    const auto field_cost = [&](const codecs::MotionSearch& m, bool in_context = false) {
      compensate_all(m.field, spatial_compensated);
      std::vector<std::uint32_t> symbols;
      codecs::append_motion_symbols(m.field, symbols);
      return vector_cost_of(symbols) + cost_with(spatial_compensated, in_context);
    };
    if (search_channel[g] == kChannelUnknown) {
      const bool measure = settings.measured_motion_channel && shape.channels > 1 && !interval && uniform &&
                           settings.bound.mode != codecs::BoundMode::Lossless;
      if (!measure) search_channel[g] = 0;
      std::uint64_t best = UINT64_MAX, worst = 0;
      for (std::uint32_t k = 0; measure && k < shape.channels; ++k) {
        use_channel(k);
        codecs::MotionSearch trial = search(channel(previous_frame, k), hint, prices_of(search_prices[g]));
        const std::uint64_t cost = field_cost(trial);
        if (cost < best) best = cost, searching = k, kept = std::move(trial);
        worst = std::max(worst, cost);
      }
      if (measure && best < worst) search_channel[g] = searching;
    }
    use_channel(searching);
    const std::span<const std::uint16_t> plane = channel(frame, c), near_plane = channel(previous_frame, c);
    codecs::MotionSearch found = kept ? std::move(*kept) : search(near_plane, hint, prices_of(search_prices[g]));
    // The GOP's prices, measured at its first frame with motion as its channel is: the fields
    // found by the uniform table, by the order-0 prices the residual shows and by those prices in
    // context, and the frame's estimate with each; a frame where the table's and the order-0
    // prices' fields estimate the same (a repeated frame) decides nothing. The estimate is the
    // striped coder's contexts' (settings.context_price_estimate), whose choice codes mbt/cube
    // at abs 2 2.3% and gray vtest losslessly 0.3-0.7% smaller than the order-0 estimate's
    // (docs/defaults.md, "The price choice judged in context"; the prices themselves: "Measured
    // residual prices for the motion search", "Residual prices in context for the motion search").
    if (uniform && settings.measured_residual_prices && search_prices[g] == kPricesUnknown) {
      const bool in_context = settings.context_price_estimate;
      codecs::MotionSearch other = search(near_plane, hint, codecs::ResidualPrices::table);
      const std::uint64_t cost[2] = {field_cost(found, in_context), field_cost(other, in_context)};
      if (cost[1] < cost[0]) found = std::move(other);
      if (cost[0] != cost[1])
        search_prices[g] = std::uint8_t(cost[1] < cost[0] ? codecs::ResidualPrices::table : codecs::ResidualPrices::measured);
      // auto's trial, judging by the order-0 estimate, leaves lossless residuals' prices in context
      // out: of 8 lossless clips none changed, and their encoding took 2-4% less time.
      if (in_context || tolerance_c > 0) {
        codecs::MotionSearch third = search(near_plane, hint, codecs::ResidualPrices::contextual);
        if (field_cost(third, in_context) < std::min(cost[0], cost[1])) {
          found = std::move(third);
          search_prices[g] = std::uint8_t(codecs::ResidualPrices::contextual);
        }
      }
    }
    hint = std::move(found.field);
    std::uint64_t forecast_sad = found.zero_sad;
    if (forecast0.data() != previous_frame) {
      forecast_sad = 0;
      const std::uint16_t* f = c == 0 ? forecast0.data() : frame_forecast + c * plane_size;  // channel 0's may be mapped
      for (std::size_t i = 0; i < plane_size; ++i) forecast_sad += std::uint64_t(std::abs(int(plane[i]) - int(f[i])));
    }
    // A sequential GOP's second reference: in bounded modes on every frame, where the mean of two
    // references averages their quantization error (abs 2: mire2 7.3%, colour vtest 6.3% smaller;
    // pwrel 0.05: mire2 6.8%); losslessly where the GOP's frames take it (SecondReferenceTrials).
    const std::size_t far = far_reference[g][t];
    const bool sequential = !predictor.bidirectional();
    const bool bounded = uniform ? tolerance0 > 0 : settings.bound.mode != codecs::BoundMode::Lossless;
    const bool second = sequential && settings.second_reference && (bounded || second_trials[g].worth_weighing());
    // A frame whose search finds nothing better than its forecast is left as it is, but where a
    // second reference may average it (a static scene's noise and quantization error): its field
    // is then zeros, and the mean of references weighed as for any field.
    const bool quiet = found.sad >= forecast_sad - forecast_sad / 64;
    if (quiet && (interval || !second || far == kNoFrame)) return false;  // not worth estimating
    // The hint stays the searched vectors: the next frame's candidates.
    codecs::MotionField field = quiet ? codecs::MotionField(shape.width, shape.height) : hint;
    compensate_all(field, compensated);
    codecs::append_motion_symbols(field, motion_symbols);
    if (interval) {
      motion_symbols.insert(motion_symbols.begin(), 0u);  // flags: one side only, not smoothed
      return found.sad + found.vector_bits < forecast_sad - forecast_sad / 32;
    }
    std::uint64_t vector_cost = vector_cost_of(motion_symbols);
    std::uint64_t with = vector_cost + cost_with(compensated);
    // Spatial blocks (their DC as the forecast, so that the median transform predicts them from
    // their own pixels) where the blocks' estimate says so, kept when the frame's estimate agrees;
    // the GOP is then measured without them too (below).
    std::uint64_t spatial_gain = 0;  // the estimate's saving where spatial blocks were taken
    if (uniform && settings.spatial_blocks) {
      codecs::MotionField spatial = field;
      if (codecs::choose_spatial_blocks(spatial, plane, near_plane, channel(compensated.data(), c), residual_bits) > 0) {
        compensate_all(spatial, spatial_compensated);
        std::vector<std::uint32_t> symbols;
        codecs::append_motion_symbols(spatial, symbols);
        const std::uint64_t spatial_vectors = vector_cost_of(symbols);
        if (const std::uint64_t cost = spatial_vectors + cost_with(spatial_compensated); cost + cost / 64 < with) {
          spatial_gain = with - cost;
          with = cost;
          vector_cost = spatial_vectors;
          field = std::move(spatial);
          compensated.swap(spatial_compensated);
          motion_symbols = std::move(symbols);
        }
      }
    }
    const std::uint64_t without = frame_cost([&](std::uint32_t k) {
      return k == 0 ? forecast0 : std::span<const std::uint16_t>(frame_forecast + k * plane_size, plane_size);
    });
    std::uint32_t flags = 0;  // the frame's flags symbol (kBiPrediction, kSmoothedForecast, kWeaklySmoothed)
    if (far != kNoFrame && (!sequential || second)) {
      // Bi-prediction: the field towards the far side too, and the mean of both displaced frames
      // (what averaging both sides gains on noise, with motion). The flags symbol says which was taken.
      // Bidirectional GOPs scale the field to the other side; a sequential GOP's second reference
      // has a field of its own, searched from the scaled one, whose symbols follow the first's.
      const std::uint16_t* far_frame = encoded[g].reconstruction[far].data();
      codecs::MotionField towards_far = far_field(field, t, reference[g][t], far);
      std::vector<std::uint32_t> far_symbols;
      // The mean of both displaced frames into `out`, and the frame's estimate with it.
      const auto bi_cost = [&](const codecs::MotionField& f, const std::vector<std::uint32_t>& symbols,
                               std::vector<std::uint16_t>& out) {
        for (std::uint32_t k = 0; k < shape.channels; ++k) {
          const auto mean = std::span<std::uint16_t>(out).subspan(k * plane_size, plane_size);
          const auto near = std::span<const std::uint16_t>(compensated).subspan(k * plane_size, plane_size);
          if (keeps_forecast(k)) {
            std::copy(near.begin(), near.end(), mean.begin());
            continue;
          }
          codecs::compensate(f, std::span<const std::uint16_t>(far_frame + k * plane_size, plane_size), mean, shape.max_value);
          average(near, mean, mean);
        }
        return vector_cost + (symbols.empty() ? 0 : vector_cost_of(symbols)) +
               frame_cost([&](std::uint32_t k) { return std::span<const std::uint16_t>(out).subspan(k * plane_size, plane_size); });
      };
      std::uint64_t bi = 0;
      if (!sequential) {
        bi = bi_cost(towards_far, far_symbols, bi_compensated);
      } else {
        // The far field's prices are the GOP's own too, measured as the near field's are (at the
        // GOP's first frame with a second reference): measured prices there took mire2 at abs 2
        // 0.4% up and colour vtest 2.4% down against the uniform table.
        const codecs::MotionField scaled = std::move(towards_far);
        // Losslessly the near field's prices serve, unmeasured: the trial stays cheap where it loses.
        const bool measure = bounded && uniform && settings.measured_residual_prices && far_prices[g] == kPricesUnknown;
        towards_far = search(channel(far_frame, c), scaled, prices_of(bounded ? far_prices[g] : search_prices[g])).field;
        codecs::append_motion_symbols(towards_far, far_symbols);
        bi = bi_cost(towards_far, far_symbols, bi_compensated);
        if (measure) {
          codecs::MotionField other = search(channel(far_frame, c), scaled, codecs::ResidualPrices::table).field;
          std::vector<std::uint32_t> other_symbols;
          codecs::append_motion_symbols(other, other_symbols);
          const std::uint64_t other_bi = bi_cost(other, other_symbols, spatial_compensated);
          if (other_bi != bi)
            far_prices[g] = std::uint8_t(other_bi < bi ? codecs::ResidualPrices::table : codecs::ResidualPrices::measured);
          if (other_bi < bi) {
            towards_far = std::move(other), far_symbols = std::move(other_symbols), bi = other_bi;
            bi_compensated.swap(spatial_compensated);
          }
        }
      }
      const std::uint64_t far_vectors = far_symbols.empty() ? 0 : vector_cost_of(far_symbols);
      // More references (kMoreReferencesVersion): frames t - 3, then t - 4, in the mean too, each
      // displaced by the second field chained through the fields of the frames between
      // (more_reference_fields), while the frame's estimate falls.
      std::uint32_t more = 0;
      if (more_references && (bounded || bi < with)) {  // losslessly where the mean of two paid
        const std::span<const std::uint16_t> near_frame(compensated);
        if (t >= 3)  // frame t - 2 displaced by the second field, each plane
          for (std::uint32_t k = 0; k < shape.channels; ++k)
            if (!keeps_forecast(k))
              codecs::compensate(towards_far, std::span<const std::uint16_t>(far_frame + k * plane_size, plane_size),
                                 std::span<std::uint16_t>(more_far).subspan(k * plane_size, plane_size), shape.max_value);
        for (std::uint32_t n = 1; n <= kMaxMoreReferences && t >= 2 + n; ++n) {
          const std::vector<codecs::MotionField> fields = more_reference_fields(towards_far, own_fields[g], t, n);
          for (std::uint32_t k = 0; k < shape.channels; ++k) {
            const auto out = std::span<std::uint16_t>(spatial_compensated).subspan(k * plane_size, plane_size);
            const auto near = near_frame.subspan(k * plane_size, plane_size);
            if (keeps_forecast(k)) {
              std::copy(near.begin(), near.end(), out.begin());
              continue;
            }
            std::array<std::span<const std::uint16_t>, kMaxMoreReferences> planes;
            for (std::uint32_t e = 0; e < n; ++e)
              planes[e] = std::span<const std::uint16_t>(encoded[g].reconstruction[t - 3 - e].data() + k * plane_size, plane_size);
            mean_of_references(near, std::span<const std::uint16_t>(more_far).subspan(k * plane_size, plane_size), fields,
                               std::span(planes).first(n), shape.max_value, more_scratch, out);
          }
          const std::uint64_t cost = vector_cost + far_vectors + cost_with(spatial_compensated);
          if (cost >= bi) break;
          bi = cost, more = n;
          bi_compensated.swap(spatial_compensated);
        }
      }
      if (sequential && !bounded) second_trials[g].record(bi < with);
      if (bi < with) {
        compensated.swap(bi_compensated), with = bi;
        vector_cost += far_vectors;
        motion_symbols.insert(motion_symbols.end(), far_symbols.begin(), far_symbols.end());
        flags |= kBiPrediction | more << kMoreReferencesShift;
      }
    }
    // The forecast smoothed (smooth_forecast) where the frame's estimate says so, in bounded modes:
    // the references' quantization error and noise averaged over a pixel's neighbours, where a
    // sharper forecast gained nothing (docs/ratio_gaps.md: longer interpolation filters lost at
    // abs 2). Losslessly a smoothed forecast misses the exact repeats (cup +4% estimated).
    if (bounded && settings.smoothed_forecast) {
      // Both strengths (camera and film differ: cup took the strong one, Megamind the weak), each
      // into a scratch frame, the better kept where it beats the forecast as it is.
      std::vector<std::uint16_t>* best = nullptr;
      std::uint32_t best_flag = 0;
      for (const auto& [strength, flag, out] :
           {std::tuple{codecs::Smoothing::strong, kSmoothedForecast, &bi_compensated},
            std::tuple{codecs::Smoothing::weak, kWeaklySmoothed, &spatial_compensated}}) {
        for (std::uint32_t k = 0; k < shape.channels; ++k) {
          const auto in = std::span<const std::uint16_t>(compensated).subspan(k * plane_size, plane_size);
          if (keeps_forecast(k))
            std::copy(in.begin(), in.end(), out->begin() + std::ptrdiff_t(k * plane_size));
          else
            codecs::smooth_forecast(in, shape.width, std::span<std::uint16_t>(*out).subspan(k * plane_size, plane_size), strength);
        }
        if (const std::uint64_t cost = vector_cost + cost_with(*out); cost < with) with = cost, best = out, best_flag = flag;
      }
      if (best != nullptr) {
        compensated.swap(*best);
        flags |= best_flag;
      }
    }
    motion_symbols.insert(motion_symbols.begin(), flags);
    motion_estimate[g] += std::min(with, without);
    if (spatial_gain > 0 && with < without) {
      spatial_used[g] = true;
      spatial_saving[g] += spatial_gain;
    }
    return with < without;
  };
  // The intra predictor of the colour frame (GOP, frame) whose planes are being coded.
  std::pair<std::pair<std::size_t, std::size_t>, codecs::IntraPredictor> frame_intra{{SIZE_MAX, SIZE_MAX}, {}};
  auto code_plane = [&](std::size_t g, std::size_t t, std::size_t c, std::span<const std::uint16_t> forecast) {
    // The predictor's forecast of the whole frame (the channels' planes follow each other), before
    // any per-block map replaces this plane's.
    const std::uint16_t* frame_forecast = forecast.empty() ? nullptr : forecast.data() - c * plane_size;
    const auto& frame = (*gops[g])[t];
    std::span<const std::uint16_t> plane(frame.data() + c * plane_size, plane_size);
    std::span<std::uint16_t> recon(encoded[g].reconstruction[t].data() + c * plane_size, plane_size);
    GopSymbols& s = coded[g];
    PlaneRecord record;
    record.tolerance = plane_tolerance(settings, plane, shape.max_value, c);
    auto bound = plane_bound(settings, record.tolerance, shape.max_value);
    bool mapped = false;
    if (!forecast.empty() && fallback_blocks) {
      const std::span<const std::uint16_t> previous(encoded[g].reconstruction[t - 1].data() + c * plane_size, plane_size);
      // Candidates: the predictor's forecast, the per-block choice (by absolute error), and the
      // previous frame everywhere. Absolute error alone misleads on video whose previous-frame
      // residual is zero runs and codec noise (measured: vtest lost 15%), so the coded-size estimate
      // of each candidate's residual decides.
      const bool any = codecs::choose_forecast_blocks(plane, forecast, previous, shape.width, block_map);
      if (any) codecs::build_forecast(block_map, forecast, previous, shape.width, blended);
      std::uint32_t choice = 0;  // 0 primary, 1 per-block map, 2 previous frame
      if (settings.quantizer == QuantizerKind::Linear || settings.bound.mode == codecs::BoundMode::Lossless) {
        auto cost = [&](std::span<const std::uint16_t> candidate) {
          inter_literals.clear();
          codecs::quantize_plane(plane, candidate, bound, plane_symbols, recon, inter_literals);
          return codecs::choose_transform(plane_symbols, shape.width, codecs::simd_path(), settings.smooth_modes).cost;
        };
        std::uint64_t best = cost(forecast);
        if (any)
          if (const auto c1 = cost(blended); c1 < best) best = c1, choice = 1;
        if (const auto c2 = cost(previous); c2 < best) best = c2, choice = 2;
      } else if (any) {
        choice = 1;
      }
      if (choice == 2) {
        std::fill(block_map.begin(), block_map.end(), std::uint32_t(codecs::ForecastSource::Fallback));
        forecast = previous;
        mapped = true;
      } else if (choice == 1) {
        forecast = blended;
        mapped = true;
      }
    }
    bool motion = false;
    if (!forecast.empty() && settings.coded_motion) {
      if (c == 0) {
        motion = choose_motion(g, t, frame.data(), frame_forecast, forecast, record.tolerance);
      } else {
        motion = channel0_motion == std::make_pair(g, t) && !chroma_keeps_forecast(settings, c);
      }
      if (motion) {
        forecast = std::span<const std::uint16_t>(compensated).subspan(c * plane_size, plane_size);
        mapped = false;
      }
    }
    // A lossless plane whose values leave gaps: from here on coded as its indices among the
    // levels it uses, against its forecast's nearest levels' indices, where the estimate of that is
    // below kLevelMapGain times the plane's own (the transforms' estimate of the residual, or the
    // median's of the sampled intra symbols); `recon` is turned back into pixels at the end.
    std::optional<codecs::LevelMap> levels;
    if (level_maps && record.tolerance == 0) levels = codecs::LevelMap::of(plane, shape.max_value);
    if (levels) {
      auto mapped_bound = bound;
      mapped_bound.max_value = levels->size() - 1;
      levels->to_indices(plane, level_plane);
      if (!forecast.empty()) levels->to_ranks(forecast, level_forecast);
      const std::span<const std::uint16_t> mapped_forecast =
          forecast.empty() ? forecast : std::span<const std::uint16_t>(level_forecast);
      const auto estimate = [&](std::span<const std::uint16_t> p, std::span<const std::uint16_t> f, const codecs::PlaneBound& b) {
        if (f.empty())
          return codecs::estimate_cost_rows(codecs::sample_intra_symbols(p, shape.width, b, codecs::IntraPredictor::median));
        inter_literals.clear();
        codecs::quantize_plane(p, f, b, plane_symbols, recon, inter_literals);
        return codecs::choose_transform(plane_symbols, shape.width, codecs::simd_path(), settings.smooth_modes).cost;
      };
      // The estimates read every step-th row; the map's own bits, its runs' by the same estimate.
      const double step = double(codecs::cost_sample_step(shape.height));
      level_runs.clear();
      levels->append_symbols(level_runs);
      const double map_bits = double(codecs::estimate_cost_rows(
          std::span<const std::int32_t>(reinterpret_cast<const std::int32_t*>(level_runs.data()), level_runs.size())));
      const auto em = estimate(level_plane, mapped_forecast, mapped_bound), ep = estimate(plane, forecast, bound);
      level_estimates[g] += step * double(ep);
      if (step * double(em) + map_bits < kLevelMapGain * step * double(ep)) {
        level_savings[g] += step * double(ep - em) - map_bits;
        plane = level_plane, forecast = mapped_forecast, bound = mapped_bound;
      } else {
        levels.reset();
      }
    }
    // A plane that keeps its forecast records how it was built: its coded motion (channel 0 stores
    // the frame's vectors) or its per-block map.
    const auto keep_forecast = [&](PlaneRecord& r) {
      if (motion) {
        r.mode |= kMotionFlag;
        if (c == 0) {
          s.motion.insert(s.motion.end(), motion_symbols.begin(), motion_symbols.end());
          if (motion_symbols.front() >> kMoreReferencesShift) s.more_references = true;  // the flags symbol
          if (more_references) {  // the frame's field as the decoder reads it, after the flags
            std::size_t pos = 1;
            own_fields[g][t] = codecs::read_motion_symbols(motion_symbols, pos, shape.width, shape.height, true);
          }
        }
      }
      if (mapped) {
        r.mode |= kBlockMapFlag;
        s.block_maps.insert(s.block_maps.end(), block_map.begin(), block_map.end());
      }
    };
    // The plane's intra predictor and the estimate of its sampled symbols by it: the mean of four
    // where its estimate is below kIntraMeanGain times the median's. A colour frame takes one for
    // all its planes, chosen at its first by the three planes' estimates (each under its own
    // bound), so that its channel plan relates symbols of one kind: planes forecast each their own
    // way lost the plans' differences. A plane that stays intra only below `limit` (a forecast
    // plane: its inter estimate) does not weigh the mean where the median's estimate is so far
    // above it that the mean could not come below it (kIntraMeanMost): most forecast planes, whose
    // second estimate cost 5% of encoding mire2.
    const auto intra_predictor = [&](const codecs::PlaneBound& b, std::uint64_t limit) {
      using codecs::IntraPredictor;
      const auto estimate = [&](std::span<const std::uint16_t> pixels, const codecs::PlaneBound& pb, IntraPredictor k) {
        return codecs::estimate_cost_rows(codecs::sample_intra_symbols(pixels, shape.width, pb, k));
      };
      const std::uint64_t median = estimate(plane, b, IntraPredictor::median);
      if (!settings.intra_mean || kIntraMeanMost * double(median) >= double(limit))
        return std::make_pair(IntraPredictor::median, median);
      if (shape.channels == 1) {
        const std::uint64_t mean = estimate(plane, b, IntraPredictor::mean);
        return double(mean) < kIntraMeanGain * double(median) ? std::make_pair(IntraPredictor::mean, mean)
                                                              : std::make_pair(IntraPredictor::median, median);
      }
      if (c == 0 || frame_intra.first != std::make_pair(g, t)) {
        double medians = 0, means = 0;
        for (std::size_t k = 0; k < shape.channels; ++k) {
          const std::span<const std::uint16_t> pixels(frame.data() + k * plane_size, plane_size);
          const auto own = k == c ? b : plane_bound(settings, plane_tolerance(settings, pixels, shape.max_value, k), shape.max_value);
          medians += double(k == c ? median : estimate(pixels, own, IntraPredictor::median));
          means += double(estimate(pixels, own, IntraPredictor::mean));
        }
        frame_intra = {{g, t}, means < kIntraMeanGain * medians ? IntraPredictor::mean : IntraPredictor::median};
      }
      if (frame_intra.second == IntraPredictor::median) return std::make_pair(IntraPredictor::median, median);
      return std::make_pair(IntraPredictor::mean, estimate(plane, b, IntraPredictor::mean));
    };
    // The plane coded as kInterpolatedPlane where the contexts' estimate of its symbols is below
    // that of `rival` (the symbols it would be stored as otherwise, after their transform): true if
    // it was. The order-0 estimates that choose transforms favour the interpolation, whose levels
    // lie interleaved in the rows the coder's contexts read (the bundled depth sample's key
    // frames: 24% larger by them).
    // Lossless, the interpolation transform of the pixels; bounded, the interpolation quantized in
    // closed loop, whose symbols are stored as they are, and where a `forecast` is given its
    // residual interpolated in closed loop too (kInterpolatedResidual), the smallest kept.
    const auto interpolated = [&](std::span<const std::int32_t> rival, std::span<const std::uint16_t> forecast = {}) {
      if (!interpolated_planes) return false;
      zero_literals.clear();
      const bool closed = !bound.lossless();
      if (closed) {
        codecs::quantize_plane_interpolated(plane, {}, shape.width, bound, zero_symbols, zero_recon);
      } else {
        codecs::quantize_plane(plane, zeros, bound, zero_symbols, zero_recon, zero_literals);
        codecs::forward_transform(PlaneTransform::Interpolation, zero_symbols, shape.width, transformed);
      }
      const std::span<const std::int32_t> stored = closed ? std::span<const std::int32_t>(zero_symbols) : transformed;
      const std::uint64_t rival_cost = codecs::estimate_context_cost(rival, shape.width);
      const std::uint64_t own_cost = codecs::estimate_context_cost(stored, shape.width);
      if (closed && !forecast.empty()) {
        codecs::quantize_plane_interpolated(plane, forecast, shape.width, bound, residual_symbols, residual_recon);
        if (codecs::estimate_context_cost(residual_symbols, shape.width) < std::min(rival_cost, own_cost)) {
          record.mode = kInterpolatedResidual;
          keep_forecast(record);
          std::copy(residual_recon.begin(), residual_recon.end(), recon.begin());
          put_symbols(s, c, residual_symbols, false,
                      codecs::TransformChoice{PlaneTransform::None, codecs::estimate_cost(residual_symbols, shape.width)}, record);
          return true;
        }
      }
      if (own_cost >= rival_cost) return false;
      const auto choice = closed ? codecs::TransformChoice{PlaneTransform::None, codecs::estimate_cost(zero_symbols, shape.width)}
                                 : codecs::TransformChoice{PlaneTransform::Interpolation,
                                                           codecs::estimate_interpolation_cost(zero_symbols, shape.width)};
      record.mode = kInterpolatedPlane;
      std::copy(zero_recon.begin(), zero_recon.end(), recon.begin());
      std::fill(plane_side.begin(), plane_side.end(), std::uint8_t{0});  // the side classes of a flat forecast
      put_symbols(s, c, zero_symbols, false, choice, record);
      s.literals.insert(s.literals.end(), zero_literals.begin(), zero_literals.end());
      return true;
    };
    if (forecast.empty()) {
      intra_literals.clear();
      const auto predictor = intra_predictor(bound, UINT64_MAX).first;
      codecs::quantize_plane_intra(plane, shape.width, bound, plane_symbols, recon, intra_literals, codecs::simd_path(), predictor);
      if (!interpolated(plane_symbols)) {
        if (predictor == codecs::IntraPredictor::mean) record.mode = kIntraMeanPlane;
        put_symbols(s, c, plane_symbols, true, std::nullopt, record);
        s.literals.insert(s.literals.end(), intra_literals.begin(), intra_literals.end());
      }
    } else if (settings.quantizer == QuantizerKind::Interval && settings.bound.mode != codecs::BoundMode::Lossless) {
      codecs::IntervalRuns runs;
      codecs::interval_quantize(plane, forecast, bound, runs, recon);
      record.run_count = runs.values.size();
      keep_forecast(record);
      s.run_values.insert(s.run_values.end(), runs.values.begin(), runs.values.end());
      s.run_lengths.insert(s.run_lengths.end(), runs.lengths.begin(), runs.lengths.end());
    } else {
      inter_literals.clear();
      intra_literals.clear();
      codecs::quantize_plane(plane, forecast, bound, plane_symbols, recon, inter_literals);
      if (settings.side_classes) codecs::side_classes(forecast, shape.width, shape.max_value, plane_side);
      // Each plane's own estimates decide here; a colour frame's plan then codes its planes against
      // each other where that is smaller.
      const auto inter = codecs::choose_transform(plane_symbols, shape.width, codecs::simd_path(), settings.smooth_modes);
      // Intra coding of a forecast plane rarely wins (scene cuts, appearing objects): estimated on
      // the original pixels first (exact when lossless), quantized for real only when it may win.
      const std::uint64_t intra_limit =
          settings.bound.mode == codecs::BoundMode::Lossless ? inter.cost : inter.cost + inter.cost / 8;
      const auto [intra_predictor_choice, intra_estimate] = intra_predictor(bound, intra_limit);
      const bool may_win = intra_estimate < intra_limit;
      std::uint64_t intra_cost = UINT64_MAX;
      if (may_win) {
        codecs::quantize_plane_intra(plane, shape.width, bound, intra_symbols, intra_recon, intra_literals, codecs::simd_path(),
                                     intra_predictor_choice);
        intra_cost = codecs::estimate_cost(intra_symbols, shape.width);
      }
      // Where the residual itself is smooth (it took the gradient or the interpolation), the
      // plane's own pixels may be smoother still: a simulated field whose frames change much
      // between snapshots.
      const bool smooth = inter.transform == PlaneTransform::Gradient || inter.transform == PlaneTransform::Interpolation;
      const auto as_stored = [&]() -> std::span<const std::int32_t> {
        if (intra_cost < inter.cost) return intra_symbols;
        codecs::forward_transform(inter.transform, plane_symbols, shape.width, inter_transformed);
        return inter_transformed;
      };
      // (interpolated_planes first: as_stored() transforms the residual.)
      if ((smooth || (settings.interpolate_every_plane && !bound.lossless())) && interpolated_planes &&
          interpolated(as_stored(), forecast)) {
        // coded
      } else if (intra_cost < inter.cost) {
        record.mode = intra_predictor_choice == codecs::IntraPredictor::mean ? kIntraMeanPlane : kIntraPlane;
        std::copy(intra_recon.begin(), intra_recon.end(), recon.begin());
        put_symbols(s, c, intra_symbols, true, codecs::TransformChoice{PlaneTransform::None, intra_cost}, record);
        s.literals.insert(s.literals.end(), intra_literals.begin(), intra_literals.end());
      } else {
        record.mode = std::uint8_t(inter.transform);
        keep_forecast(record);
        put_symbols(s, c, plane_symbols, false, inter, record);
        s.literals.insert(s.literals.end(), inter_literals.begin(), inter_literals.end());
      }
    }
    if (levels) {
      record.mode |= kLevelMapFlag;
      levels->append_symbols(s.level_maps);
      levels->to_levels(recon);
    }
    if (c == 0) channel0_motion = (record.mode & kMotionFlag) ? std::make_pair(g, t) : std::make_pair(SIZE_MAX, SIZE_MAX);
    s.planes[t].push_back(record);
    if (colour && c + 1 == shape.channels) put_colour_frame(g, t);
  };

  for (std::size_t g = 0; g < gops.size(); ++g) {
    const auto& frames = *gops[g];
    if (frames.empty()) throw std::invalid_argument("empty GOP");
    reference[g] = sequential_references(frames.size());
    far_reference[g].assign(frames.size(), kNoFrame);
    if (settings.coded_motion)
      for (std::size_t t = 0; t < frames.size(); ++t) far_reference[g][t] = second_reference(t);
    for (const auto& f : frames)
      if (f.size() != shape.size()) throw std::invalid_argument("frame size differs from the GOP's shape");
    encoded[g].reconstruction = unwritten_frames(frames.size(), shape.size());  // every plane is coded below
    if (more_references) own_fields[g].assign(frames.size(), codecs::MotionField(shape.width, shape.height));
    coded[g].planes.resize(frames.size());
    // At most a symbol a sample: grown by doubling, the vector was copied again and again (2% of
    // encoding colour vtest with --profile fast).
    coded[g].symbols.reserve(frames.size() * shape.size());
    coded[g].side.reserve(frames.size() * shape.size());
    if (colour) coded[g].channel_plans.assign(frames.size(), 0);
    for (std::uint32_t c = 0; c < shape.channels; ++c) code_plane(g, 0, c, {});
    if (settings.key_frame_uncoded) {
      GopSymbols& s = coded[g];
      s.symbols.clear(), s.side.clear(), s.run_values.clear(), s.run_lengths.clear(), s.literals.clear(), s.block_maps.clear();
      s.motion.clear(), s.level_maps.clear();
      related_frames[g].clear();
    }
    states[g] = predictor.begin_gop(shape, encoded[g].reconstruction[0]);
  }

  std::vector<std::size_t> lengths;
  for (const auto* g : gops) lengths.push_back(g->size());
  const auto encoder_reconstruction = [&](std::size_t g, std::size_t t) {
    return std::span<const std::uint16_t>(encoded[g].reconstruction[t]);
  };
  if (predictor.bidirectional()) {
    run_hierarchical(shape, lengths, reference, far_reference, code_plane, encoder_reconstruction);
  } else {
    run_lockstep(predictor, shape, states, lengths, [](std::size_t, std::size_t) { return true; }, code_plane,
                 encoder_reconstruction);
  }

  if (colour)
    for (std::size_t g = 0; g < gops.size(); ++g) finish_colour_gop(g);
  std::vector<std::size_t> retry;
  for (std::size_t g = 0; g < gops.size(); ++g) {
    const bool used_motion = !coded[g].motion.empty();
    const ChunkRival& rival = rivals.empty() ? ChunkRival() : rivals[g];
    if (memo && memo->recording) {
      // The same symbols make the same chunk but for its choice byte (serialize: version,
      // quantizer, choice).
      const auto key = chunk_key(coded[g], shape, settings, bool(rival));
      if (const auto* known = memo->chunk(key)) {
        encoded[g].bytes = known->bytes;
        encoded[g].bytes[2] = choice;
        encoded[g].stats = known->stats;
      } else {
        encoded[g].bytes = serialize(coded[g], shape, settings, choice, encoded[g].stats, rival);
        memo->keep(key, encoded[g].bytes, encoded[g].stats);
      }
    } else {
      encoded[g].bytes = serialize(coded[g], shape, settings, choice, encoded[g].stats, rival);
    }
    // The estimates that chose motion model the static context (rANS) coder. Where another coder
    // won the GOP's symbols instead (zstd, LZMA, the adaptive coder), its matches or adapted
    // statistics may have found repeats across frames that motion removed (sparse frames moving
    // at a steady speed, as in Moving MNIST): there the GOP is coded again without motion and the
    // smaller chunk is kept, a measured choice.
    const auto coder = encoded[g].stats.coder;
    if (used_motion && coder != codecs::EntropyCoderKind::Rans && coder != codecs::EntropyCoderKind::StripedRans)
      retry.push_back(g);
  }
  // Each retry codes its GOPs again with one setting changed and keeps the smaller chunk.
  auto code_again = [&](const std::vector<std::size_t>& which, const CodingSettings& changed) {
    if (which.empty()) return;
    std::vector<const GopFrames*> subset;
    std::vector<ChunkRival> subset_rivals;
    for (const auto g : which) {
      subset.push_back(gops[g]);
      if (!rivals.empty()) subset_rivals.push_back(rivals[g]);
    }
    auto again = encode_with(predictor, choice, shape, subset, changed, memo, subset_rivals);
    for (std::size_t i = 0; i < which.size(); ++i)
      if (again[i].bytes.size() < encoded[which[i]].bytes.size()) encoded[which[i]] = std::move(again[i]);
  };
  CodingSettings without = settings;
  without.coded_motion = false;
  code_again(retry, without);
  // Spatial blocks: the frame estimates that took them see each frame's own statistics, the rANS
  // coder one static table set for the GOP. Where they promised a little, reality could differ
  // by far more: sample/vtest at abs 2, 1.6% estimated, grew 1.7% (frames taken on an estimated
  // 8% coded up to 10% larger). So a GOP whose estimated saving is under a sixteenth is measured
  // without them as well, the smaller kept; above it (cup lossless 7.7% estimated, 7.4% real;
  // sample/vtest lossless 12.5%, 0.9%) no loss was seen and the second coding is spared. Only in
  // GOPs of fewer than kSpatialRetrySamples samples: on large ones the second coding was up to 45%
  // of encoding (mbt/cube lossless, every GOP measured again) and kept 0.04% on one of 20 inputs
  // (docs/defaults.md, "Spatial blocks measured again only in small GOPs"). Not in auto's trial
  // windows (twice their cost; they only rank the choices).
  if (!settings.key_frame_uncoded) {
    std::vector<std::size_t> spatial_retry;
    for (std::size_t g = 0; g < gops.size(); ++g)
      if (spatial_used[g] && 16 * spatial_saving[g] < motion_estimate[g] &&
          std::uint64_t(gops[g]->size()) * shape.size() < kSpatialRetrySamples &&
          std::find(retry.begin(), retry.end(), g) == retry.end())
        spatial_retry.push_back(g);
    CodingSettings no_spatial = settings;
    no_spatial.spatial_blocks = false;
    code_again(spatial_retry, no_spatial);
    // The smooth modes are chosen per plane by estimates that read the values (the transforms) or
    // a model of the contexts (interpolated planes); where they err the GOP grows (a reaction-
    // diffusion field at abs 2: 4% by the contexts' estimate). A GOP that took any (chunk version
    // 14 or 15) is coded without them too, the smaller kept: twice the coding of smooth fields.
    // Not where only a bounded key frame did: bounded gray camera and film key frames take
    // interpolated planes (mbt/cube at abs 2, every GOP), where the second coding made encoding
    // 1.65x slower for 0.55% (-2.36% against version 14 without it, -2.90% with it; lossless, the
    // 8-bit wave kept 0.34% by it).
    std::vector<std::size_t> smooth_retry;
    // (By the chunk's own plane records: its version no longer tells since version 19, and a
    // colour chunk's first byte never did.)
    const bool lossless = settings.bound.mode == codecs::BoundMode::Lossless;
    for (std::size_t g = 0; g < gops.size(); ++g)
      if (settings.smooth_modes && any_plane_mode(encoded[g].bytes, shape.channels, [&](std::size_t t, std::uint8_t mode) {
            return (lossless || t > 0) && smooth_mode(mode);
          }))
        smooth_retry.push_back(g);
    CodingSettings no_smooth = settings;
    no_smooth.smooth_modes = false;
    code_again(smooth_retry, no_smooth);
    // Level maps are chosen per plane by the transforms' order-0 estimates, which model the striped
    // coder's tokens but not its contexts, nor the coders' ranks where the values are a few levels
    // (flat regions at random levels: a test's scene 5% larger by them), and the maps' bytes only
    // by an estimate: where the maps are many and irregular (a simulated 16-bit field, whose steep
    // parts skip values) the planes that took them saved a few percent by the estimates, and the
    // archive grew 0.6%. So a GOP that took any is coded without them too, the smaller kept, where
    // their estimated saving is below kLevelMapSure of its planes' estimates, or where it has fewer
    // than kLevelMapRetrySamples samples (a second coding that costs little). Camera frames under a
    // gain save about a sixteenth (ViSP's `line` and `ellipse-1`), and are not coded twice.
    std::vector<std::size_t> level_retry;
    for (std::size_t g = 0; g < gops.size(); ++g)
      if (!coded[g].level_maps.empty() && (std::uint64_t(gops[g]->size()) * shape.size() < kLevelMapRetrySamples ||
                                           level_savings[g] < kLevelMapSure * level_estimates[g]))
        level_retry.push_back(g);
    CodingSettings no_levels = settings;
    no_levels.level_maps = false;
    code_again(level_retry, no_levels);
  }
  return encoded;
}

std::vector<GopFrames> decode_with(const Predictor& predictor, const FrameShape& shape,
                                   std::span<const std::span<const std::uint8_t>> chunks,
                                   std::span<const std::size_t> frame_counts, const CodingSettings& settings,
                                   const RowsDone& done, Frames wanted = Frames::Returned) {
  const std::size_t plane_size = std::size_t(shape.width) * shape.height;
  std::vector<GopSymbols> coded(chunks.size());
  std::vector<GopFrames> frames(chunks.size());
  std::vector<std::size_t> run_pos(chunks.size(), 0);
  std::vector<codecs::LiteralCursor> literals;
  std::vector<codecs::SignedSymbolReader> readers;
  readers.reserve(chunks.size());
  // [g][t]: how a colour frame's symbol planes are coded against each other.
  std::vector<std::vector<codecs::ChannelPlan>> plans(chunks.size());
  // Frames only streamed (a colour transform's domain, turned back by decode_gops band by band; a
  // checksum): in a sequential GOP no frame reads one three back (the previous-frame forecast,
  // coded motion and forecast maps read t - 1, a second reference t - 2; a predictor keeps its own
  // copies of what it observes), five back from chunk version 16 (more references, t - 3 and t - 4),
  // and in an intra-only one none reads another, so frame t is decoded into frame t - 3's (t - 5's;
  // t - 1's) buffer, and a GOP's decoding touches 3 frames (5; 1) of memory instead of all of them
  // (colour vtest: 85 MB less for each 32-frame GOP, whose first-touch page faults were a third of a
  // whole run's time; docs/performance.md, "verify checks GOPs in a few frames of memory"). Set
  // once the chunks' versions are read.
  std::size_t recycle = 0;

  for (std::size_t g = 0; g < chunks.size(); ++g) {
    ByteReader in(chunks[g], "chunk");
    const std::uint8_t version = in.u8();
    if (version < 2 || version > kChunkVersion) in.fail("unknown chunk version");
    coded[g].version = version;
    if (in.u8() != std::uint8_t(settings.quantizer)) in.fail("quantizer differs from the archive's");
    if (version >= 4) in.u8();  // the predictor choice, read by decode_gops
    const std::size_t count = in.varint();
    if (count != frame_counts[g] || count == 0) in.fail("frame count differs from the index");
    GopSymbols& s = coded[g];
    s.planes.assign(count, std::vector<PlaneRecord>(shape.channels));
    std::uint64_t symbol_count = 0, run_count = 0, map_count = 0, motion_planes = 0, level_planes = 0;
    if (shape.channels > 1) plans[g].resize(count);
    for (std::size_t t = 0; t < count; ++t) {
      if (shape.channels > 1 && version >= 6) {
        try {
          plans[g][t] = codecs::ChannelPlan::from_byte(in.u8());
        } catch (const codecs::CodecError& e) {
          in.fail(e.what());
        }
      }
      for (auto& plane : s.planes[t]) {
        plane.tolerance = std::uint32_t(in.varint(shape.max_value, "tolerance"));
        plane.mode = in.u8();
        const std::uint8_t base = plane.mode & ~kModeFlags;
        if (base == std::uint8_t(PlaneTransform::Gradient) || base == std::uint8_t(PlaneTransform::Interpolation) ||
            base == kInterpolatedPlane) {
          if (version < kSmoothVersion)
            in.fail("a smooth plane mode (gradient, interpolation, interpolated) in a chunk before version 14");
          if (base == kInterpolatedPlane && (shape.channels > 1 || (plane.mode & (kBlockMapFlag | kMotionFlag))))
            in.fail("an interpolated plane in colour, or with a forecast map or motion");
        } else if (base == kInterpolatedResidual) {
          if (version < kClosedInterpolationVersion) in.fail("an interpolated residual in a chunk before version 15");
          if (shape.channels > 1 || plane.tolerance == 0) in.fail("an interpolated residual in colour, or lossless");
        } else if (base == kIntraMeanPlane) {
          if (version < kIntraMeanVersion) in.fail("an intra plane forecast by the mean in a chunk before version 17");
        } else if (base > kIntraPlane) {
          in.fail("unknown plane mode");
        }
        if ((plane.mode & kPolyphaseFlag) && version < kPolyphaseVersion) in.fail("polyphase layout in a chunk before version 13");
        const std::size_t c = std::size_t(&plane - s.planes[t].data());
        if (version >= kLevelMapVersion && (plane.mode & kLevelMapFlag)) {
          if (plane.tolerance != 0 || settings.bound.mode != codecs::BoundMode::Lossless) in.fail("a level map on a bounded plane");
          ++level_planes;
        } else if ((plane.mode & kChannelDeltaFlag) && (version < 3 || version >= 6 || c == 0)) {
          in.fail(version >= 6 ? "channel delta flag in a chunk of version 6 or later" : "channel delta without a previous channel");
        }
        if (plane.mode & kMotionFlag) {
          if (version < 4) in.fail("coded motion in a chunk of version 3 or older");
          if (intra_plane(plane.mode) || frame_is_intra(predictor, t) || (plane.mode & kBlockMapFlag))
            in.fail("coded motion on a plane without a forecast, or with a forecast map");
          if (c > 0 && !(s.planes[t][0].mode & kMotionFlag)) in.fail("motion vectors shared with a channel without them");
          if (c == 0) ++motion_planes;
        }
        if (plane.mode & kBlockMapFlag) {
          if (intra_plane(plane.mode) || frame_is_intra(predictor, t)) in.fail("forecast map on a plane without a forecast");
          map_count += codecs::forecast_block_count(shape.width, shape.height);
        }
        plane.run_count = in.varint(plane_size, "run count");
        const bool interval = !frame_is_intra(predictor, t) && settings.quantizer == QuantizerKind::Interval &&
                              settings.bound.mode != codecs::BoundMode::Lossless;
        if (interval) {
          if (plane.run_count == 0 && plane_size > 0) in.fail("interval plane without runs");
          if (plane.mode & kChannelDeltaFlag) in.fail("channel delta on an interval-coded plane");
          if (plane.mode & kPolyphaseFlag) in.fail("polyphase layout on an interval-coded plane");
          run_count += plane.run_count;
        } else {
          if (plane.run_count != 0) in.fail("runs recorded for a plane without interval coding");
          symbol_count += plane_size;
        }
      }
      if (shape.channels > 1) {
        auto& plan = plans[g][t];
        if (version < 6)
          plan = codecs::ChannelPlan::from_legacy_deltas(s.planes[t][1].mode & kChannelDeltaFlag,
                                                         s.planes[t][2].mode & kChannelDeltaFlag);
        // A frame's planes are all interval-coded or none (the quantizer is the frame's).
        if (plan.relates_planes() && s.planes[t][0].run_count > 0) in.fail("channel plan on interval-coded planes");
      }
    }
    // The plane symbols decode plane by plane when the plane is reconstructed (striped rANS), while
    // they are in cache; the small streams below decode now.
    readers.emplace_back(in.blob(), shape.width, symbol_count);
    s.run_values.resize(run_count);
    codecs::decode_signed_symbols(in.blob(), 0, s.run_values);
    s.run_lengths.resize(run_count);
    codecs::decode_symbols(in.blob(), 0, s.run_lengths);
    for (auto& n : s.run_lengths) {
      if (n >= plane_size) in.fail("run longer than a plane");
      n += 1;
    }
    const std::size_t literal_count = in.varint(count * shape.size(), "literal count");
    std::vector<std::uint32_t> literal_values(literal_count);
    codecs::decode_symbols(in.blob(), 0, literal_values);
    s.literals.resize(literal_count);
    for (std::size_t i = 0; i < literal_count; ++i) {
      if (literal_values[i] > shape.max_value) in.fail("literal out of the pixel range");
      s.literals[i] = std::uint16_t(literal_values[i]);
    }
    s.block_maps.resize(map_count);
    codecs::decode_symbols(in.blob(), 0, s.block_maps);
    for (const auto m : s.block_maps)
      if (m >= codecs::kForecastSources) in.fail("unknown forecast source");
    if (version >= 4) {
      // A field takes one mode symbol per 16 x 16 block and at most 4 vectors of 2 components, and
      // in a bidirectional GOP one bi-prediction flag; from version 10 a sequential GOP's frame may
      // have a second field.
      const std::uint64_t blocks = codecs::MotionField(shape.width, shape.height).modes.size();
      const std::uint64_t fields = version >= kTwoReferenceVersion ? 2 : 1;
      s.motion.resize(in.varint(motion_planes * (fields * blocks * 9 + 1), "motion symbol count"));
      codecs::decode_symbols(in.blob(), 0, s.motion);
    }
    if (version >= kLevelMapVersion && level_planes > 0) {  // (a chunk of version 18 always has a map)
      // Each map at most a run count and a run per value.
      s.level_maps.resize(in.varint(level_planes * (std::uint64_t(shape.max_value) + 2), "level map symbol count"));
      codecs::decode_symbols(in.blob(), 0, s.level_maps);
    }
    in.expect_end();
    literals.emplace_back(s.literals);
    frames[g].resize(count);  // each frame's buffer taken as its decoding starts (decode_plane)
  }

  if (wanted == Frames::Streamed && !predictor.bidirectional()) {
    const bool more = std::any_of(coded.begin(), coded.end(), [](const GopSymbols& s) { return s.version >= kMoreReferencesVersion; });
    recycle = predictor.intra_only() ? 1 : more ? 3 + kMaxMoreReferences : 3;
  }
  std::vector<std::size_t> map_pos(chunks.size(), 0), motion_pos(chunks.size(), 0), level_pos(chunks.size(), 0);
  codecs::MotionField field;  // of the frame being decoded, when its channel 0 has motion
  codecs::MotionField towards_far;  // towards the far reference, when bi: the field scaled, or a second field
  std::vector<std::vector<std::size_t>> references(chunks.size()), far_references(chunks.size());  // as the encoder's
  bool bi = false;  // the frame's forecast is the mean of both references' (its field's and towards_far's)
  std::uint32_t more = 0;  // ... and of `more` frames before them (mean_of_references), displaced by more_fields
  std::vector<codecs::MotionField> more_fields;
  // [g][t]: the field frame t's channel 0 was coded with (zeros without motion), from chunk version 16.
  std::vector<std::vector<codecs::MotionField>> own_fields(chunks.size());
  std::vector<std::uint16_t, codecs::BufferAllocator<std::uint16_t>> more_scratch, averaged;  // a plane each, and its forecast
  std::optional<codecs::Smoothing> smooth;  // ... then smoothed (codecs::smooth_forecast)
  // Written in full before they are read (compensate, build_forecast); from the buffer pool.
  std::vector<std::uint16_t, codecs::BufferAllocator<std::uint16_t>> far_forecast(plane_size);
  for (std::size_t g = 0; g < chunks.size(); ++g) {
    references[g] = sequential_references(frame_counts[g]);
    far_references[g].assign(frame_counts[g], kNoFrame);
    if (coded[g].version >= kTwoReferenceVersion)
      for (std::size_t t = 0; t < frame_counts[g]; ++t) far_references[g][t] = second_reference(t);
    if (coded[g].version >= kMoreReferencesVersion)
      own_fields[g].assign(frame_counts[g], codecs::MotionField(shape.width, shape.height));
  }
  // A forecast built here (per-block map, motion): for a plane reconstructed at once, one buffer
  // that stays in cache; for a plane that waits for the planes its frame's plan codes first, its own.
  using ForecastPlane = std::vector<std::uint16_t, codecs::BufferAllocator<std::uint16_t>>;
  ForecastPlane blended_now(plane_size), smoothed, level_forecast;  // the last: a forecast's levels' indices (kLevelMapFlag)
  std::array<std::optional<codecs::LevelMap>, 3> plane_levels;  // of the frame being decoded, by channel
  std::array<ForecastPlane, 3> blended_waiting;
  std::vector<std::uint16_t> zeros;  // the forecast of interpolated planes (kInterpolatedPlane), when one comes
  std::array<std::span<const std::uint16_t>, 3> forecast_of;  // of the frame being decoded, by channel
  using SymbolPlane = std::vector<std::int32_t, codecs::BufferAllocator<std::int32_t>>;
  SymbolPlane plane_symbols(plane_size), polyphase_scratch;
  // A plane's side classes, where its stream was coded with them (zeros for planes coded spatially).
  std::vector<std::uint8_t, codecs::BufferAllocator<std::uint8_t>> plane_side, side_scratch;
  // The symbol planes of the frame being decoded, by channel, after their channel references (gray:
  // one), for the planes coded after them.
  std::array<SymbolPlane, 3> resolved;
  for (std::size_t c = 0; c < shape.channels && c < resolved.size(); ++c) resolved[c].resize(plane_size);
  const codecs::ChannelPlan gray_plan;
  std::pair<std::size_t, std::size_t> reconstructing{SIZE_MAX, SIZE_MAX};  // (GOP, frame)
  std::size_t next_position = 0;  // of the frame's plan, the first plane not reconstructed
  std::array<bool, 3> forecast_known{};
  const std::size_t map_size = codecs::forecast_block_count(shape.width, shape.height);
  auto decode_plane = [&](std::size_t g, std::size_t t, std::size_t c, std::span<const std::uint16_t> forecast) {
    // A frame's buffer is taken when its first plane is decoded, not with the GOP: where a caller
    // still holds the GOP before (verify and the Reader decode ahead), it is given back meanwhile and
    // reused, not faulted in afresh. Every plane is reconstructed whole, so it is left unwritten.
    if (frames[g][t].empty()) frames[g][t] = recycle && t >= recycle ? std::move(frames[g][t - recycle]) : Pixels(shape.size());
    GopSymbols& s = coded[g];
    const PlaneRecord& record = s.planes[t][c];
    std::span<std::uint16_t> recon(frames[g][t].data() + c * plane_size, plane_size);
    const codecs::ChannelPlan& plan = shape.channels > 1 ? plans[g][t] : gray_plan;
    if (reconstructing != std::make_pair(g, t)) reconstructing = {g, t}, next_position = 0, forecast_known.fill(false);
    ForecastPlane* blended = &blended_now;
    if (record.run_count == 0 && plan.position(c) != next_position) {  // interval planes are reconstructed at once
      blended = &blended_waiting[c];
      blended->resize(plane_size);
    }
    if (record.mode & kBlockMapFlag) {
      const std::span<const std::uint16_t> previous(frames[g][t - 1].data() + c * plane_size, plane_size);
      const std::span<const std::uint32_t> map(s.block_maps.data() + map_pos[g], map_size);
      map_pos[g] += map_size;
      codecs::build_forecast(map, forecast, previous, shape.width, *blended);
      forecast = *blended;
    } else if (record.mode & kMotionFlag) {
      const std::span<const std::uint16_t> reference(frames[g][references[g][t]].data() + c * plane_size, plane_size);
      try {
        // Channel 0 reads the frame's vectors; the other channels use them (validated above).
        const std::size_t far = far_references[g][t];
        if (c == 0) {
          bi = false, more = 0, smooth.reset();
          if (s.version >= kMotionFlagsVersion) {
            const std::uint32_t flags = motion_pos[g] < s.motion.size() ? s.motion[motion_pos[g]++] : UINT32_MAX;
            const std::uint32_t own = flags & ((1u << kMoreReferencesShift) - 1);
            more = flags >> kMoreReferencesShift;
            if (own > (kBiPrediction | kWeaklySmoothed) || (own & kSmoothedForecast && own & kWeaklySmoothed))
              throw codecs::CodecError("bad motion flags");
            bi = (flags & kBiPrediction) != 0;
            if (more > 0 && (s.version < kMoreReferencesVersion || more > kMaxMoreReferences || !bi ||
                             predictor.bidirectional() || t < 2 + more))
              throw codecs::CodecError("bad motion flags");
            if (flags & kSmoothedForecast) smooth = codecs::Smoothing::strong;
            if (flags & kWeaklySmoothed) smooth = codecs::Smoothing::weak;
            if (bi && far == kNoFrame) throw codecs::CodecError("bi-prediction without a second reference");
          } else if (far != kNoFrame) {
            if (motion_pos[g] >= s.motion.size() || s.motion[motion_pos[g]] > 1) throw codecs::CodecError("bad bi-prediction flag");
            bi = s.motion[motion_pos[g]++] == 1;
          }
          field = codecs::read_motion_symbols(s.motion, motion_pos[g], shape.width, shape.height, s.version >= 7);
          if (!own_fields[g].empty()) own_fields[g][t] = field;
          if (bi) {
            towards_far = predictor.bidirectional()
                              ? far_field(field, t, references[g][t], far)
                              : codecs::read_motion_symbols(s.motion, motion_pos[g], shape.width, shape.height, true);
            more_fields = more_reference_fields(towards_far, own_fields[g], t, more);
          }
        }
        codecs::compensate(field, reference, *blended, shape.max_value);
        if (bi) {
          codecs::compensate(towards_far,
                             std::span<const std::uint16_t>(frames[g][far].data() + c * plane_size, plane_size), far_forecast,
                             shape.max_value);
          if (more == 0) {
            average(*blended, far_forecast, *blended);
          } else {
            std::array<std::span<const std::uint16_t>, kMaxMoreReferences> planes;
            for (std::uint32_t e = 0; e < more; ++e)
              planes[e] = std::span<const std::uint16_t>(frames[g][t - 3 - e].data() + c * plane_size, plane_size);
            more_scratch.resize(kMaxMoreReferences * plane_size);
            averaged.resize(plane_size);
            mean_of_references(*blended, far_forecast, more_fields, std::span(planes).first(more), shape.max_value, more_scratch,
                               averaged);
            blended->swap(averaged);
          }
        }
        if (smooth) {
          smoothed.resize(plane_size);
          codecs::smooth_forecast(*blended, shape.width, smoothed, *smooth);
          blended->swap(smoothed);
        }
      } catch (const codecs::CodecError& e) {
        throw DataError(std::string("chunk: ") + e.what());
      }
      forecast = *blended;
    }
    // The plane's level map, read in channel order as the encoder wrote it; used where the frame's
    // plan reconstructs the plane.
    plane_levels[c].reset();
    if (s.version >= kLevelMapVersion && (record.mode & kLevelMapFlag)) {
      try {
        plane_levels[c] = codecs::LevelMap::read(s.level_maps, level_pos[g], shape.max_value);
      } catch (const codecs::CodecError& e) {
        throw DataError(std::string("chunk: ") + e.what());
      }
    }
    if (record.run_count > 0) {
      const std::span<const std::int32_t> values(s.run_values.data() + run_pos[g], record.run_count);
      const std::span<const std::uint32_t> lengths(s.run_lengths.data() + run_pos[g], record.run_count);
      codecs::interval_dequantize(values, lengths, forecast, shape.max_value, recon);
      run_pos[g] += record.run_count;
      if (done) done(g, t, c, 0, recon);
      return;
    }
    // A frame's planes with symbols are reconstructed in the order of its channel plan, each as
    // soon as its forecast is known (at once where the plan keeps channel order), against the planes
    // coded before it (kept in `resolved`), a few rows at a time while they are in cache: inverse
    // spatial transform, channel reference, dequantization. Literals (pwrel escapes) are read in
    // channel order: frames with pwrel planes have plans in channel order (a uniform tolerance has
    // no escapes).
    forecast_of[c] = forecast;
    forecast_known[c] = true;
    const bool frame_intra = forecast.empty();
    for (; next_position < shape.channels && forecast_known[plan.order[next_position]]; ++next_position) {
      const std::size_t p = next_position;
      const std::size_t k = plan.order[p];
      const PlaneRecord& plane = s.planes[t][k];
      auto bound = plane_bound(settings, plane.tolerance, shape.max_value);
      const std::span<std::uint16_t> out(frames[g][t].data() + k * plane_size, plane_size);
      // An interpolated plane is an inter plane against zeros, whatever its frame.
      const bool interpolated = (plane.mode & ~kModeFlags) == kInterpolatedPlane;
      if (interpolated && zeros.size() != plane_size) zeros.assign(plane_size, 0);
      std::span<const std::uint16_t> plane_forecast = interpolated ? std::span<const std::uint16_t>(zeros) : forecast_of[k];
      // A plane coded through its level map: its indices reconstructed against the forecast's
      // nearest levels' indices (zeros stay zeros), and turned into pixels before `done` sees them.
      const std::optional<codecs::LevelMap>& levels = plane_levels[k];
      if (levels) {
        bound.max_value = levels->size() - 1;
        if (!interpolated && !plane_forecast.empty()) {
          level_forecast.resize(plane_size);
          levels->to_ranks(plane_forecast, level_forecast);
          plane_forecast = level_forecast;
        }
      }
      const codecs::ChannelRef ref = plan.ref(p);
      SymbolPlane& sums = resolved[k];
      const std::span<const std::int32_t> first(resolved[plan.order[0]]), second(resolved[plan.order[1]]);
      const bool spatial = !interpolated && (frame_intra || intra_plane(plane.mode));
      const bool polyphase = plane.mode & kPolyphaseFlag;
      if (readers[g].wants_side()) {
        plane_side.resize(plane_size);
        if (spatial) {
          std::fill(plane_side.begin(), plane_side.end(), std::uint8_t{0});
        } else if (polyphase) {  // the classes follow the symbols into the layout
          side_scratch.resize(plane_size);
          codecs::side_classes(plane_forecast, shape.width, shape.max_value, side_scratch);
          codecs::to_polyphase(std::span<const std::uint8_t>(side_scratch), shape.width, std::span<std::uint8_t>(plane_side));
        } else {
          codecs::side_classes(plane_forecast, shape.width, shape.max_value, plane_side);
        }
        readers[g].read(plane_symbols, plane_side);
      } else {
        readers[g].read(plane_symbols);
      }
      if (polyphase) {
        polyphase_scratch.resize(plane_size);
        codecs::from_polyphase(std::span<const std::int32_t>(plane_symbols), shape.width, std::span<std::int32_t>(polyphase_scratch));
        plane_symbols.swap(polyphase_scratch);
      }
      if (spatial) {
        if (ref == codecs::ChannelRef::None) {
          sums.swap(plane_symbols);
        } else {
          codecs::undo_channel_ref(ref, plane_symbols, first, second, sums);
        }
        codecs::dequantize_plane_intra(sums, shape.width, bound, out, literals[g], codecs::simd_path(),
                                       (plane.mode & ~kModeFlags) == kIntraMeanPlane ? codecs::IntraPredictor::mean
                                                                                     : codecs::IntraPredictor::median);
        if (levels) levels->to_levels(out);
        if (done) done(g, t, k, 0, out);
        continue;
      }
      const bool closed = (interpolated && plane.tolerance > 0 && s.version >= kClosedInterpolationVersion) ||
                          (plane.mode & ~kModeFlags) == kInterpolatedResidual;
      if (closed) {  // gray: no channel reference
        codecs::dequantize_plane_interpolated(plane_symbols, interpolated ? std::span<const std::uint16_t>() : plane_forecast,
                                              shape.width, bound, out);
        sums.swap(plane_symbols);
        if (done) done(g, t, k, 0, out);
        continue;
      }
      // The inverse transform of the next rows reads these rows as they were before the channel
      // reference, so the sums go to `sums`.
      const auto transform = interpolated ? PlaneTransform::Interpolation : PlaneTransform(plane.mode & ~kModeFlags);
      const std::size_t w = shape.width;
      // Planes with a channel reference, lossless or in uniform bins: the sums and the pixels in one
      // pass; the sums kept only where a later plane reads them.
      const bool fused = ref != codecs::ChannelRef::None && codecs::fused_dequantization(bound);
      const bool keep_sums = plan.referenced(p);
      // The first pass takes one row more: the median inverse's strips start below row 0. The
      // interpolation transform inverts the whole plane before the first pass.
      const bool by_rows = codecs::inverts_by_rows(transform);
      if (!by_rows) codecs::inverse_transform(transform, plane_symbols, w);
      for (std::size_t y0 = 0, y1 = 0; y0 < shape.height; y0 = y1) {
        y1 = std::min<std::size_t>(shape.height, y0 + kRowsPerPass + (y0 == 0));
        const std::size_t n = (y1 - y0) * w;
        if (by_rows) codecs::inverse_transform_rows(transform, plane_symbols, w, y0, y1);
        std::span<const std::int32_t> rows = std::span<const std::int32_t>(plane_symbols).subspan(y0 * w, n);
        const std::span<std::uint16_t> out_rows = out.subspan(y0 * w, n);
        if (fused) {
          const auto kept_sums = keep_sums ? std::span<std::int32_t>(sums).subspan(y0 * w, n) : std::span<std::int32_t>();
          if (codecs::undo_channel_ref_dequantize(ref, rows, first.subspan(y0 * w, n), second.subspan(y0 * w, n), kept_sums,
                                                  plane_forecast.subspan(y0 * w, n), bound, out_rows))
            throw codecs::CodecError("lossless residual leaves the pixel range");
        } else {
          if (ref != codecs::ChannelRef::None) {
            const auto row_sums = std::span<std::int32_t>(sums).subspan(y0 * w, n);
            codecs::undo_channel_ref(ref, rows, first.subspan(y0 * w, n), second.subspan(y0 * w, n), row_sums);
            rows = row_sums;
          }
          codecs::dequantize_plane(rows, plane_forecast.subspan(y0 * w, n), bound, out_rows, literals[g]);
        }
        if (levels) levels->to_levels(out_rows);
        if (done) done(g, t, k, y0, out_rows);  // while the rows are in cache
      }
      if (ref == codecs::ChannelRef::None) sums.swap(plane_symbols);
    }
  };

  std::vector<std::unique_ptr<GopState>> states(chunks.size());
  for (std::size_t g = 0; g < chunks.size(); ++g) {
    for (std::uint32_t c = 0; c < shape.channels; ++c) decode_plane(g, 0, c, {});
    states[g] = predictor.begin_gop(shape, frames[g][0]);
  }
  const auto decoder_reconstruction = [&](std::size_t g, std::size_t t) { return std::span<const std::uint16_t>(frames[g][t]); };
  if (predictor.bidirectional()) {
    run_hierarchical(shape, frame_counts, references, far_references, decode_plane, decoder_reconstruction);
  } else {
    // A plane whose coded motion replaces the forecast (and no forecast map reads it), or one coded
    // spatially, does not read the predictor's forecast.
    const auto uses_forecast = [&](std::size_t g, std::size_t t) {
      for (const PlaneRecord& p : coded[g].planes[t]) {
        const bool replaced = (p.mode & kMotionFlag) && !(p.mode & kBlockMapFlag);
        const bool spatial = intra_plane(p.mode) || (p.mode & ~kModeFlags) == kInterpolatedPlane;
        if (p.run_count > 0 || !(replaced || spatial)) return true;
      }
      return false;
    };
    run_lockstep(predictor, shape, states, frame_counts, uses_forecast, decode_plane, decoder_reconstruction);
  }
  for (std::size_t g = 0; g < chunks.size(); ++g) {
    readers[g].finish();
    if (!literals[g].exhausted()) throw DataError("chunk: unused escape literals");
    if (motion_pos[g] != coded[g].motion.size()) throw DataError("chunk: unused motion vectors");
    if (level_pos[g] != coded[g].level_maps.size()) throw DataError("chunk: unused level maps");
  }
  return frames;
}

// The predictor choice a chunk records (0 before version 4).
std::uint8_t chunk_choice(std::span<const std::uint8_t> chunk) {
  if (!chunk.empty() && chunk[0] == kColourChunk) return chunk_choice(chunk.subspan(std::min<std::size_t>(2, chunk.size())));
  ByteReader in(chunk, "chunk");
  const std::uint8_t version = in.u8();
  if (version < 4) return 0;
  in.u8();
  return in.u8();
}

// The predictor a chunk's GOP was coded with: the choice it records among `predictor`'s (auto), or
// `predictor` itself where that offers none; nullptr where the chunk names a choice not offered.
const Predictor* chunk_predictor(const Predictor& predictor, std::span<const std::uint8_t> chunk) {
  const auto choices = predictor.choices();
  const std::uint8_t choice = chunk_choice(chunk);
  if (choices.empty()) return choice == 0 ? &predictor : nullptr;
  return choice >= 1 && choice <= choices.size() ? choices[choice - 1] : nullptr;
}

// Rows y0 .. y0 + rows - 1 of every frame (every channel) of a GOP, or of its first `count`
// frames, as a GOP of frames `rows` high.
GopFrames band(const GopFrames& frames, const FrameShape& shape, std::uint32_t y0, std::uint32_t rows,
               std::size_t count = SIZE_MAX) {
  const std::size_t plane = std::size_t(shape.width) * shape.height, cut = std::size_t(shape.width) * rows;
  GopFrames out(std::min(count, frames.size()), Pixels(cut * shape.channels));
  for (std::size_t t = 0; t < out.size(); ++t)
    for (std::size_t c = 0; c < shape.channels; ++c) {
      const auto from = frames[t].begin() + std::ptrdiff_t(c * plane + std::size_t(y0) * shape.width);
      std::copy(from, from + std::ptrdiff_t(cut), out[t].begin() + std::ptrdiff_t(c * cut));
    }
  return out;
}

// The payload of a chunk in the pixel domain (a pixel or a sparse chunk) holding `packed`, and its
// coder, where it may be smaller than a chunk of `coded_size` bytes; nothing where it cannot. The
// bytes are first compressed by zstd at `trial_level`, streamed, and given up as soon as they pass
// twice `coded_size`: for pixel chunks the fast level -3 (level 19 was 1.64x smaller than level -3
// on Moving MNIST and 2.3x on castle at pwrel 0.05, docs/defaults.md, "Pixel chunks"), so bytes
// that pass may win; ones that stop can rarely come near. On camera and video frames, where the
// pixels lose by far, the trial reads a part of the GOP at about 600 MB/s; only a candidate
// compresses at the real level.
// A pixel-domain payload's trial pass (its size at the trial level) and its estimated size at the
// coding level (zstd_estimate), where they were measured before (SIZE_MAX: not).
struct PayloadTrial {
  std::size_t trial = SIZE_MAX;
  std::size_t estimate = SIZE_MAX;
};

std::optional<std::pair<std::vector<std::uint8_t>, codecs::EntropyCoderKind>> pixel_payload(
    std::span<const std::uint8_t> packed, const CodingSettings& settings, std::size_t coded_size, int trial_level,
    const PayloadTrial& known = {}) {
  // With LZMA the gap to the final coder is wider (castle at pwrel 0.05: zstd -3 3.07x LZMA's size,
  // level 1 1.96x): a slower trial at level 1, and a wider margin.
  if (settings.lzma_coder) trial_level = std::max(trial_level, 1);
  const std::size_t limit = settings.lzma_coder ? coded_size * 5 / 2 : 2 * coded_size;
  const std::size_t trial_size = known.trial != SIZE_MAX ? known.trial : codecs::zstd_size_within(packed, trial_level, limit);
  if (trial_size > limit) return std::nullopt;
  // The trial's margin lets camera frames through at level 19's cost (3 s a GOP on mire2 intra,
  // where the pixels come out at 1.7x the predictive chunk): a prefix measures that first, where
  // the trial has not come below the chunk already (castle's sparse chunks: the prefix's two
  // passes were an eighth of level 19's).
  const int level = std::max(settings.zstd_level, settings.zstd_win_level);
  if (!settings.lzma_coder && trial_size >= coded_size &&
      (known.estimate != SIZE_MAX ? double(known.estimate) >= codecs::zstd_estimate_slack * double(coded_size)
                                  : !codecs::zstd_may_reach(packed, trial_level, trial_size, level, coded_size)))
    return std::nullopt;
  auto payload = codecs::compress_zstd_frame(packed, level);
  auto coder = codecs::EntropyCoderKind::Zstd;
  // With --coder best, LZMA too (castle at pwrel 0.05: 25% smaller than zstd -19; Moving MNIST:
  // 14% larger), the smaller kept.
  if (settings.lzma_coder)
    if (auto lzma = codecs::compress_lzma_frame(packed); lzma.size() < payload.size()) {
      payload = std::move(lzma);
      coder = codecs::EntropyCoderKind::Lzma;
    }
  return std::make_pair(std::move(payload), coder);
}

// A sparse chunk's residuals lose more at zstd's fast levels than pixels do (castle: level 19 2.2x
// smaller than level -3, 1.5x than level 1): its trial runs at level 1.
constexpr int kSparseTrialLevel = 1;

// Replaces `coded` by a pixel-domain chunk (first byte `kind`, `fields` after its frame count) of
// `packed`, the bytes of `reconstruction`, where that is smaller: a measured choice. `known`: what
// pixel_payload's trial measured before.
void replace_if_smaller(std::uint8_t kind, std::span<const std::uint8_t> fields, std::span<const std::uint8_t> packed,
                        std::size_t frame_count, const CodingSettings& settings,
                        const std::function<void(std::vector<Pixels>&)>& reconstruction, EncodedGop& coded,
                        const PayloadTrial& known = {}) {
  auto payload = pixel_payload(packed, settings, coded.bytes.size(), kind == kSparseChunk ? kSparseTrialLevel : -3, known);
  if (!payload) return;
  ByteWriter out;
  out.u8(kind);
  out.u8(std::uint8_t(payload->second));
  out.varint(frame_count);
  for (const std::uint8_t b : fields) out.u8(b);
  out.blob(payload->first);
  if (out.bytes().size() >= coded.bytes.size()) return;
  coded.bytes = std::move(out.bytes());
  reconstruction(coded.reconstruction);
  coded.stats = ChunkStats{};
  coded.stats.symbol_bytes = payload->first.size();
  coded.stats.coder = payload->second;
  coded.stats.pixels = true;
}

// Replaces `coded` by the GOP's pixel chunk where that is smaller.
void try_pixel_chunk(const FrameShape& shape, const GopFrames& frames, const CodingSettings& settings, EncodedGop& coded) {
  const std::size_t plane_size = std::size_t(shape.width) * shape.height;
  std::vector<std::uint8_t> packed;
  packed.reserve(frames.size() * shape.size() * codecs::sample_bytes(shape.max_value));
  std::vector<std::uint16_t> snapped;
  const auto pointwise = settings.bound.pointwise() ? codecs::pointwise_bins(settings.bound.rel, shape.max_value)
                                                    : std::vector<std::uint16_t>();
  for (const auto& frame : frames)
    for (std::size_t c = 0; c < shape.channels; ++c) {
      std::span<const std::uint16_t> plane(frame.data() + c * plane_size, plane_size);
      if (!pointwise.empty()) {
        snapped.resize(plane_size);
        std::transform(plane.begin(), plane.end(), snapped.begin(), [&](std::uint16_t v) { return pointwise[v]; });
        plane = snapped;
      } else if (const std::uint32_t tolerance = plane_tolerance(settings, plane, shape.max_value, c); tolerance > 0) {
        snapped.assign(plane.begin(), plane.end());
        codecs::snap_to_bins(snapped, tolerance, shape.max_value);
        plane = snapped;
      }
      codecs::pack_samples(plane, shape.max_value, packed);
    }
  replace_if_smaller(kPixelChunk, {}, packed, frames.size(), settings, [&](std::vector<Pixels>& reconstruction) {
    const std::size_t frame_bytes = packed.size() / frames.size();
    for (std::size_t t = 0; t < frames.size(); ++t)
      codecs::unpack_samples(std::span<const std::uint8_t>(packed).subspan(t * frame_bytes, frame_bytes), shape.max_value,
                             reconstruction[t]);
  }, coded);
}

// Whether a GOP's chunk codes each frame on its own: a pixel chunk, or a predictive chunk whose
// predictor (the archive's, or auto's measured choice for the GOP) is `intra`.
bool codes_frames_alone(const Predictor& predictor, const EncodedGop& coded) {
  if (coded.stats.pixels) return true;
  if (predictor.intra_only()) return true;
  const Predictor* used = chunk_predictor(predictor, coded.bytes);
  return used && used->intra_only();
}

// A GOP's sparse chunk before it is coded: losslessly, or under a tolerance e the same for every
// plane (abs; not where it follows each plane's range or each pixel), of the pixels' bins of 2e + 1
// values (bin (x + e) / (2e + 1), decoded as the bin's centre clamped to the pixel range, as pixel
// chunks snap: within e). Tried only where the GOP's most frequent bin, the background, is most of
// its samples, or, where the GOP's chunk codes each frame on its own (codes_frames_alone), at least
// an eighth of them: with less, the mask saves little, and what is left is the median residual of
// every pixel, which a predictive chunk (`intra`) codes already; and where a temporal forecast won,
// a spatial coder of every frame is far behind unless the background is most of it (Megamind,
// letterboxed film: its black bars are a third of its samples, and its trials cost 14-27% of
// encoding for chunks 1.4x the predictive ones). Measured on the castle depth maps (77% zeros):
// lossless 627 KB against 673 KB for the predictive chunks, abs 2 436 KB against 489 KB
// (docs/defaults.md, "Sparse chunks").
struct SparseCandidate {
  std::vector<std::uint8_t> fields;  // tolerance, background
  std::vector<std::uint8_t> packed;  // the residuals, then the masks
  GopFrames binned;                  // the bins, where they are not the pixels (a tolerance)
  std::uint32_t bin_width = 1;
  bool background_most = false;      // the background is at least half the samples: tried whatever else codes the GOP
};

// The sparse candidate of `frames`; none where the background is under an eighth of the samples
// or the bound has no single tolerance.
std::optional<SparseCandidate> sparse_candidate(const FrameShape& shape, const GopFrames& frames, const CodingSettings& settings) {
  const bool lossless = settings.bound.mode == codecs::BoundMode::Lossless;
  if (!lossless && (settings.bound.pointwise() || settings.bound.spans())) return std::nullopt;
  const std::uint32_t tolerance = lossless ? 0 : settings.bound.tolerance(0, 0, shape.max_value);
  if (tolerance > shape.max_value) return std::nullopt;
  const std::uint32_t width = 2 * tolerance + 1, top = (shape.max_value + tolerance) / width;  // the largest bin
  const auto bin = [&](std::uint16_t v) { return std::uint16_t((std::min<std::uint32_t>(v, shape.max_value) + tolerance) / width); };
  // The background first, from the pixels' histogram (most GOPs stop here: a pass over their pixels).
  // In four parts (codecs/entropy/histogram.hpp: one histogram was 1.2% of encoding gray vtest, which
  // stops here); values above max_value counted as it.
  codecs::SplitHistogram<std::size_t> split(std::size_t(shape.max_value) + 1);
  std::size_t samples = 0;
  for (const auto& frame : frames) {
    split.add(std::span<const std::uint16_t>(frame));
    samples += frame.size();
  }
  const std::vector<std::size_t> histogram = split.counts();
  std::vector<std::size_t> bin_counts(std::size_t(top) + 1);
  for (std::uint32_t v = 0; v <= shape.max_value; ++v) bin_counts[bin(std::uint16_t(v))] += histogram[v];
  const auto background = std::uint16_t(std::max_element(bin_counts.begin(), bin_counts.end()) - bin_counts.begin());
  if (8 * bin_counts[background] < samples) return std::nullopt;
  SparseCandidate candidate;
  candidate.bin_width = width;
  candidate.background_most = 2 * bin_counts[background] >= samples;
  if (tolerance > 0) {
    candidate.binned.assign(frames.begin(), frames.end());
    for (auto& frame : candidate.binned) std::transform(frame.begin(), frame.end(), frame.begin(), bin);
  }
  const GopFrames& bins = tolerance > 0 ? candidate.binned : frames;
  const std::size_t plane_size = std::size_t(shape.width) * shape.height;
  std::vector<std::uint8_t> masks;
  masks.reserve(codecs::sparse_mask_bytes(frames.size() * shape.channels, plane_size));
  for (const auto& frame : bins)
    for (std::size_t c = 0; c < shape.channels; ++c)
      codecs::pack_sparse_plane(std::span<const std::uint16_t>(frame.data() + c * plane_size, plane_size), shape.width, top,
                                background, masks, candidate.packed);
  // Residuals first: zstd_may_reach's prefix then measures them, the bulk of the compressed bytes
  // (castle: the masks come to 4% of them), not the masks.
  candidate.packed.insert(candidate.packed.end(), masks.begin(), masks.end());
  ByteWriter fields;
  fields.varint(tolerance);
  fields.u8(std::uint8_t(background));
  fields.u8(std::uint8_t(background >> 8));
  candidate.fields = std::move(fields.bytes());
  return candidate;
}

// A GOP's sparse candidate as the predictive chunk's rival (ChunkRival): the candidate, its trial
// pass and the estimate of its payload at the coding level, each made on the first request and
// kept for try_sparse_chunk. None (SIZE_MAX) where the candidate might not be tried (it is only where the
// background is most of the samples), and with LZMA (--coder best).
class SparseRival {
 public:
  SparseRival(const FrameShape& shape, const GopFrames& frames, const CodingSettings& settings)
      : shape_(shape), frames_(&frames), settings_(&settings) {}
  // The GOP's sparse candidate (sparse_candidate), built on the first call.
  const std::optional<SparseCandidate>& candidate() {
    if (!built_) candidate_ = sparse_candidate(shape_, *frames_, *settings_), built_ = true;
    return candidate_;
  }
  std::size_t estimate() {
    if (measured_) return known_.estimate;
    measured_ = true;
    if (!settings_->pixel_chunks || settings_->lzma_coder) return SIZE_MAX;
    const auto& c = candidate();
    if (!c || !c->background_most) return SIZE_MAX;
    known_.trial = codecs::zstd_size_within(c->packed, kSparseTrialLevel, SIZE_MAX);
    const int level = std::max(settings_->zstd_level, settings_->zstd_win_level);
    known_.estimate = codecs::zstd_estimate(c->packed, kSparseTrialLevel, known_.trial, level);
    return known_.estimate;
  }
  const PayloadTrial& measured() const { return known_; }

 private:
  FrameShape shape_;
  const GopFrames* frames_;
  const CodingSettings* settings_;
  bool built_ = false, measured_ = false;
  std::optional<SparseCandidate> candidate_;
  PayloadTrial known_;
};

// Replaces `coded` by the GOP's sparse chunk (the one `sparse` holds, with what it measured) where
// that is smaller (`alone`: codes_frames_alone). Takes the rival, so that its candidate (binned
// frames, packed masks) is freed once tried rather than when the whole batch is done.
void try_sparse_chunk(const FrameShape& shape, const GopFrames& frames, const CodingSettings& settings, bool alone,
                      EncodedGop& coded, SparseRival sparse) {
  const auto& candidate = sparse.candidate();
  if (!candidate || !(alone || candidate->background_most)) return;
  const GopFrames& bins = candidate->binned.empty() ? frames : candidate->binned;
  const std::uint32_t width = candidate->bin_width;
  replace_if_smaller(kSparseChunk, candidate->fields, candidate->packed, frames.size(), settings,
                     [&](std::vector<Pixels>& reconstruction) {
    for (std::size_t t = 0; t < frames.size(); ++t)
      std::transform(bins[t].begin(), bins[t].end(), reconstruction[t].begin(),
                     [&](std::uint16_t q) { return std::uint16_t(std::min(std::uint32_t(q) * width, shape.max_value)); });
  }, coded, sparse.measured());
}

// The bands of rows through all of a GOP's frames that a trial codes in place of its frames (auto's
// choice, the colour transform's; encode_predicted says why): as many pixels as `trial_frames`
// whole frames, and at least `least_pixels` (a sample too small to rank the choices by), in as many
// bands as kMinRows rows each allow, up to kBands, each at least kMinRows high (a multiple of 16:
// two rows of motion blocks), spread evenly down the frame, each to be coded as a GOP of its own,
// `trial_shape` high. None where bands would cover the frames: the trial then codes the GOP itself.
// The first row of band b of `bands` bands of `rows` rows, centred on (2b + 1) / (2 bands) of the
// height (within the frame).
std::uint32_t centred_band_top(std::uint32_t b, std::uint32_t bands, std::uint32_t rows, std::uint32_t height) {
  const std::uint32_t centre = std::uint32_t((2 * std::uint64_t(b) + 1) * height / (2 * bands));
  return std::min(centre - std::min(centre, rows / 2), height - rows);
}

std::vector<GopFrames> trial_bands(const GopFrames& frames, const FrameShape& shape, FrameShape& trial_shape,
                                   std::uint32_t trial_frames, std::uint64_t least_pixels = 0) {
  constexpr std::uint32_t kBands = 3, kMinRows = 32, kRowStep = 16;
  trial_shape = shape;
  std::vector<GopFrames> cuts;
  if (frames.empty() || shape.width == 0) return cuts;
  const std::uint64_t frame_rows = frames.size() * std::uint64_t(shape.width);  // the pixels of a row through every frame
  const std::uint64_t wanted = std::max((std::uint64_t(shape.height) * trial_frames + frames.size() - 1) / frames.size(),
                                        (least_pixels + frame_rows - 1) / frame_rows);
  const std::uint32_t bands = std::uint32_t(std::clamp<std::uint64_t>((wanted + kMinRows - 1) / kMinRows, 1, kBands));
  const std::uint32_t rows = std::uint32_t(std::min<std::uint64_t>(
      shape.height, std::max<std::uint64_t>(kMinRows, (wanted / bands + kRowStep - 1) / kRowStep * kRowStep)));
  if (rows * bands < shape.height) {
    trial_shape.height = rows;
    for (std::uint32_t b = 0; b < bands; ++b)
      cuts.push_back(band(frames, shape, centred_band_top(b, bands, rows, shape.height) / kRowStep * kRowStep, rows));
  }
  return cuts;
}

// The pixels of auto's trial, in whole frames (trial_bands), and at least kAutoTrialPixels. Its
// choices are close on camera and video (previous, linear and bidirectional within a few percent
// of each other), where what they cost is the trial itself: measured against 6 frames
// (docs/performance.md, "auto's trial on half the pixels"), 3 encode gray vtest 1.37x faster, 23
// archives the same or up to 0.3% smaller. The floor: sample/vtest at abs 2 (16 frames of 160 x
// 120) took `bidirectional` on one band of 32 rows (82k pixels), 3.7% larger than `previous`.
constexpr std::uint32_t kAutoTrialFrames = 3;
constexpr std::uint64_t kAutoTrialPixels = std::uint64_t{1} << 18;
// The zstd level of auto's trial, which ranks the choices and is not kept: the symbol coder's gate
// level (6, lazy), within 0.5-5% of level 9's size at 1.5-1.8x its speed on GOP and trial streams;
// streams that zstd wins are where level 9 ran whole (`intra`'s trial on a static camera, castle's).
// Measured against level 9 (docs/performance.md, "Encoding: where the default's time goes"): every
// archive of 16 inputs the same but Moving MNIST at abs 2 (0.3% smaller), encoding 1.00-1.03x
// faster (gray vtest, mire2, cup, castle at abs 2, colour vtest).
constexpr int kTrialZstdLevel = codecs::kZstdGateLevel;
// auto's trial codes its bands one by one; a choice whose bytes so far pass the best's so far by
// this factor after a band is not coded on the bands after it (docs/performance.md, "auto's trial
// band by band"): on gray vtest `intra` and often `bidirectional` after the first of two bands.
// At 1.03 one archive of 17 changed (colour `box` lossless +0.58%: a choice 3-5% behind on a band
// won on the whole); at 1.05 and 1.10 none.
constexpr double kTrialPrune = 1.10;

// A trial band by band: `code(b, k)` codes band b with choice k and returns its bytes; after band
// `prune_after` (counted from 1) and each band after it, a choice more than kTrialPrune behind the
// best so far is left out of the bands after it, and bands after the one that leaves a single
// choice decide nothing. Returns the choice left with the fewest bytes (the first of equals).
template <class Code>
std::size_t trial_band_by_band(std::size_t bands, std::size_t choices, std::size_t prune_after, Code&& code) {
  std::vector<std::uint64_t> bytes(choices, 0);
  std::vector<bool> alive(choices, true);
  for (std::size_t b = 0; b < bands && std::count(alive.begin(), alive.end(), true) > 1; ++b) {
    std::uint64_t lead = UINT64_MAX;
    for (std::size_t k = 0; k < choices; ++k)
      if (alive[k]) bytes[k] += code(b, k), lead = std::min(lead, bytes[k]);
    if (b + 1 >= prune_after)
      for (std::size_t k = 0; k < choices; ++k)
        if (alive[k] && double(bytes[k]) > kTrialPrune * double(lead)) alive[k] = false;
  }
  std::size_t best = 0;
  for (std::size_t k = 1; k < choices; ++k)
    if (alive[k] && (!alive[best] || bytes[k] < bytes[best])) best = k;
  return best;
}

// `rivals`: as encode_with's. `shared`: for a predictor without choices, the caller's record of
// the work its other calls did (the colour trial's sides), else none.
std::vector<EncodedGop> encode_predicted(const Predictor& predictor, const FrameShape& shape,
                                         std::span<const GopFrames* const> gops, const CodingSettings& settings,
                                         std::span<const ChunkRival> rivals = {}, EncodeMemo* shared = nullptr) {
  const auto choices = predictor.choices();
  if (choices.empty()) return encode_with(predictor, 0, shape, gops, settings, shared, rivals);
  if (settings.first_choice_only) return encode_with(*choices[0], 1, shape, gops, settings, nullptr, rivals);
  if (settings.whole_gop_trials) {
    std::vector<EncodedGop> best = encode_with(*choices[0], 1, shape, gops, settings, nullptr, rivals);
    for (std::size_t k = 1; k < choices.size(); ++k) {
      auto coded = encode_with(*choices[k], std::uint8_t(k + 1), shape, gops, settings, nullptr, rivals);
      for (std::size_t g = 0; g < gops.size(); ++g)
        if (coded[g].bytes.size() < best[g].bytes.size()) best[g] = std::move(coded[g]);
    }
    return best;
  }
  // Per GOP, the choice that codes bands of rows through all its frames smallest: a measurement with
  // the real quantizer and coders, not an estimate (the order-0 estimates misjudge how much better
  // context coding does on spatial residuals: on the castle depth maps they favour `previous` by
  // 25% where `intra` codes 28% smaller). The bands (trial_bands: the pixels of kAutoTrialFrames frames,
  // spread down the frame) are each coded as a GOP of its own. So the trial sees what happens over
  // the whole GOP: a cut or a flash half-way (the colour clip `tree`,
  // frames 76-79, on which `bidirectional` codes 28% larger), and, at abs 2, how the closed loop
  // settles over many frames. Windows of 3 whole frames at the GOP's start and middle, before,
  // saw neither: they chose `bidirectional` for one of tree's GOPs at abs 2 (26% larger than
  // `previous` there, the archive 8.5% larger), and `previous` or `bidirectional` for three of
  // Megamind's lossless GOPs where `linear` codes 2-3% smaller (docs/defaults.md, "auto's trial").
  CodingSettings trial_settings = settings;
  trial_settings.zstd_win_level = 0;  // a second zstd pass would cost more than the trial itself
  trial_settings.zstd_level = std::min(trial_settings.zstd_level, kTrialZstdLevel);
  trial_settings.key_frame_uncoded = true;
  // On bands of 32 rows the contexts' estimate reads too few rows to rank the search's prices:
  // with it the trial chose predictors that coded mbt/cube at abs 4 1.2% and cup 0.4% larger.
  trial_settings.context_price_estimate = false;
  // Without level maps: they change each choice's planes alike where they pay (camera gain), and
  // unmeasured in the trial's thin bands (no retry there) they misranked a simulated field's
  // choices (Gray-Scott 16-bit: `intra` taken, 0.4% larger than `bidirectional` without them).
  trial_settings.level_maps = false;
  std::vector<std::uint8_t> chosen(gops.size(), 1);
  EncodeMemo memo;
  EncodeMemo* const reuse = settings.reuse_trial_work ? &memo : nullptr;
  memo.recording = true;
  for (std::size_t g = 0; g < gops.size(); ++g) {
    const GopFrames& frames = *gops[g];
    if (frames.size() < 2) continue;
    FrameShape trial_shape = shape;
    const std::vector<GopFrames> cuts = trial_bands(frames, shape, trial_shape, kAutoTrialFrames, kAutoTrialPixels);
    std::vector<const GopFrames*> trial;
    for (const auto& c : cuts) trial.push_back(&c);
    if (cuts.empty()) trial.push_back(&frames);
    // Band by band (each band a GOP of its own, coded as in one call), pruned from the first band.
    chosen[g] = std::uint8_t(1 + trial_band_by_band(trial.size(), choices.size(), 1, [&](std::size_t b, std::size_t k) {
      std::uint64_t coded = 0;
      for (const auto& e :
           encode_with(*choices[k], std::uint8_t(k + 1), trial_shape, std::span(trial).subspan(b, 1), trial_settings, reuse))
        coded += e.bytes.size();
      return coded;
    }));
    memo.forget_chunks();
  }
  memo.recording = false;
  std::vector<EncodedGop> encoded(gops.size());
  for (std::size_t k = 0; k < choices.size(); ++k) {
    std::vector<const GopFrames*> subset;
    std::vector<std::size_t> where;
    std::vector<ChunkRival> subset_rivals;
    for (std::size_t g = 0; g < gops.size(); ++g)
      if (chosen[g] == k + 1) {
        subset.push_back(gops[g]), where.push_back(g);
        if (!rivals.empty()) subset_rivals.push_back(rivals[g]);
      }
    if (subset.empty()) continue;
    auto coded = encode_with(*choices[k], std::uint8_t(k + 1), shape, subset, settings, reuse, subset_rivals);
    for (std::size_t i = 0; i < where.size(); ++i) encoded[where[i]] = std::move(coded[i]);
  }
  return encoded;
}

// A pixel or a sparse chunk: frames in the pixel domain, decoded without a predictor.
bool is_pixel_domain_chunk(std::span<const std::uint8_t> chunk) {
  return !chunk.empty() && (chunk[0] == kPixelChunk || chunk[0] == kSparseChunk);
}

// `done(t, c, plane)` hears of each plane as soon as it is decoded, while it is in cache; with
// Frames::Streamed every frame is decoded into one buffer, and the frames returned are not the GOP's.
GopFrames decode_pixel_domain_chunk(const FrameShape& shape, std::span<const std::uint8_t> chunk, std::size_t frame_count,
                                    const std::function<void(std::size_t, std::size_t, std::span<const std::uint16_t>)>& done,
                                    Frames wanted) {
  ByteReader in(chunk, "chunk");
  const bool sparse = in.u8() == kSparseChunk;
  const char* what = sparse ? "sparse chunk" : "pixel chunk";
  const std::uint8_t coder = in.u8();
  if (coder != std::uint8_t(codecs::EntropyCoderKind::Zstd) && coder != std::uint8_t(codecs::EntropyCoderKind::Lzma))
    in.fail(std::string("unknown coder of a ") + what);
  const std::size_t count = in.varint();
  if (count != frame_count || count == 0) in.fail("frame count differs from the index");
  std::uint32_t tolerance = 0;
  std::uint16_t background = 0;
  if (sparse) {
    tolerance = std::uint32_t(std::min<std::uint64_t>(in.varint(), UINT32_MAX));
    if (tolerance > shape.max_value) in.fail("sparse chunk: tolerance past the pixel range");
    background = in.u8();
    background = std::uint16_t(background | (in.u8() << 8));
  }
  const std::uint32_t bin_width = 2 * tolerance + 1, top = (shape.max_value + tolerance) / bin_width;
  const std::size_t frame_bytes = shape.size() * codecs::sample_bytes(sparse ? top : shape.max_value);
  const std::size_t plane_size = std::size_t(shape.width) * shape.height;
  const std::size_t mask_bytes = codecs::sparse_mask_bytes(count * shape.channels, plane_size);
  // A sparse chunk holds the masks and at most every sample; a pixel chunk every sample.
  const std::size_t most = count * frame_bytes + (sparse ? mask_bytes : 0), least = sparse ? mask_bytes : most;
  const auto payload = in.blob();
  const auto packed = coder == std::uint8_t(codecs::EntropyCoderKind::Zstd)
                          ? codecs::decompress_zstd_frame(payload, least, most, what)
                          : codecs::decompress_lzma_frame(payload, least, most, what);
  in.expect_end();
  GopFrames frames(count);  // each written whole below, into its own buffer or the last frame's
  const auto take = [&](std::size_t t) -> Pixels& {
    frames[t] = wanted == Frames::Streamed && t > 0 ? std::move(frames[t - 1]) : Pixels(shape.size());
    return frames[t];
  };
  const auto tell = [&](std::size_t t) {
    if (done)
      for (std::size_t c = 0; c < shape.channels; ++c)
        done(t, c, std::span<const std::uint16_t>(frames[t]).subspan(c * plane_size, plane_size));
  };
  const std::span<const std::uint8_t> bytes(packed);
  if (!sparse) {
    for (std::size_t t = 0; t < count; ++t) {
      codecs::unpack_samples(bytes.subspan(t * frame_bytes, frame_bytes), shape.max_value, take(t));
      tell(t);
    }
    return frames;
  }
  try {
    codecs::SparsePlaneReader reader(bytes.last(mask_bytes), bytes.first(bytes.size() - mask_bytes), top, background);
    for (std::size_t t = 0; t < count; ++t) {
      Pixels& frame = take(t);
      for (std::size_t c = 0; c < shape.channels; ++c)
        reader.read(shape.width, std::span<std::uint16_t>(frame).subspan(c * plane_size, plane_size));
      if (tolerance > 0)
        for (auto& v : frame) v = std::uint16_t(std::min(std::uint32_t(v) * bin_width, shape.max_value));
      tell(t);
    }
    reader.finish();
  } catch (const codecs::CodecError& e) {
    throw DataError(std::string("chunk: ") + e.what());
  }
  return frames;
}

// The chunks' `done` for a subset of them: its chunk i is where[i] of the whole.
RowsDone subset_done(const RowsDone& done, std::span<const std::size_t> where) {
  if (!done) return {};
  return [&done, where](std::size_t i, std::size_t t, std::size_t c, std::size_t y, std::span<const std::uint16_t> rows) {
    done(where[i], t, c, y, rows);
  };
}

std::vector<GopFrames> decode_predicted(const Predictor& predictor, const FrameShape& shape,
                                        std::span<const std::span<const std::uint8_t>> chunks,
                                        std::span<const std::size_t> frame_counts, const CodingSettings& settings,
                                        const RowsDone& done, Frames wanted = Frames::Returned) {
  const auto choices = predictor.choices();
  std::vector<std::uint8_t> chosen(chunks.size());
  for (std::size_t g = 0; g < chunks.size(); ++g) {
    chosen[g] = chunk_choice(chunks[g]);
    if (!chunk_predictor(predictor, chunks[g]))
      throw DataError("chunk: predictor choice " + std::to_string(chosen[g]) + " is not one the archive's predictor offers");
  }
  if (choices.empty()) return decode_with(predictor, shape, chunks, frame_counts, settings, done, wanted);
  std::vector<GopFrames> frames(chunks.size());
  for (std::size_t k = 1; k <= choices.size(); ++k) {
    std::vector<std::span<const std::uint8_t>> subset;
    std::vector<std::size_t> counts, where;
    for (std::size_t g = 0; g < chunks.size(); ++g)
      if (chosen[g] == k) subset.push_back(chunks[g]), counts.push_back(frame_counts[g]), where.push_back(g);
    if (subset.empty()) continue;
    auto decoded = decode_with(*choices[k - 1], shape, subset, counts, settings, subset_done(done, where), wanted);
    for (std::size_t i = 0; i < where.size(); ++i) frames[where[i]] = std::move(decoded[i]);
  }
  return frames;
}

}  // namespace

namespace {

// The first `count` frames of a colour GOP through the colour transform of code `transform`
// (codecs/transform/colour_transform.hpp).
GopFrames colour_transformed(const GopFrames& frames, const FrameShape& shape, std::size_t count, std::uint8_t transform) {
  const std::size_t plane_size = std::size_t(shape.width) * shape.height;
  GopFrames out = unwritten_frames(std::min(count, frames.size()), shape.size());
  for (std::size_t t = 0; t < out.size(); ++t)
    if (transform == codecs::kGreenSplitTransform)
      codecs::forward_subtract_green(frames[t], plane_size, shape.max_value, out[t]);
    else
      codecs::forward_rct(frames[t], plane_size, shape.max_value, out[t]);
  return out;
}

// Turns a bounded colour GOP's decoded planes (`coded`, in the transform's domain) back into B,
// G, R: pixels [first, first + count) of each plane.
void turn_back_bounded(std::uint8_t transform, std::span<const std::uint16_t> coded, std::size_t plane_size,
                       std::uint32_t max_value, std::span<std::uint16_t> out, std::size_t first = 0,
                       std::size_t count = SIZE_MAX) {
  if (transform == codecs::kGreenSplitTransform)
    codecs::inverse_subtract_green_clamped(coded, plane_size, max_value, out, first, count);
  else
    codecs::inverse_rct_clamped(coded, plane_size, max_value, out, first, count);
}

// The chroma's share of the bound through subtract green (G keeps the rest) for GOPs coded with
// `settings` (at an abs bound: colour_transform_allowed); 0: not offered (lossless, or a tolerance
// below 2, where G would be exact). (docs/colour.md, "A chroma within a share of the bound".)
std::uint32_t green_chroma_share(const CodingSettings& settings, const FrameShape& shape) {
  if (settings.bound.mode == codecs::BoundMode::Lossless) return 0;
  const std::uint32_t tolerance = settings.bound.tolerance(0, 0, codecs::rct_max_value(shape.max_value));
  return tolerance >= 2 ? std::max<std::uint32_t>(1, tolerance / 4) : 0;
}

// How a colour GOP is coded: through colour transform `transform` (0: as it is), and whether the
// transform's chroma planes follow the luma's coded motion (else they keep the predictor's
// forecast: chroma_keeps_forecast). Chosen per GOP by its colour trial.
struct ColourSide {
  std::uint8_t transform = 0;
  bool chroma_follows_motion = false;
  bool operator==(const ColourSide&) const = default;
};

// `settings` for GOPs coded through `side`.
CodingSettings through_transform(CodingSettings settings, const FrameShape& shape, ColourSide side) {
  settings.transformed_chroma = side.transform != 0;
  settings.chroma_tolerance = side.transform == codecs::kGreenSplitTransform ? green_chroma_share(settings, shape) : 0;
  settings.chroma_follows_motion = side.chroma_follows_motion;
  return settings;
}

FrameShape colour_transformed_shape(FrameShape shape) {
  shape.max_value = codecs::rct_max_value(shape.max_value);
  return shape;
}

// The pixels of a colour trial, in whole frames: one band of the least height (32 rows) through
// the GOP on video. It made the same choices as 3 and 6 frames' worth on vtest, Megamind and the
// sample; the whole encoding 0.82-0.84x as fast against 0.75-0.78x with 3 (docs/colour.md).
constexpr std::uint32_t kColourTrialFrames = 1;

// A bounded GOP's colour trial: thin bands spread down the frame, through the GOP's first half (at
// least kBoundedColourFrames frames). What a transform costs against the RGB planes varies down a
// frame (colour vtest at abs 4, bands of 32 rows through 32 frames: the exact chroma 0.81x at the
// top, 0.96x at mid-height, 1.31x at the bottom; the whole GOP 1.07x), and so does what subtract
// green's split costs against the exact chroma. On 52 GOPs of 5 clips at abs 2, 4 and 8 whose three
// sides were coded whole, eight bands of 16 rows chose sides that coded 0.55% more than the best
// side of each GOP; the four bands of 16 rows that chose between two sides before subtract green
// 1.72%, six 0.74%; eight through the first 8 frames 0.90% (their key frame weighs too much: cup
// and colour vtest at abs 8 +6.3% and +5.5%; docs/colour.md, "The trial's bands, measured again").
constexpr std::uint32_t kBoundedColourBands = 8, kBoundedColourRows = 16;
constexpr std::size_t kBoundedColourFrames = 16;
// The colour trial codes its bands one by one (in spread order: spread_index), each side while it
// is alive; from the third band on, a side more than kTrialPrune behind the best so far is left out
// of the bands after it. On 80 GOPs of 5 clips (lossless, abs 2, 4 and 8; 60 of them bounded, eight
// bands and three sides) it chose as the whole trial everywhere and coded 0.54x of the bounded
// trial's bands; from the second band on 0.45x, its choices the same too, but at 1.07 two changed;
// from the first band on nine changed, cup at abs 2 then coded 59% larger (its top band took RGB)
// (docs/performance.md, "The colour trial band by band").
constexpr std::size_t kColourTrialBandsBeforePrune = 3;

// Up to `count` bands of `rows` rows (fewer where the frame is short: they never cover it) through
// the first `frames_used` of `frames`, centred as trial_bands' (in `trial_shape`); frames of no
// more than `rows` rows are taken whole.
std::vector<GopFrames> spread_bands(const GopFrames& frames, const FrameShape& shape, FrameShape& trial_shape,
                                    std::uint32_t count, std::uint32_t rows, std::size_t frames_used) {
  trial_shape = shape;
  std::vector<GopFrames> cuts;
  if (frames.empty()) return cuts;
  count = std::min(count, (shape.height - 1) / rows);
  if (count == 0) {
    cuts.push_back(band(frames, shape, 0, shape.height, frames_used));
    return cuts;
  }
  trial_shape.height = rows;
  for (std::uint32_t b = 0; b < count; ++b)
    cuts.push_back(band(frames, shape, centred_band_top(b, count, rows, shape.height), rows, frames_used));
  return cuts;
}

// The sides a colour GOP coded with `settings` may take (colour_transform_choices measures them):
// as it is, through the RCT (lossless: its chroma planes also following the luma's motion, where
// there is coded motion; bounded: its exact chroma), and through subtract green where the bound
// has a share for the chroma (green_chroma_share).
std::vector<ColourSide> colour_sides(const CodingSettings& settings, const FrameShape& shape) {
  if (settings.bound.mode == codecs::BoundMode::Lossless) {
    std::vector<ColourSide> sides{{0, false}, {codecs::kRctTransform, false}};
    if (settings.coded_motion) sides.push_back({codecs::kRctTransform, true});
    return sides;
  }
  std::vector<ColourSide> sides{{0, false}, {codecs::kRctBoundedTransform, false}};
  if (green_chroma_share(settings, shape) > 0) sides.push_back({codecs::kGreenSplitTransform, false});
  return sides;
}

// The j-th of `n` bands in spread order: by their indices' bits reversed (8 bands: 0, 4, 2, 6, 1, 5,
// 3, 7), so that the first few span the frame.
std::size_t spread_index(std::size_t j, std::size_t n) {
  const int bits = std::bit_width(n - 1);
  std::size_t seen = 0;
  for (std::size_t i = 0;; ++i) {
    std::size_t reversed = 0;
    for (int b = 0; b < bits; ++b) reversed |= ((i >> b) & 1) << (bits - 1 - b);
    if (reversed < n && seen++ == j) return reversed;
  }
}

// Whether a GOP coded with `settings` may go through the colour transform: lossless, or at an abs
// bound under the linear quantizer (one tolerance for Y, which every RGB channel then shares; rel
// and pwrel tolerances differ by channel or pixel, interval runs would code the exact chroma
// badly).
bool colour_transform_allowed(const CodingSettings& settings) {
  return settings.bound.mode == codecs::BoundMode::Lossless ||
         (settings.bound.mode == codecs::BoundMode::Abs && settings.quantizer == QuantizerKind::Linear);
}

// Which GOPs take the reversible colour transform: colour GOPs of a classical predictor (a learned
// one forecasts pixels in [0, M]), lossless or bounded (colour_transform_allowed), whose trial bands
// (trial_bands, as auto's, with the key frame and motion as the GOP will have them) code smaller
// transformed than as they are: a measured choice per GOP. `auto` is measured by its first choice
// (previous), not by its own trials on both sides. On decoded video, whose chroma was subsampled
// and is smooth: lossless, the film clip's ratio +10.3%, vtest's +2.5% (docs/colour.md, "A
// reversible colour transform, chosen per GOP"); at abs 2 with exact chroma (bounded GOPs'
// trial: spread_bands), cup 22% and colour vtest 17% smaller ("The transform at a bound"). The
// first frames alone misjudge it: Megamind's GOP opens on three near-black frames, where the
// transform loses 1.9%; without the key frame, or without motion, the bands misjudged vtest and a
// drifting texture.
std::vector<ColourSide> colour_transform_choices(const Predictor& predictor, const FrameShape& shape,
                                                 std::span<const GopFrames* const> gops, const CodingSettings& settings) {
  std::vector<ColourSide> chosen(gops.size());
  if (!settings.colour_transform || shape.channels != 3 || !colour_transform_allowed(settings) ||
      !codecs::rct_fits(shape.max_value) || !predictor.identity().weights_sha256.empty())
    return chosen;
  const auto choices = predictor.choices();
  const Predictor& trial = choices.empty() ? predictor : *choices[0];
  CodingSettings trial_settings = settings;
  trial_settings.zstd_win_level = 0;  // as in auto's trial: a second zstd pass would cost more than the trial
  const bool lossless = settings.bound.mode == codecs::BoundMode::Lossless;
  const std::vector<ColourSide> sides = colour_sides(settings, shape);
  for (std::size_t g = 0; g < gops.size(); ++g) {
    FrameShape trial_shape;
    const std::vector<GopFrames> cuts =
        lossless ? trial_bands(*gops[g], shape, trial_shape, kColourTrialFrames)
                 : spread_bands(*gops[g], shape, trial_shape, kBoundedColourBands, kBoundedColourRows,
                                std::max(kBoundedColourFrames, (gops[g]->size() + 1) / 2));
    std::vector<const GopFrames*> plain_list;
    for (const auto& c : cuts) plain_list.push_back(&c);
    if (cuts.empty()) plain_list.push_back(gops[g]);  // bands would cover the frames: the GOP itself
    // The sides' motion searches met again (the RCT's two sides search the same luma).
    EncodeMemo memo;
    memo.recording = true;
    // A band's bytes coded through `side`, as the GOP would be.
    const auto coded_bytes = [&](const GopFrames& band, ColourSide side) {
      std::uint64_t coded = 0;
      const GopFrames* list[1] = {&band};
      GopFrames turned;
      const std::uint8_t transform = side.transform;
      if (transform != 0) turned = colour_transformed(band, trial_shape, band.size(), transform), list[0] = &turned;
      for (const auto& e : encode_predicted(trial, transform ? colour_transformed_shape(trial_shape) : trial_shape, list,
                                            through_transform(trial_settings, shape, side), {}, &memo))
        coded += e.bytes.size();
      return coded;
    };
    // Band by band in spread order, each side while it is alive (kColourTrialBandsBeforePrune).
    chosen[g] = sides[trial_band_by_band(plain_list.size(), sides.size(), kColourTrialBandsBeforePrune,
                                         [&](std::size_t j, std::size_t k) {
                                           return coded_bytes(*plain_list[spread_index(j, plain_list.size())], sides[k]);
                                         })];
  }
  return chosen;
}

}  // namespace

std::vector<EncodedGop> encode_gops(const Predictor& predictor, const FrameShape& shape,
                                    std::span<const GopFrames* const> gops, const CodingSettings& settings) {
  const std::vector<ColourSide> chosen = colour_transform_choices(predictor, shape, gops, settings);
  std::vector<SparseRival> sparse;
  for (std::size_t g = 0; g < gops.size(); ++g) sparse.emplace_back(shape, *gops[g], settings);
  std::vector<EncodedGop> encoded(gops.size());
  const bool lossless = settings.bound.mode == codecs::BoundMode::Lossless;
  // The GOPs as they are, then those of each transform (their frames turned here), each side's set
  // in one lockstep call.
  for (const ColourSide side : colour_sides(settings, shape)) {
    const std::uint8_t kind = side.transform;
    std::vector<GopFrames> turned;
    std::vector<const GopFrames*> subset;
    std::vector<std::size_t> where;
    std::vector<ChunkRival> rivals;
    for (std::size_t g = 0; g < gops.size(); ++g)
      if (chosen[g] == side) {
        if (kind) turned.push_back(colour_transformed(*gops[g], shape, gops[g]->size(), kind));
        where.push_back(g);
        rivals.push_back([rival = &sparse[g]] { return rival->estimate(); });
      }
    if (where.empty()) continue;
    for (std::size_t i = 0; i < where.size(); ++i) subset.push_back(kind ? &turned[i] : gops[where[i]]);
    auto coded = encode_predicted(predictor, kind ? colour_transformed_shape(shape) : shape, subset,
                                  through_transform(settings, shape, side), rivals);
    for (std::size_t i = 0; i < where.size(); ++i) {
      EncodedGop& out = encoded[where[i]];
      out = std::move(coded[i]);
      if (!kind) continue;
      out.bytes.insert(out.bytes.begin(), {kColourChunk, kind});
      if (lossless) {
        out.reconstruction = *gops[where[i]];
        continue;
      }
      const std::size_t plane_size = std::size_t(shape.width) * shape.height;
      for (auto& frame : out.reconstruction) {  // as the decoder turns it back
        Pixels rgb(frame.size());
        turn_back_bounded(kind, frame, plane_size, shape.max_value, rgb);
        frame = std::move(rgb);
      }
    }
  }
  if (settings.pixel_chunks)
    for (std::size_t g = 0; g < gops.size(); ++g) {
      try_pixel_chunk(shape, *gops[g], settings, encoded[g]);
      try_sparse_chunk(shape, *gops[g], settings, codes_frames_alone(predictor, encoded[g]), encoded[g],
                       std::move(sparse[g]));
    }
  return encoded;
}

std::string chunk_kind(const Predictor& predictor, std::span<const std::uint8_t> head, std::size_t channels) {
  if (head.empty()) return "?";
  if (head[0] == kColourChunk) {
    if (head.size() < 2) return "?";
    return (head[1] == codecs::kGreenSplitTransform ? "green " : "rct ") + chunk_kind(predictor, head.subspan(2), channels);
  }
  if (head[0] == kPixelChunk) return "pixels";
  if (head[0] == kSparseChunk) return "sparse";
  if (head[0] == kGroupChunk) return "group";
  if (head[0] == kGroupMemberChunk) return "in group";
  const auto choices = predictor.choices();
  std::string kind = predictor.identity().kind;
  if (!choices.empty() && head.size() >= 3) {  // version, quantizer, choice
    const Predictor* used = chunk_predictor(predictor, head);
    kind = used ? used->identity().kind : "?";
  }
  if (head[0] >= kLevelMapVersion && head[0] <= kChunkVersion &&
      any_plane_mode(head, channels, [](std::size_t, std::uint8_t mode) { return (mode & kLevelMapFlag) != 0; }))
    kind += " + level maps";
  return kind;
}

std::vector<GopFrames> decode_gops(const Predictor& predictor, const FrameShape& shape,
                                   std::span<const std::span<const std::uint8_t>> chunks,
                                   std::span<const std::size_t> frame_counts, const CodingSettings& settings,
                                   const RowsDone& done, Frames wanted) {
  if (chunks.size() != frame_counts.size()) throw std::invalid_argument("chunk and frame count lists differ");
  std::vector<std::span<const std::uint8_t>> predicted;
  std::vector<std::size_t> counts, where;
  std::vector<GopFrames> frames(chunks.size());
  std::vector<std::span<const std::uint8_t>> transformed;
  std::vector<std::size_t> transformed_counts, transformed_at;
  std::vector<std::uint8_t> transform_of;
  for (std::size_t g = 0; g < chunks.size(); ++g) {
    if (!chunks[g].empty() && chunks[g][0] == kColourChunk) {
      const bool lossless = settings.bound.mode == codecs::BoundMode::Lossless;
      if (chunks[g].size() < 2 || chunks[g][1] < codecs::kRctTransform || chunks[g][1] > codecs::kGreenSplitTransform)
        throw DataError("chunk: unknown colour transform");
      if (shape.channels != 3 || !codecs::rct_fits(shape.max_value) ||
          (chunks[g][1] == codecs::kRctTransform) != lossless)
        throw DataError("chunk: a colour transform where the archive cannot have one");
      transformed.push_back(chunks[g].subspan(2)), transformed_counts.push_back(frame_counts[g]), transformed_at.push_back(g);
      transform_of.push_back(chunks[g][1]);
    } else if (is_pixel_domain_chunk(chunks[g])) {
      std::function<void(std::size_t, std::size_t, std::span<const std::uint16_t>)> plane_done;
      if (done) plane_done = [&](std::size_t t, std::size_t c, std::span<const std::uint16_t> plane) { done(g, t, c, 0, plane); };
      frames[g] = decode_pixel_domain_chunk(shape, chunks[g], frame_counts[g], plane_done, wanted);
    } else {
      predicted.push_back(chunks[g]), counts.push_back(frame_counts[g]), where.push_back(g);
    }
  }
  if (!transformed.empty()) {
    // Decoded in the transform's domain, and turned back a band of rows at a time as the last of a
    // frame's planes finishes them, while they are in cache (a pass over whole frames afterwards
    // was 12% of colour vtest's decoding); `done` hears of the three planes' rows then.
    const std::size_t plane_size = std::size_t(shape.width) * shape.height;
    std::vector<std::vector<std::uint8_t>> planes_finished(transformed.size());
    // Streamed: a finished frame's buffer, for the next; only where frames finish in order (`done`'s
    // rows must stay valid while a checksum waits for the rows before them: bidirectional GOPs).
    std::vector<Pixels> spare(transformed.size());
    std::vector<bool> in_order(transformed.size(), false);
    for (std::size_t i = 0; i < transformed.size() && wanted == Frames::Streamed; ++i) {
      const Predictor* used = chunk_predictor(predictor, transformed[i]);  // none: decode_predicted refuses it
      in_order[i] = used && !used->bidirectional();
    }
    for (std::size_t i = 0; i < transformed.size(); ++i) {
      frames[transformed_at[i]].resize(transformed_counts[i]);  // each frame's buffer taken with its first rows
      planes_finished[i].assign(transformed_counts[i], 0);
    }
    const RowsDone turn_back = [&](std::size_t i, std::size_t t, std::size_t c, std::size_t y0,
                                   std::span<const std::uint16_t> rows) {
      const bool last_plane = planes_finished[i][t] == shape.channels - 1;
      if ((y0 * shape.width + rows.size()) == plane_size) ++planes_finished[i][t];
      if (!last_plane) return;
      // `rows` lie in the decoded frame, planar: its start is c planes and y0 rows before them.
      const std::span<const std::uint16_t> decoded(rows.data() - (c * plane_size + y0 * shape.width), shape.size());
      const std::size_t g = transformed_at[i];
      if (frames[g][t].empty()) frames[g][t] = spare[i].empty() ? Pixels(shape.size()) : std::move(spare[i]);
      if (settings.bound.mode != codecs::BoundMode::Lossless)  // each plane within its share; every channel clamped
        turn_back_bounded(transform_of[i], decoded, plane_size, shape.max_value, frames[g][t], y0 * shape.width, rows.size());
      else if (!codecs::inverse_rct(decoded, plane_size, shape.max_value, frames[g][t], y0 * shape.width, rows.size()))
        throw DataError("chunk: the colour transform's planes leave the pixel range");
      if (done)
        for (std::size_t k = 0; k < shape.channels; ++k)
          done(g, t, k, y0, std::span<const std::uint16_t>(frames[g][t]).subspan(k * plane_size + y0 * shape.width, rows.size()));
      if (in_order[i] && planes_finished[i][t] == shape.channels) spare[i] = std::move(frames[g][t]);
    };
    decode_predicted(predictor, colour_transformed_shape(shape), transformed, transformed_counts, settings, turn_back,
                     Frames::Streamed);
    for (std::size_t i = 0; i < transformed.size(); ++i)
      for (const std::uint8_t n : planes_finished[i])
        if (n != shape.channels) throw DataError("chunk: a colour-transformed frame was not decoded whole");
  }
  if (where.size() == chunks.size()) return decode_predicted(predictor, shape, chunks, frame_counts, settings, done, wanted);
  if (!where.empty()) {
    auto decoded = decode_predicted(predictor, shape, predicted, counts, settings, subset_done(done, where), wanted);
    for (std::size_t i = 0; i < where.size(); ++i) frames[where[i]] = std::move(decoded[i]);
  }
  return frames;
}

}  // namespace tezip
