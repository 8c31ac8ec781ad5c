#pragma once
// How residuals are turned into bytes: recorded in the archive (format/archive.hpp) and needed again
// by the GOP codec (compressor/gop_codec.hpp) to decode.
#include <cstdint>

#include "codecs/quantize/error_bound.hpp"
#include "codecs/entropy/symbol_coder.hpp"

namespace tezip {

enum class QuantizerKind : std::uint8_t { Linear = 0, Interval = 1 };

// How residuals are turned into bytes; recorded in the archive and needed again to decode.
struct CodingSettings {
  codecs::ErrorBound bound;
  QuantizerKind quantizer = QuantizerKind::Linear;
  int zstd_level = 9;  // docs/defaults.md
  // Encoder only: where zstd at zstd_level wins a stream, it is compressed again at this level
  // (docs/defaults.md, "zstd level where zstd wins"); 0: not.
  int zstd_win_level = 19;
  // ... and where zstd came within this factor of the winner (docs/defaults.md, "Left classes": the
  // rANS streams that now beat level 9 on castle lose to level 19).
  double zstd_win_margin = 1.15;
  // Coders tried besides zstd; the smallest output is kept per stream. The static context rANS
  // coder decodes ~4x faster than the adaptive one and was within 1.5% of its size on gray camera
  // data, 12% on the colour vtest (docs/defaults.md, "Entropy coder" and "--coder best").
  bool rans_coder = true;
  bool adaptive_coder = false;
  bool lzma_coder = false;  // LZMA2 (codecs/entropy/lzma_frame.hpp): --coder best
  // Encoder only (each plane's chunk record says what it used): search block motion against the
  // previous reconstruction and use it where the estimate says it pays (codecs/transform/block_motion.hpp).
  bool coded_motion = true;
  // Encoder only: motion fields may mark blocks spatial (codecs::kSpatialBlock) where that pays.
  bool spatial_blocks = true;
  // Encoder only: a sequential GOP's frame may be forecast from two references (frames t - 1 and
  // t - 2), each with a searched field, where that pays (chunk version 10, compressor/gop_codec.cpp;
  // losslessly weighed only while the GOP's frames take it).
  bool second_reference = true;
  // Encoder only, with second_reference: such a frame may average frames t - 3 and t - 4 too, each
  // displaced by the second field chained through the fields of the frames between, where that
  // pays (chunk version 16).
  bool more_references = true;
  // Encoder only: an intra plane (a key frame's, or one coded spatially where its forecast missed)
  // may be forecast pixel by pixel by the mean of its four reconstructed neighbours instead of the
  // median, where the estimate of its sampled symbols is smaller (chunk version 17).
  bool intra_mean = true;
  // Encoder only: a lossless plane whose values leave gaps between its smallest and largest is
  // coded as indices into the levels it uses (codecs::LevelMap), its forecast mapped to the nearest
  // level's index, where the estimate says that is smaller (chunk version 18).
  bool level_maps = true;
  // Encoder only: each symbol's side class, the detail of its plane's forecast there
  // (codecs::side_classes), offered to the striped rANS coder's contexts, which takes it where its
  // estimate saves 1% (chunk version 11, codecs/entropy/striped_rans.hpp).
  bool side_classes = true;
  // Encoder only: the spatial transforms for smooth fields, the gradient and the interpolation
  // (codecs::PlaneTransform), and, on gray planes of lossless and uniform-tolerance modes,
  // interpolated planes: a plane coded by the interpolation of its own pixels' bins (a key frame's
  // where that is estimated smaller than the median's, a forecast plane's where its residual took
  // a smooth transform). Chunk version 14; a GOP that takes any is coded without them too and the
  // smaller kept (compressor/gop_codec.cpp, kInterpolatedPlane).
  bool smooth_modes = true;
  // Encoder only, bounded gray planes with smooth_modes: the interpolation in closed loop, of the
  // plane's pixels and of its residual (kInterpolatedResidual, chunk version 15), weighed on every
  // forecast plane; false: only where the residual took a smooth transform. True with --profile
  // max: smooth fields 3-9% smaller at a bound, bounded gray video 15-40% slower to encode
  // (docs/defaults.md, "Interpolated planes quantized in closed loop").
  bool interpolate_every_plane = false;
  // Encoder only: a plane may store its symbols in the polyphase layout
  // (codecs/transform/polyphase.hpp) where the contexts' estimate says so (chunk version 13).
  bool polyphase = true;
  // Encoder only, bounded modes: a frame's compensated forecast may be smoothed
  // (codecs::smooth_forecast) where its estimate says so (chunk version 12).
  bool smoothed_forecast = true;
  // Encoder only, bounded modes: each colour GOP's motion is searched on the channel whose field
  // gives its first frame with motion the smallest estimate, not always on channel 0
  // (compressor/gop_codec.cpp, choose_motion; the decoder reads the vectors as they are).
  bool measured_motion_channel = true;
  // Encoder only, uniform bounds and lossless: each GOP's motion search prices residuals as its
  // first frame with motion measures better, by the uniform table, by the residual's own shares or
  // by those shares in context (codecs::ResidualPrices; compressor/gop_codec.cpp, choose_motion).
  bool measured_residual_prices = true;
  // Encoder only: that choice judged by the frame's estimate in the striped coder's contexts
  // (codecs::estimate_context_cost), not by its order-0 estimate. auto's trial keeps the order-0
  // estimate: on its bands of 32 rows the contexts' estimate reads too few rows to rank fields.
  bool context_price_estimate = true;
  // Encoder only: a predictor with choices (auto) codes every GOP whole with each choice and keeps
  // the smallest, instead of measuring two 3-frame windows (--profile max).
  bool whole_gop_trials = false;
  // Encoder only: a predictor with choices (auto) codes every GOP with its first, without a trial:
  // the quick chunks of short sequences before their group is tried (compressor/encoder.cpp).
  bool first_choice_only = false;
  // Encoder only: a GOP's pixels through zstd (a pixel chunk, codecs/quantize/pixel_frames.hpp) where that
  // is smaller than its predictive chunk.
  bool pixel_chunks = true;
  // Encoder only: a colour GOP, lossless or at an abs bound (linear quantizer), may go through the
  // reversible colour transform where a trial says it codes smaller
  // (codecs/transform/colour_transform.hpp); false: never.
  bool colour_transform = true;
  // Set by the encoder for GOPs it codes through a colour transform: their chroma planes
  // (channels 1 and 2) may take the polyphase layout when coded against a forecast, and in bounded
  // modes take chroma_tolerance, the luma plane the bound's tolerance less it (the RCT: 0, exact
  // chroma, so that every RGB channel comes back with Y's error; subtract green: a share).
  bool transformed_chroma = false;
  std::uint32_t chroma_tolerance = 0;
  // Encoder only, with transformed_chroma: the chroma planes take the luma's coded motion too
  // (else they keep the predictor's forecast); lossless GOPs' colour trial measures both.
  bool chroma_follows_motion = false;
  // Encoder only, for auto's trial windows: the key frame is quantized as its reference, but its
  // symbols are left out of the chunk (the same key frame whatever the choice; the trial measures
  // what the choices code differently).
  bool key_frame_uncoded = false;
  // Encoder only, for auto's trials: a motion search or a trial chunk met again (the same inputs, by
  // their XXH3-128 fingerprint) is reused, not computed again; the archive is the same either way.
  bool reuse_trial_work = true;
};

// Per-chunk statistics kept in the archive index for `tezip info`.
struct ChunkStats {
  std::uint64_t symbol_bytes = 0;   // bytes of the main symbol stream
  std::uint64_t run_bytes = 0;      // interval quantizer runs (values and lengths)
  std::uint64_t literal_bytes = 0;  // PwRel escapes
  std::uint64_t literal_count = 0;
  codecs::EntropyCoderKind coder = codecs::EntropyCoderKind::Zstd;
  bool pixels = false;  // a pixel chunk: the frames as they are, through `coder`
  // Archive version 6: the chunk's sequence is member `member` of a group of short sequences,
  // whose frames are all in the group's first chunk (member 0; compressor/chunk_group.hpp).
  bool grouped = false;
  std::uint32_t member = 0;
};

}  // namespace tezip
