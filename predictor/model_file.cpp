#include "predictor/model_file.hpp"

#include <nettle/sha2.h>
#include <zstd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace tezip {
namespace {

constexpr char kMagic[8] = {'T', 'Z', 'M', 'O', 'D', 'E', 'L', '\n'};
constexpr std::uint32_t kTorchWeights = 1, kTensorWeights = 2, kCompactWeights = 3;
constexpr std::uint64_t kMaxHeader = 1 << 20;
// The tensor list (versions 2 and 3; dtype 2 only in version 3).
constexpr std::uint8_t kFloat32 = 1, kScaledInt16 = 2;
// Version 3's zstd frame: its level, and the largest tensor list it may declare.
constexpr int kCompactLevel = 19;
constexpr std::uint64_t kMaxCompactList = std::uint64_t{1} << 30;
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
  // Nettle, not OpenSSL: libcrypto costs every process that loads libtezip some 2 ms to map and
  // relocate, libnettle a tenth of that (docs/performance.md, "The process start").
  sha256_ctx context;
  sha256_init(&context);
  sha256_update(&context, bytes.size(), bytes.data());
  std::uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&context, SHA256_DIGEST_SIZE, digest);
  static const char* hex = "0123456789abcdef";
  std::string text;
  for (unsigned i = 0; i < SHA256_DIGEST_SIZE; ++i) {
    text += hex[digest[i] >> 4];
    text += hex[digest[i] & 15];
  }
  return text;
}

bool ModelFile::has_weights(const std::string& sha256) const {
  return !sha256.empty() && (sha256 == weights_sha256 || sha256 == weights_sha256_v1);
}

std::vector<std::uint8_t> ModelFile::serialize() {
  if (version != kTorchWeights && version != kTensorWeights && version != kCompactWeights)
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
  if (version != kTorchWeights && version != kTensorWeights && version != kCompactWeights)
    throw fail("model format version " + std::to_string(version) + " is not supported (1, 2 and 3 are)");
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

namespace {

// A row of a tensor as dtype 2 stores it: each value q * 2^exponent, q an int16.
struct ScaledRow {
  int exponent = 0;
  bool fits = true;
};

// The rows of a tensor: its first dimension (a conv's output channels); a scalar is one row.
std::size_t row_count(const WeightTensor& t) {
  return t.shape.empty() ? 1 : std::size_t(t.shape[0]);
}

// The largest exponent e with every value of the row an integer multiple of 2^e, and whether the
// multiples then fit an int16. -0, infinities and NaN never fit (dtype 2 could not restore them).
ScaledRow scaled_row(std::span<const float> row) {
  ScaledRow r;
  int lowest = std::numeric_limits<int>::max();
  for (const float v : row) {
    if (!std::isfinite(v) || (v == 0 && std::signbit(v))) return {0, false};
    if (v == 0) continue;
    int k = 0;
    auto m = std::int64_t(std::ldexp(std::frexp(double(v), &k), 24));  // v = m * 2^(k - 24), exactly
    k -= 24;
    while ((m & 1) == 0) m >>= 1, ++k;
    lowest = std::min(lowest, k);
  }
  if (lowest == std::numeric_limits<int>::max()) return r;  // all zeros
  if (lowest < -128 || lowest > 127) return {0, false};
  r.exponent = lowest;
  for (const float v : row)
    if (std::fabs(std::ldexp(double(v), -lowest)) > 32767) return {0, false};
  return r;
}

std::vector<std::uint8_t> write_list(const std::vector<WeightTensor>& tensors, bool compact) {
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
    const std::size_t rows = row_count(t), row_length = rows ? t.values.size() / rows : 0;
    std::vector<ScaledRow> scaled;
    for (std::size_t r = 0; compact && r < rows; ++r)
      scaled.push_back(scaled_row(std::span<const float>(t.values).subspan(r * row_length, row_length)));
    const bool as_int16 = compact && std::all_of(scaled.begin(), scaled.end(), [](const ScaledRow& r) { return r.fits; });
    out.push_back(as_int16 ? kScaledInt16 : kFloat32);
    out.push_back(std::uint8_t(t.shape.size()));
    for (const auto d : t.shape) put<std::uint64_t>(out, std::uint64_t(d));
    if (!as_int16) {
      const std::size_t at = out.size();
      out.resize(at + 4 * t.values.size());
      std::memcpy(out.data() + at, t.values.data(), 4 * t.values.size());  // little-endian IEEE 754
      continue;
    }
    // The row exponents, then the zigzagged int16 values as two byte planes, low bytes first: zstd
    // finds the small high bytes of small weights.
    for (const auto& r : scaled) out.push_back(std::uint8_t(std::int8_t(r.exponent)));
    const std::size_t at = out.size(), n = t.values.size();
    out.resize(at + 2 * n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto q = std::int32_t(std::ldexp(double(t.values[i]), -scaled[i / row_length].exponent));
      const auto z = std::uint16_t(q >= 0 ? 2 * q : -2 * q - 1);
      out[at + i] = std::uint8_t(z);
      out[at + n + i] = std::uint8_t(z >> 8);
    }
  }
  return out;
}

std::vector<WeightTensor> parse_list(std::span<const std::uint8_t> bytes, const std::string& name, bool compact) {
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
    if (dtype != kFloat32 && !(compact && dtype == kScaledInt16))
      throw fail("tensor '" + t.name + "' has dtype " + std::to_string(dtype) +
                 (compact ? " (1, float32, and 2, scaled int16, are known)" : " (only 1, float32, is known)"));
    if (rank > kMaxRank) throw fail("tensor '" + t.name + "' has rank " + std::to_string(rank));
    std::uint64_t values = 1;
    for (int d = 0; d < rank; ++d) {
      need(8);
      const auto dim = get<std::uint64_t>(bytes, pos);
      pos += 8;
      // Each dimension, and so the product, is bounded by the bytes that remain: no overflow, no
      // allocation beyond the file's size.
      if (dim > bytes.size() / 2 || (dim != 0 && values > (bytes.size() / 2) / dim))
        throw fail("tensor '" + t.name + "' is larger than the file");
      values *= dim;
      t.shape.push_back(std::int64_t(dim));
    }
    t.values.resize(values);
    if (dtype == kFloat32) {
      need(4 * values);
      std::memcpy(t.values.data(), bytes.data() + pos, 4 * values);
      pos += 4 * values;
    } else {
      const std::size_t rows = row_count(t), row_length = rows ? values / rows : 0;
      need(rows + 2 * values);
      const std::uint8_t* exponents = bytes.data() + pos;
      const std::uint8_t* low = exponents + rows;
      const std::uint8_t* high = low + values;
      for (std::size_t j = 0; j < values; ++j) {
        const std::uint32_t z = low[j] | std::uint32_t(high[j]) << 8;
        const std::int32_t q = (z & 1) ? -std::int32_t(z >> 1) - 1 : std::int32_t(z >> 1);
        t.values[j] = float(std::ldexp(double(q), std::int8_t(exponents[j / row_length])));
      }
      pos += rows + 2 * values;
    }
    tensors.push_back(std::move(t));
  }
  if (pos != bytes.size()) throw fail(std::to_string(bytes.size() - pos) + " trailing bytes");
  return tensors;
}

}  // namespace

std::vector<std::uint8_t> serialize_weights(const std::vector<WeightTensor>& tensors) {
  return write_list(tensors, false);
}

std::vector<WeightTensor> parse_weights(std::span<const std::uint8_t> bytes, const std::string& name) {
  return parse_list(bytes, name, false);
}

std::vector<std::uint8_t> serialize_compact_weights(const std::vector<WeightTensor>& tensors) {
  const auto list = write_list(tensors, true);
  std::vector<std::uint8_t> out(ZSTD_compressBound(list.size()));
  const std::size_t size = ZSTD_compress(out.data(), out.size(), list.data(), list.size(), kCompactLevel);
  if (ZSTD_isError(size)) throw std::runtime_error(std::string("compressing model weights: ") + ZSTD_getErrorName(size));
  out.resize(size);
  return out;
}

std::vector<WeightTensor> parse_compact_weights(std::span<const std::uint8_t> bytes, const std::string& name) {
  auto fail = [&](const std::string& why) { return ModelError(name + ": the weights are malformed: " + why); };
  if (ZSTD_findFrameCompressedSize(bytes.data(), bytes.size()) != bytes.size())
    throw fail("not one zstd frame (truncated, or trailing bytes)");
  const unsigned long long size = ZSTD_getFrameContentSize(bytes.data(), bytes.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > kMaxCompactList)
    throw fail("the zstd frame declares no usable size");
  std::vector<std::uint8_t> list(size);
  const std::size_t got = ZSTD_decompress(list.data(), list.size(), bytes.data(), bytes.size());
  if (ZSTD_isError(got) || got != size) throw fail("the zstd frame does not decompress");
  return parse_list(list, name, true);
}

std::vector<WeightTensor> tensor_weights(const ModelFile& model, const std::string& name) {
  if (model.version == kCompactWeights) return parse_compact_weights(model.weights, name);
  if (model.version == kTensorWeights) return parse_weights(model.weights, name);
  throw ModelError(name + ": model format " + std::to_string(model.version) + " is not a tensor list");
}

void round_weights(std::vector<WeightTensor>& tensors, int bits) {
  if (bits < 2 || bits > 16) throw std::invalid_argument("round_weights: bits must be in 2..16");
  const double limit = double((1 << (bits - 1)) - 1);
  for (auto& t : tensors) {
    const std::size_t rows = row_count(t), row_length = rows ? t.values.size() / rows : 0;
    for (std::size_t r = 0; r < rows; ++r) {
      const std::span<float> row(t.values.data() + r * row_length, row_length);
      double largest = 0;
      for (const float v : row) largest = std::max(largest, double(std::fabs(v)));
      if (!(largest > 0) || !std::isfinite(largest)) continue;
      int e = std::ilogb(largest) - (bits - 2);
      while (std::round(std::ldexp(largest, -e)) > limit) ++e;
      e = std::clamp(e, -128, 127);
      for (float& v : row) v = float(std::ldexp(std::round(std::ldexp(double(v), -e)), e)) + 0.0f;
    }
  }
}

ModelFile compact_model(const ModelFile& model, int bits, const std::string& name) {
  auto tensors = tensor_weights(model, name);
  check_weights(tensors, model.options, name);
  if (bits > 0) round_weights(tensors, bits);
  ModelFile compact = model;
  compact.version = kCompactWeights;
  compact.weights = serialize_compact_weights(tensors);
  compact.weights_sha256_v1.clear();
  compact.serialize();  // sets weights_sha256
  return compact;
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
