#pragma once
#include <filesystem>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "predictor/model_file.hpp"
#include "predictor/predictor.hpp"

namespace tezip {

// The decoder's predictor cannot reproduce the encoder's forecasts on this machine (DESIGN.md §6).
struct DeterminismError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What needs libtorch (training, --arithmetic float32, version-1 model files) is not available in
// this build or installation: the learned module (libtezip_learned.so, built only with libtorch;
// predictor/learned/module_table.hpp) is missing or from another build. Exact PredNet needs no libtorch.
struct LearnedModuleError : ModelError {
  using ModelError::ModelError;
};

// How `--predictor prednet` runs (issue 4, 7).
struct LearnedPredictorOptions {
  std::filesystem::path model;       // empty: the default shipped model (default_model_path())
  // A model in memory (e.g. adapted to the input by --adapt), used instead of `model`; the archive
  // names it `model_name`.
  std::shared_ptr<const ModelFile> model_data;
  std::string model_name = "adapted";
  // Store the model (as format 2) in the archive, so that decoding needs no model file.
  bool embed = false;
  std::string arithmetic = "exact";  // "exact" (integer, identical on every machine) or "float32"
  // Closed loop (default): the network is fed the reconstructed frames. Open loop (TEZIP's window
  // mode): after the warm-up it is fed its own forecasts, so a GOP's forecasts depend only on its
  // key frames.
  bool open_loop = false;
  std::size_t warmup = 1;  // key frames at the start of each GOP (>= 1)
  std::size_t batch = 8;   // GOPs per network call
};

// A PredNet predictor from a model file (predictor/prednet_predictor.cpp). Exact arithmetic runs in
// the core; float32 and version-1 model files need libtorch. Throws ModelError (bad model file;
// LearnedModuleError when this needs libtorch and the build has none) or std::invalid_argument.
std::unique_ptr<Predictor> make_prednet_predictor(const LearnedPredictorOptions& options);
// The model `options` name (model_data, else the file), as the bytes of a format-2 model file: what
// an archive embeds. Throws as make_prednet_predictor.
std::vector<std::uint8_t> prednet_model_bytes(const LearnedPredictorOptions& options);

// GOPs are the unit of parallel work (the encoder's and decoder's thread pools), so a program that
// owns its process (the tezip command) runs torch single-threaded inside each float32 network call
// (the exact engine is always single-threaded per call). A library must not: a loader shares
// libtorch's thread setting with the user's training. Takes effect when the learned module is
// loaded; it loads nothing itself.
void use_single_threaded_torch();

// Rebuilds the predictor an archive names: takes the model whose weights have the recorded SHA-256
// from `model` if given, else from `embedded` (the model file the archive carries) if not empty,
// else from model_search_path(); rebuilds it with the recorded configuration, and compares its
// fingerprint with the recorded one. A model whose weights_sha256_v1 is the recorded SHA-256 (a
// converted version-1 file) is the same model. Throws ModelError when no such model is found or the
// embedded one is malformed or another model, and DeterminismError when the fingerprints differ.
std::unique_ptr<Predictor> prednet_predictor_for(const PredictorIdentity& identity, const std::filesystem::path& model = {},
                                                 std::span<const std::uint8_t> embedded = {});

// $TEZIP_MODEL_PATH (folders or files, ':'-separated), then the shipped models folder.
std::vector<std::filesystem::path> model_search_path();
std::filesystem::path default_model_path();

}  // namespace tezip
