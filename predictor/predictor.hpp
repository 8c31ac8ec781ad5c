#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace tezip {

// The shape of the frames a predictor sees: planar channels of width x height integers.
struct FrameShape {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint32_t channels = 1;
  std::uint32_t max_value = 255;
  std::size_t size() const { return std::size_t(width) * height * channels; }
};

// What the archive records so that the decoder builds the same predictor (DESIGN.md §4, §6).
struct PredictorIdentity {
  std::string kind;            // "intra", "previous", "linear", "motion", "prednet"
  std::string configuration;   // options that rebuild it (empty for classical predictors)
  std::string weights_sha256;  // empty for predictors without weights
  // Learned predictors: how the arithmetic was carried out ("exact", or "float32" with the CPU
  // kernels used) and the SHA-256 of the predictor's output on a fixed probe. A decoder whose own
  // fingerprint differs cannot reproduce the forecasts and must refuse (DESIGN.md §6).
  std::string arithmetic;
  std::string fingerprint;
};

// Whatever a predictor remembers about one GOP: the frames seen so far, a recurrent state.
class GopState {
 public:
  virtual ~GopState() = default;
};

// Forecasts each frame of a GOP from the frames before it. The caller alternates: `forecast`
// frame t for a batch of GOPs, then `observe` the frames the decoder reconstructs (closed loop),
// so encoder and decoder drive the predictor through identical calls. Batching GOPs lets a
// network run them through one forward pass. Implementations are stateless apart from GopState
// and may be shared between threads.
class Predictor {
 public:
  virtual ~Predictor() = default;
  virtual PredictorIdentity identity() const = 0;
  // Intra-only predictors make every frame a key frame.
  virtual bool intra_only() const { return false; }
  // The first key_frames() frames of every GOP are key frames (a learned predictor's warm-up).
  virtual std::size_t key_frames() const { return 1; }
  // Whether the encoder may replace this forecast, block by block, by the previous frame or the mean
  // of both where they are closer (codecs/transform/forecast_blocks.hpp): a learned forecast's fallback.
  virtual bool block_fallback() const { return false; }
  // Whether the forecast of frame t is exactly the reconstruction of frame t - 1 (`previous`): the
  // GOP codec then uses that frame in place and calls neither forecast nor observe, saving two
  // copies of every frame.
  virtual bool forecasts_previous_frame() const { return false; }
  // Whether forecast() only reads its GopStates: a caller may then skip the forecast of a frame it
  // does not use (a decoder whose planes all take coded motion), observe() following as ever.
  virtual bool forecast_is_pure() const { return false; }
  // Frames after the key frame are coded out of order, each forecast from reconstructed frames on
  // both sides (compressor/gop_codec.cpp, hierarchical GOPs); forecast() and observe() are then
  // used only by the dynamic GOP window.
  virtual bool bidirectional() const { return false; }
  // A predictor that lets the encoder choose, per GOP, among these (`auto`): the chunk records the
  // choice as its index + 1, and the decoder takes the same one. Empty for every other predictor.
  virtual std::span<const Predictor* const> choices() const { return {}; }
  // How many GOPs the encoder should hand to one forecast call (a network runs them as one batch).
  virtual std::size_t preferred_batch() const { return 1; }
  // A new GOP whose key frame (reconstructed) is `key_frame`.
  virtual std::unique_ptr<GopState> begin_gop(const FrameShape& shape, std::span<const std::uint16_t> key_frame) const = 0;
  // forecasts[i] receives the forecast of the next frame of gops[i] (shape.size() values each).
  virtual void forecast(std::span<GopState* const> gops, std::span<const std::span<std::uint16_t>> forecasts) const = 0;
  // frames[i] is the reconstructed frame that follows in gops[i].
  virtual void observe(std::span<GopState* const> gops, std::span<const std::span<const std::uint16_t>> frames) const = 0;
};

// "intra", "previous" (y[t-1]), "linear" (2 y[t-1] - y[t-2], clamped), "motion" (see
// motion_predictor.hpp) or "auto" (per GOP the one of previous, intra and linear that codes a sample
// of its frames smallest). Throws std::invalid_argument.
std::unique_ptr<Predictor> make_classical_predictor(const std::string& kind);

}  // namespace tezip
