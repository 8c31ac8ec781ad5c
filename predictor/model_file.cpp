#include "predictor/model_file.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace tezip {
namespace {

constexpr char kMagic[8] = {'T', 'Z', 'M', 'O', 'D', 'E', 'L', '\n'};
constexpr std::uint32_t kTorchWeights = 1, kTensorWeights = 2;
constexpr std::uint64_t kMaxHeader = 1 << 20;
// The tensor list (version 2).
constexpr std::uint8_t kFloat32 = 1;
constexpr std::size_t kMaxName = 64, kMaxRank = 8;
constexpr std::uint32_t kMaxTensors = 4096;

static_assert(std::endian::native == std::endian::little, "model files are little-endian, as is this host");
static_assert(std::numeric_limits<float>::is_iec559 && sizeof(float) == 4, "float32 weights need IEEE 754 floats");

template <typename T>
void put(std::vector<std::uint8_t>& out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(std::uint8_t(std::uint64_t(value) >> (8 * i)));
}

template <typename T>
T get(std::span<const std::uint8_t> bytes, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= std::uint64_t(bytes[at + i]) << (8 * i);
  return T(v);
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxName) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
  });
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace

std::string sha256_hex(std::span<const std::uint8_t> bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed");
  static const char* hex = "0123456789abcdef";
  std::string text;
  for (unsigned i = 0; i < length; ++i) {
    text += hex[digest[i] >> 4];
    text += hex[digest[i] & 15];
  }
  return text;
}

bool ModelFile::has_weights(const std::string& sha256) const {
  return !sha256.empty() && (sha256 == weights_sha256 || sha256 == weights_sha256_v1);
}

std::vector<std::uint8_t> ModelFile::serialize() {
  if (version != kTorchWeights && version != kTensorWeights)
    throw std::invalid_argument("model format version " + std::to_string(version) + " cannot be written");
  weights_sha256 = sha256_hex(weights);
  nlohmann::json header;
  header["kind"] = kind;
  header["options"] = nlohmann::json::parse(options.to_json());
  header["metadata"] = nlohmann::json::parse(metadata_json);
  header["weights_bytes"] = weights.size();
  header["weights_sha256"] = weights_sha256;
  if (!weights_sha256_v1.empty()) header["weights_sha256_v1"] = weights_sha256_v1;
  const std::string text = header.dump(2);
  std::vector<std::uint8_t> out(kMagic, kMagic + 8);
  put<std::uint32_t>(out, version);
  put<std::uint64_t>(out, text.size());
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), weights.begin(), weights.end());
  return out;
}

ModelFile parse_model(std::span<const std::uint8_t> bytes, const std::string& name) {
  auto fail = [&](const std::string& why) -> ModelError { return ModelError(name + ": not a usable tezip model: " + why); };
  if (bytes.size() < 20 || std::memcmp(bytes.data(), kMagic, 8) != 0) throw fail("no model header");
  const auto version = get<std::uint32_t>(bytes, 8);
  if (version != kTorchWeights && version != kTensorWeights)
    throw fail("model format version " + std::to_string(version) + " is not supported (1 and 2 are)");
  const auto header_size = get<std::uint64_t>(bytes, 12);
  if (header_size > kMaxHeader || header_size > bytes.size() - 20) throw fail("truncated header");
  ModelFile model;
  model.version = version;
  std::uint64_t weights_bytes = 0;
  try {
    const auto header = nlohmann::json::parse(bytes.begin() + 20, bytes.begin() + 20 + std::ptrdiff_t(header_size));
    model.kind = header.at("kind").get<std::string>();
    model.options = PredNetOptions::from_json(header.at("options").dump());
    model.metadata_json = header.value("metadata", nlohmann::json::object()).dump();
    weights_bytes = header.at("weights_bytes").get<std::uint64_t>();
    model.weights_sha256 = header.at("weights_sha256").get<std::string>();
    model.weights_sha256_v1 = header.value("weights_sha256_v1", std::string());
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("bad header: ") + e.what());
  } catch (const std::invalid_argument& e) {
    throw fail(e.what());
  }
  if (model.kind != "prednet") throw fail("unknown model kind '" + model.kind + "'");
  const std::uint64_t rest = bytes.size() - 20 - header_size;
  if (rest != weights_bytes)
    throw fail(rest < weights_bytes ? "truncated weights" : "trailing bytes after the weights");
  model.weights.assign(bytes.begin() + 20 + std::ptrdiff_t(header_size), bytes.end());
  if (sha256_hex(model.weights) != model.weights_sha256) throw fail("the weights do not match their SHA-256 (corrupt file)");
  return model;
}

ModelFile load_model_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError(path.string() + ": cannot open model file");
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw ModelError(path.string() + ": cannot read model file");
  return parse_model(bytes, path.string());
}

std::vector<std::uint8_t> serialize_weights(const std::vector<WeightTensor>& tensors) {
  if (tensors.size() > kMaxTensors) throw std::invalid_argument("serialize_weights: too many tensors");
  std::vector<std::uint8_t> out;
  put<std::uint32_t>(out, std::uint32_t(tensors.size()));
  for (const auto& t : tensors) {
    std::uint64_t count = 1;
    for (const auto d : t.shape) count *= std::uint64_t(d);
    if (!valid_name(t.name) || t.shape.size() > kMaxRank || count != t.values.size() ||
        std::any_of(t.shape.begin(), t.shape.end(), [](std::int64_t d) { return d < 0; }))
      throw std::invalid_argument("serialize_weights: tensor '" + t.name + "' is malformed");
    put<std::uint16_t>(out, std::uint16_t(t.name.size()));
    out.insert(out.end(), t.name.begin(), t.name.end());
    out.push_back(kFloat32);
    out.push_back(std::uint8_t(t.shape.size()));
    for (const auto d : t.shape) put<std::uint64_t>(out, std::uint64_t(d));
    const std::size_t at = out.size();
    out.resize(at + 4 * t.values.size());
    std::memcpy(out.data() + at, t.values.data(), 4 * t.values.size());  // little-endian IEEE 754
  }
  return out;
}

std::vector<WeightTensor> parse_weights(std::span<const std::uint8_t> bytes, const std::string& name) {
  std::size_t pos = 0;
  auto fail = [&](const std::string& why) -> ModelError {
    return ModelError(name + ": the weights are malformed: " + why + " (at byte " + std::to_string(pos) + ")");
  };
  auto need = [&](std::size_t n) {
    if (n > bytes.size() - pos) throw fail("truncated");
  };
  need(4);
  const auto count = get<std::uint32_t>(bytes, pos);
  pos += 4;
  if (count > kMaxTensors) throw fail(std::to_string(count) + " tensors exceed the limit " + std::to_string(kMaxTensors));
  std::vector<WeightTensor> tensors;
  std::set<std::string> names;
  for (std::uint32_t i = 0; i < count; ++i) {
    WeightTensor t;
    need(2);
    const std::size_t length = get<std::uint16_t>(bytes, pos);
    pos += 2;
    need(length);
    t.name.assign(reinterpret_cast<const char*>(bytes.data() + pos), length);
    pos += length;
    if (!valid_name(t.name)) throw fail("a tensor name is empty, longer than 64 bytes or not [A-Za-z0-9_.]");
    if (!names.insert(t.name).second) throw fail("tensor '" + t.name + "' appears twice");
    need(2);
    const std::uint8_t dtype = bytes[pos], rank = bytes[pos + 1];
    pos += 2;
    if (dtype != kFloat32) throw fail("tensor '" + t.name + "' has dtype " + std::to_string(dtype) + " (only 1, float32, is known)");
    if (rank > kMaxRank) throw fail("tensor '" + t.name + "' has rank " + std::to_string(rank));
    std::uint64_t values = 1;
    for (int d = 0; d < rank; ++d) {
      need(8);
      const auto dim = get<std::uint64_t>(bytes, pos);
      pos += 8;
      // Each dimension, and so the product, is bounded by the bytes that remain: no overflow, no
      // allocation beyond the file's size.
      if (dim > bytes.size() / 4 || (dim != 0 && values > (bytes.size() / 4) / dim))
        throw fail("tensor '" + t.name + "' is larger than the file");
      values *= dim;
      t.shape.push_back(std::int64_t(dim));
    }
    need(4 * values);
    t.values.resize(values);
    std::memcpy(t.values.data(), bytes.data() + pos, 4 * values);
    pos += 4 * values;
    tensors.push_back(std::move(t));
  }
  if (pos != bytes.size()) throw fail(std::to_string(bytes.size() - pos) + " trailing bytes");
  return tensors;
}

void check_weights(const std::vector<WeightTensor>& tensors, const PredNetOptions& options, const std::string& name) {
  const auto expected = options.parameters();
  auto fail = [&](const std::string& why) -> ModelError {
    return ModelError(name + ": the weights do not fit the model's options: " + why);
  };
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (i >= tensors.size()) throw fail("parameter '" + expected[i].name + "' is missing");
    if (tensors[i].name != expected[i].name)
      throw fail("tensor " + std::to_string(i) + " is '" + tensors[i].name + "', the network's parameter " +
                 std::to_string(i) + " is '" + expected[i].name + "'");
    if (tensors[i].shape != expected[i].shape)
      throw fail("parameter '" + expected[i].name + "' has another shape (" + shape_text(tensors[i].shape) + ", not " +
                 shape_text(expected[i].shape) + ")");
  }
  if (tensors.size() > expected.size()) throw fail("tensor '" + tensors[expected.size()].name + "' is not a parameter of the network");
}

std::string dataset_model_name(const std::string& weights_sha256) {
  return "prednet-" + weights_sha256.substr(0, 16) + ".tzm";
}

}  // namespace tezip
