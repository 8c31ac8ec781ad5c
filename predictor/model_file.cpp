#include "predictor/model_file.hpp"

#include <openssl/evp.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace tezip {
namespace {

constexpr char kMagic[8] = {'T', 'Z', 'M', 'O', 'D', 'E', 'L', '\n'};
constexpr std::uint32_t kVersion = 1;
constexpr std::uint64_t kMaxHeader = 1 << 20;

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

std::vector<std::uint8_t> ModelFile::serialize() {
  weights_sha256 = sha256_hex(weights);
  nlohmann::json header;
  header["kind"] = kind;
  header["options"] = nlohmann::json::parse(options.to_json());
  header["metadata"] = nlohmann::json::parse(metadata_json);
  header["weights_bytes"] = weights.size();
  header["weights_sha256"] = weights_sha256;
  const std::string text = header.dump(2);
  std::vector<std::uint8_t> out(kMagic, kMagic + 8);
  put<std::uint32_t>(out, kVersion);
  put<std::uint64_t>(out, text.size());
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), weights.begin(), weights.end());
  return out;
}

ModelFile parse_model(std::span<const std::uint8_t> bytes, const std::string& name) {
  auto fail = [&](const std::string& why) -> ModelError { return ModelError(name + ": not a usable tezip model: " + why); };
  if (bytes.size() < 20 || std::memcmp(bytes.data(), kMagic, 8) != 0) throw fail("no model header");
  const auto version = get<std::uint32_t>(bytes, 8);
  if (version != kVersion) throw fail("model format version " + std::to_string(version) + " is not supported");
  const auto header_size = get<std::uint64_t>(bytes, 12);
  if (header_size > kMaxHeader || header_size > bytes.size() - 20) throw fail("truncated header");
  ModelFile model;
  std::uint64_t weights_bytes = 0;
  try {
    const auto header = nlohmann::json::parse(bytes.begin() + 20, bytes.begin() + 20 + std::ptrdiff_t(header_size));
    model.kind = header.at("kind").get<std::string>();
    model.options = PredNetOptions::from_json(header.at("options").dump());
    model.metadata_json = header.value("metadata", nlohmann::json::object()).dump();
    weights_bytes = header.at("weights_bytes").get<std::uint64_t>();
    model.weights_sha256 = header.at("weights_sha256").get<std::string>();
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

}  // namespace tezip
