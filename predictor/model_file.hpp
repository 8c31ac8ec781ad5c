#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "predictor/prednet_options.hpp"

namespace tezip {

// A damaged, truncated or mismatched model file; the message names the file.
struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One float32 tensor of a model's weights, row-major.
struct WeightTensor {
  std::string name;  // the network's parameter name, e.g. "lstm0.weight"
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

// A trained predictor on disk (docs/format.md, "Model files"):
//   "TZMODEL\n", u32 version, u64 header length, header (JSON), weights
// The header holds the options that rebuild the network, training metadata, and the size and
// SHA-256 of the weights. Version 2 weights are a list of float32 tensors (serialize_weights),
// read without libtorch; version 3 the same list, compact (serialize_compact_weights); version 1
// weights are a torch::save stream of the module, which only the learned module (libtorch) reads.
// Everything is checked before the weights are used.
struct ModelFile {
  std::string kind = "prednet";
  PredNetOptions options;
  std::string metadata_json = "{}";  // training data, epochs, validation figures...
  std::uint32_t version = 2;         // the layout of `weights`: 2 tensor list, 3 compact list, 1 torch::save
  std::vector<std::uint8_t> weights;
  std::string weights_sha256;  // hex SHA-256 of `weights`; filled by parse_model and serialize
  // A model converted from version 1: the SHA-256 of its torch::save weights,
  // which archives written with the version-1 file record. Empty otherwise.
  std::string weights_sha256_v1;

  // Whether an archive that recorded `sha256` was written with these weights.
  bool has_weights(const std::string& sha256) const;
  std::vector<std::uint8_t> serialize();  // also sets weights_sha256
};

// `name` labels errors. Throws ModelError.
ModelFile parse_model(std::span<const std::uint8_t> bytes, const std::string& name);
ModelFile load_model_file(const std::filesystem::path& path);

// The tensor list of version 2 (docs/format.md), in the order given: a model's weights are written
// in its network's parameter order (PredNetOptions::parameters()), so equal weights give equal
// bytes and an equal SHA-256.
std::vector<std::uint8_t> serialize_weights(const std::vector<WeightTensor>& tensors);
// Throws ModelError naming `name` on anything malformed: truncation, bad names, dtypes or sizes.
std::vector<WeightTensor> parse_weights(std::span<const std::uint8_t> bytes, const std::string& name);
// Version 3: the same list in one zstd frame, where each tensor whose rows (its first dimension: a
// convolution's output channels) hold int16 multiples of one power of two per row is stored as such
// (dtype 2: the row exponents, then the values zigzagged in two byte planes). Lossless: every float
// comes back bit for bit, whatever its form; weights rounded by round_weights to 8 bits take about a byte each.
std::vector<std::uint8_t> serialize_compact_weights(const std::vector<WeightTensor>& tensors);
std::vector<WeightTensor> parse_compact_weights(std::span<const std::uint8_t> bytes, const std::string& name);
// The tensors of a model of version 2 or 3; throws ModelError (version 1: prednet_weights).
std::vector<WeightTensor> tensor_weights(const ModelFile& model, const std::string& name);

// Rounds every row of every tensor (as above) to `bits`-bit signed integers (2..16) times the
// smallest power of two that holds the row's largest value: each weight then keeps about `bits`
// significant bits of its row's scale. The exact engine quantizes to 16 bits per output channel
// (docs/exact_inference.md); 8 bits left PredNet's next-frame MSE within 0.4% of the exact weights'
// (docs/training.md, "The embedded model's size").
void round_weights(std::vector<WeightTensor>& tensors, int bits);
// `model` as version 3, its weights rounded to `bits` first (0: as they are). Throws as prednet_weights.
ModelFile compact_model(const ModelFile& model, int bits, const std::string& name);

// Throws ModelError unless `tensors` are exactly the parameters `options` define, in order.
void check_weights(const std::vector<WeightTensor>& tensors, const PredNetOptions& options, const std::string& name);

// A PredNet model's weights, checked against its options: version 2 read here, version 1 through
// the learned module (libtorch). Throws ModelError, or LearnedModuleError (learned_predictor.hpp)
// for a version-1 file where libtorch is missing. (predictor/learned_module.cpp)
std::vector<WeightTensor> prednet_weights(const ModelFile& model, const std::string& name);
// The same model as version 2, its tensors bit for bit; its version-1 SHA-256 is kept as
// weights_sha256_v1, so archives written with the old file still find the new one. A version-2
// model comes back unchanged. Throws as prednet_weights.
ModelFile upgrade_model(const ModelFile& model, const std::string& name);

// The file name of a model a batch job adapted to its dataset, written beside the shards:
// "prednet-" and the first 16 hex digits of its weights' SHA-256, ".tzm". The shards, which record
// the SHA-256, find it there (compressor/decoder.cpp).
std::string dataset_model_name(const std::string& weights_sha256);

// Lowercase hex SHA-256 (OpenSSL).
std::string sha256_hex(std::span<const std::uint8_t> bytes);

}  // namespace tezip
