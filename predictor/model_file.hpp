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

// A trained predictor on disk (docs/format.md, "Model files"):
//   "TZMODEL\n", u32 version, u64 header length, header (JSON), weights
// The header holds the options that rebuild the network, training metadata, and the size and
// SHA-256 of the weights; the weights are a torch::save archive of the module. Everything is
// checked before the weights reach torch.
struct ModelFile {
  std::string kind = "prednet";
  PredNetOptions options;
  std::string metadata_json = "{}";  // training data, epochs, validation figures...
  std::vector<std::uint8_t> weights;
  std::string weights_sha256;  // hex; filled by parse_model and serialize_model

  std::vector<std::uint8_t> serialize();  // also sets weights_sha256
};

// `name` labels errors. Throws ModelError.
ModelFile parse_model(std::span<const std::uint8_t> bytes, const std::string& name);
ModelFile load_model_file(const std::filesystem::path& path);

// Lowercase hex SHA-256 (OpenSSL).
std::string sha256_hex(std::span<const std::uint8_t> bytes);

}  // namespace tezip
