// Model files without libtorch (predictor/model_file.hpp): version 2's tensor list byte for byte,
// its checks against hostile input, the options' parameter list, and the version-1 SHA-256 alias.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "predictor/model_file.hpp"

using Catch::Matchers::Contains;
using tezip::ModelError;
using tezip::ModelFile;
using tezip::PredNetOptions;
using tezip::WeightTensor;

namespace {

// The weights `options` define, with values 0.25 * (index within the tensor) - tensor number.
std::vector<WeightTensor> weights_for(const PredNetOptions& options) {
  std::vector<WeightTensor> tensors;
  for (const auto& p : options.parameters()) {
    WeightTensor t{p.name, p.shape, {}};
    std::int64_t count = 1;
    for (auto d : p.shape) count *= d;
    for (std::int64_t i = 0; i < count; ++i) t.values.push_back(0.25f * float(i) - float(tensors.size()));
    tensors.push_back(std::move(t));
  }
  return tensors;
}

PredNetOptions small() {
  PredNetOptions o;
  o.a_channels = {1, 2, 3};
  o.kernel = 3;
  return o;
}

}  // namespace

TEST_CASE("PredNet's parameters in the network's order, with their shapes", "[model]") {
  PredNetOptions o = small();
  o.r_channels = {4, 5, 6};
  const auto p = o.parameters();
  std::vector<std::string> names;
  for (const auto& x : p) names.push_back(x.name);
  CHECK(names == std::vector<std::string>{"lstm0.weight", "lstm0.bias", "ahat0.weight", "ahat0.bias", "lstm1.weight",
                                          "lstm1.bias", "ahat1.weight", "ahat1.bias", "a1.weight", "a1.bias",
                                          "lstm2.weight", "lstm2.bias", "ahat2.weight", "ahat2.bias", "a2.weight",
                                          "a2.bias"});
  // lstm_l: [E_l (2 a_l), R_l, up(R_{l+1})] -> 4 R_l; ahat_l: R_l -> a_l; a_l: E_{l-1} -> a_l.
  CHECK(p[0].shape == std::vector<std::int64_t>{16, 2 + 4 + 5, 3, 3});
  CHECK(p[1].shape == std::vector<std::int64_t>{16});
  CHECK(p[2].shape == std::vector<std::int64_t>{1, 4, 3, 3});
  CHECK(p[8].shape == std::vector<std::int64_t>{2, 2, 3, 3});
  CHECK(p[10].shape == std::vector<std::int64_t>{24, 6 + 6, 3, 3});  // the top layer has no R above
  CHECK(p[14].shape == std::vector<std::int64_t>{3, 4, 3, 3});
}

TEST_CASE("the version-2 tensor list, byte for byte", "[model]") {
  const std::vector<WeightTensor> tensors = {{"w.x", {2, 1}, {1.0f, -2.5f}}, {"s", {}, {0.5f}}};
  const auto bytes = tezip::serialize_weights(tensors);
  const std::vector<std::uint8_t> expected = {
      2, 0, 0, 0,                                    // u32 tensor count
      3, 0, 'w', '.', 'x',                           // u16 name length, name
      1, 2,                                          // u8 dtype (float32), u8 rank
      2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,  // u64 dims
      0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0,  // float32 1.0, -2.5, little-endian
      1, 0, 's', 1, 0,                               // a scalar: rank 0, one value
      0x00, 0x00, 0x00, 0x3f};
  REQUIRE(bytes == expected);
  const auto back = tezip::parse_weights(bytes, "t");
  REQUIRE(back.size() == 2);
  CHECK(back[0].name == "w.x");
  CHECK(back[0].shape == std::vector<std::int64_t>{2, 1});
  CHECK(back[0].values == std::vector<float>{1.0f, -2.5f});
  CHECK(back[1].shape.empty());
  CHECK(back[1].values == std::vector<float>{0.5f});
}

TEST_CASE("a version-2 model file round trips; equal weights give equal SHA-256", "[model]") {
  ModelFile model;
  model.options = small();
  model.metadata_json = R"({"note":"test"})";
  const auto tensors = weights_for(model.options);
  model.weights = tezip::serialize_weights(tensors);
  const auto bytes = model.serialize();
  REQUIRE(model.weights_sha256 == tezip::sha256_hex(model.weights));
  REQUIRE(bytes[8] == 2);  // u32 version 2
  const auto parsed = tezip::parse_model(bytes, "m");
  CHECK(parsed.version == 2);
  CHECK(parsed.weights_sha256 == model.weights_sha256);
  CHECK(parsed.weights_sha256_v1.empty());
  CHECK(parsed.options.to_json() == model.options.to_json());
  CHECK(parsed.metadata_json == model.metadata_json);
  const auto back = tezip::parse_weights(parsed.weights, "m");
  REQUIRE_NOTHROW(tezip::check_weights(back, parsed.options, "m"));
  for (std::size_t i = 0; i < back.size(); ++i) {
    CHECK(back[i].name == tensors[i].name);
    CHECK(std::memcmp(back[i].values.data(), tensors[i].values.data(), 4 * tensors[i].values.size()) == 0);
  }
  ModelFile again = parsed;
  again.metadata_json = "{}";
  again.serialize();
  CHECK(again.weights_sha256 == model.weights_sha256);  // the hash is the weights', not the header's
}

TEST_CASE("the version-1 SHA-256 of a converted model is an accepted alias", "[model]") {
  ModelFile model;
  model.options = small();
  model.weights = tezip::serialize_weights(weights_for(model.options));
  model.weights_sha256_v1 = std::string(64, 'a');
  const auto parsed = tezip::parse_model(model.serialize(), "m");
  CHECK(parsed.weights_sha256_v1 == std::string(64, 'a'));
  CHECK(parsed.has_weights(parsed.weights_sha256));
  CHECK(parsed.has_weights(std::string(64, 'a')));
  CHECK_FALSE(parsed.has_weights(std::string(64, 'b')));
  CHECK_FALSE(parsed.has_weights(""));
  ModelFile plain;
  CHECK_FALSE(plain.has_weights(""));  // no alias: an empty recorded hash matches nothing
}

TEST_CASE("version 1 files still parse; other versions are refused", "[model]") {
  ModelFile model;
  model.options = small();
  model.version = 1;
  model.weights = {1, 2, 3, 4};  // a torch::save stream; only the learned module reads it
  auto bytes = model.serialize();
  const auto parsed = tezip::parse_model(bytes, "old");
  CHECK(parsed.version == 1);
  CHECK(parsed.weights == model.weights);
  bytes[8] = 4;
  CHECK_THROWS_WITH(tezip::parse_model(bytes, "future"), Contains("version 4 is not supported"));
}

TEST_CASE("malformed tensor lists give ModelError, never a crash or a huge allocation", "[model]") {
  const auto tensors = weights_for(small());
  const auto bytes = tezip::serialize_weights(tensors);
  for (std::size_t length = 0; length < bytes.size(); length += (length < 64 ? 1 : 97)) {
    const std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(length));
    CHECK_THROWS_AS(tezip::parse_weights(cut, "cut"), ModelError);
  }
  auto trailing = bytes;
  trailing.push_back(0);
  CHECK_THROWS_WITH(tezip::parse_weights(trailing, "t"), Contains("trailing"));

  auto patched = [&](std::size_t at, std::vector<std::uint8_t> with) {
    auto b = bytes;
    std::copy(with.begin(), with.end(), b.begin() + std::ptrdiff_t(at));
    return b;
  };
  // The first tensor: count at 0, name length at 4, "lstm0.weight" at 6, dtype at 18, rank at 19, dims at 20.
  CHECK_THROWS_WITH(tezip::parse_weights(patched(18, {2}), "t"), Contains("dtype 2"));
  CHECK_THROWS_WITH(tezip::parse_weights(patched(19, {9}), "t"), Contains("rank 9"));
  CHECK_THROWS_WITH(tezip::parse_weights(patched(20, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}), "t"),
                    Contains("larger than the file"));
  CHECK_THROWS_WITH(tezip::parse_weights(patched(20, {0, 0, 0, 0, 0, 1, 0, 0}), "t"), Contains("larger than the file"));
  CHECK_THROWS_WITH(tezip::parse_weights(patched(6, {'l', 's', 't', 'm', '/'}), "t"), Contains("name"));
  CHECK_THROWS_WITH(tezip::parse_weights(patched(0, {0xff, 0xff, 0, 0}), "t"), Contains("exceed the limit"));
  CHECK_THROWS_WITH(tezip::parse_weights(patched(4, {0, 0}), "t"), Contains("name"));
  // The same tensor twice.
  auto twice = tensors;
  twice[1] = twice[0];
  CHECK_THROWS_WITH(tezip::parse_weights(tezip::serialize_weights(twice), "t"), Contains("appears twice"));
}

TEST_CASE("weights that do not fit the options are refused by name", "[model]") {
  const PredNetOptions o = small();
  auto tensors = weights_for(o);
  REQUIRE_NOTHROW(tezip::check_weights(tensors, o, "m"));
  auto wrong_shape = tensors;
  wrong_shape[4].shape[1] += 1;
  wrong_shape[4].values.resize(wrong_shape[4].values.size() + 16 * 9);
  CHECK_THROWS_WITH(tezip::check_weights(wrong_shape, o, "m"), Contains("'lstm1.weight' has another shape"));
  auto missing = tensors;
  missing.pop_back();
  CHECK_THROWS_WITH(tezip::check_weights(missing, o, "m"), Contains("'a2.bias' is missing"));
  auto extra = tensors;
  extra.push_back({"extra", {1}, {0}});
  CHECK_THROWS_WITH(tezip::check_weights(extra, o, "m"), Contains("'extra' is not a parameter"));
  auto swapped = tensors;
  std::swap(swapped[0], swapped[1]);
  CHECK_THROWS_WITH(tezip::check_weights(swapped, o, "m"), Contains("'lstm0.weight'"));
}

namespace {

// Floats of every kind: ordinary, tiny and huge, subnormal, signed zeros, infinities, NaN.
std::vector<WeightTensor> awkward_weights() {
  std::vector<WeightTensor> tensors = weights_for(small());
  std::uint32_t state = 12345;
  for (auto& t : tensors)
    for (auto& v : t.values) {
      state = state * 1664525u + 1013904223u;
      v = float(std::int32_t(state) >> 8) * 1e-7f;
    }
  auto& odd = tensors[0].values;  // lstm0.weight: the rows holding them are stored as float32
  odd[0] = -0.0f;
  odd[40] = std::numeric_limits<float>::infinity();
  odd[80] = std::numeric_limits<float>::quiet_NaN();
  odd[120] = std::numeric_limits<float>::denorm_min();
  odd[160] = 3.0e38f;
  return tensors;
}

bool same_bits(const std::vector<WeightTensor>& a, const std::vector<WeightTensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].shape != b[i].shape || a[i].values.size() != b[i].values.size() ||
        std::memcmp(a[i].values.data(), b[i].values.data(), 4 * a[i].values.size()) != 0)
      return false;
  return true;
}

std::size_t value_count(const std::vector<WeightTensor>& tensors) {
  std::size_t n = 0;
  for (const auto& t : tensors) n += t.values.size();
  return n;
}

}  // namespace

TEST_CASE("compact weights (version 3) give every float back bit for bit", "[model]") {
  const auto tensors = awkward_weights();
  CHECK(same_bits(tezip::parse_compact_weights(tezip::serialize_compact_weights(tensors), "c"), tensors));
  // Rounded weights are stored as int16 rows: about a byte a value, not four.
  auto rounded = tensors;
  tezip::round_weights(rounded, 8);
  const auto compact = tezip::serialize_compact_weights(rounded);
  CHECK(same_bits(tezip::parse_compact_weights(compact, "c"), rounded));
  CHECK(compact.size() < 2 * value_count(rounded));
  CHECK(tezip::serialize_weights(rounded).size() > 4 * value_count(rounded));
}

TEST_CASE("round_weights keeps each row on a grid of `bits` signed bits and within half a step", "[model]") {
  for (const int bits : {2, 6, 8, 12, 16}) {
    auto tensors = weights_for(small());
    for (auto& t : tensors)
      for (std::size_t i = 0; i < t.values.size(); ++i) t.values[i] = std::sin(float(i) * 0.7f) * float(1 + i % 5) * 0.01f;
    const auto before = tensors;
    tezip::round_weights(tensors, bits);
    for (std::size_t k = 0; k < tensors.size(); ++k) {
      const auto& t = tensors[k];
      const std::size_t rows = std::size_t(t.shape[0]), length = t.values.size() / rows;
      for (std::size_t r = 0; r < rows; ++r) {
        float largest = 0;
        for (std::size_t j = 0; j < length; ++j) largest = std::max(largest, std::fabs(before[k].values[r * length + j]));
        if (largest == 0) {  // a row of zeros stays zeros
          for (std::size_t j = 0; j < length; ++j) CHECK(t.values[r * length + j] == 0);
          continue;
        }
        // The step is the power of two that makes the largest value at most 2^(bits-1) - 1 steps.
        const double step = std::ldexp(1.0, std::ilogb(largest) - (bits - 2));
        const double grid = std::round(largest / step) > (1 << (bits - 1)) - 1 ? 2 * step : step;
        for (std::size_t j = 0; j < length; ++j) {
          const double v = t.values[r * length + j], q = v / grid;
          CHECK(q == std::round(q));
          CHECK(std::fabs(q) <= (1 << (bits - 1)) - 1);
          CHECK(std::fabs(v - before[k].values[r * length + j]) <= grid / 2);
        }
      }
    }
  }
  auto tensors = weights_for(small());
  CHECK_THROWS_AS(tezip::round_weights(tensors, 1), std::invalid_argument);
  CHECK_THROWS_AS(tezip::round_weights(tensors, 17), std::invalid_argument);
}

TEST_CASE("a compact model file parses, and damaged compact weights give ModelError", "[model]") {
  ModelFile model;
  model.options = small();
  model.weights = tezip::serialize_weights(weights_for(model.options));
  const ModelFile compact = tezip::compact_model(model, 8, "m");
  CHECK(compact.version == 3);
  const auto parsed = tezip::parse_model(ModelFile(compact).serialize(), "m");
  CHECK(parsed.version == 3);
  CHECK(parsed.weights_sha256 == compact.weights_sha256);
  auto expected = weights_for(model.options);
  tezip::round_weights(expected, 8);
  CHECK(same_bits(tezip::tensor_weights(parsed, "m"), expected));
  CHECK(same_bits(tezip::tensor_weights(tezip::compact_model(model, 0, "m"), "m"), weights_for(model.options)));

  const auto& bytes = compact.weights;
  for (std::size_t length = 0; length < bytes.size(); length += 7) {
    const std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(length));
    CHECK_THROWS_AS(tezip::parse_compact_weights(cut, "cut"), ModelError);
  }
  auto trailing = bytes;
  trailing.push_back(0);
  CHECK_THROWS_WITH(tezip::parse_compact_weights(trailing, "t"), Contains("not one zstd frame"));
  // A plain list is not a zstd frame; a compact list's dtype 2 is refused where version 2 is read.
  CHECK_THROWS_AS(tezip::parse_compact_weights(model.weights, "plain"), ModelError);
  ModelFile wrong = compact;
  wrong.version = 2;
  CHECK_THROWS_AS(tezip::tensor_weights(wrong, "wrong"), ModelError);
}
