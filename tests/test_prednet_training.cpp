// PredNet training (predictor/training.hpp), model files end to end, and `tezip train`: a tiny
// network on the bundled mire sample (16 gray 160x120 frames).
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "io/source.hpp"
#include "predictor/learned/prednet.hpp"
#include "predictor/model_file.hpp"
#include "predictor/training.hpp"
#include "support/cli_run.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

const fs::path kMire = fs::path(TEZIP_SOURCE_DIR) / "datasets/sample/mire";

std::vector<tezip::TrainingSequence> mire() {
  std::vector<tezip::TrainingSequence> out;
  for (auto& source : tezip::open_sources(kMire)) {
    tezip::TrainingSequence s;
    const auto& g = source->geometry();
    s.shape = {g.width, g.height, g.channels, g.max_value()};
    s.name = "mire";
    for (std::size_t i = 0; i < source->frame_count(); ++i) {
      const tezip::Frame frame = source->read(i);
      s.frames.emplace_back(frame.pixels.begin(), frame.pixels.end());
    }
    out.push_back(std::move(s));
  }
  return out;
}

tezip::TrainingOptions tiny(int epochs, int steps) {
  tezip::TrainingOptions o;
  o.net.a_channels = {1, 4, 8};
  o.nt = 4;
  o.batch = 4;
  o.epochs = epochs;
  o.steps = steps;
  o.lr = 1e-2;
  o.val_fraction = 0.25;
  o.val_clips = 4;
  o.crop_height = o.crop_width = 32;
  o.seed = 7;
  o.threads = 1;
  return o;
}

using tezip::test::tezip_cli;

}  // namespace

TEST_CASE("a tiny PredNet trains on a real sample and its loss falls", "[prednet][training]") {
  const auto data = mire();
  REQUIRE(data.size() == 1);
  std::vector<double> losses;
  std::vector<tezip::EpochReport> epochs;
  tezip::TrainingCallbacks callbacks;
  callbacks.on_step = [&](const tezip::TrainingStep& s) { losses.push_back(s.loss); };
  callbacks.on_epoch = [&](const tezip::EpochReport& r) { epochs.push_back(r); };
  const auto result = tezip::train_prednet(data, tiny(2, 12), callbacks);
  REQUIRE(losses.size() == 24);
  REQUIRE(epochs.size() == 2);
  const double first = (losses[0] + losses[1] + losses[2]) / 3, last = (losses[21] + losses[22] + losses[23]) / 3;
  CHECK(last < 0.7 * first);
  for (const auto& r : epochs) {
    CHECK(std::isfinite(r.val_mse));
    CHECK(r.previous_mse > 0);
    CHECK(r.linear_mse > 0);
  }
  CHECK(epochs[1].val_mse < epochs[0].val_mse);
  CHECK(result.best_epoch == 2);
  CHECK_THAT(result.model.metadata_json, Contains("\"best_epoch\":2"));
}

TEST_CASE("a model file round trip gives identical forecasts", "[prednet][training]") {
  auto data = mire();
  const auto result = tezip::train_prednet(data, tiny(1, 3));
  tezip::ModelFile model = result.model;
  const auto bytes = model.serialize();
  const auto parsed = tezip::parse_model(bytes, "in memory");
  CHECK(parsed.weights_sha256 == model.weights_sha256);
  CHECK(parsed.options.to_json() == model.options.to_json());

  tezip::test::TempDir dir;
  {
    std::ofstream out(dir / "m.tzm", std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  const auto loaded = tezip::load_model_file(dir / "m.tzm");

  data[0].frames.resize(6);
  const auto a = tezip::prednet_forecasts(model, data[0]);
  const auto b = tezip::prednet_forecasts(parsed, data[0]);
  const auto c = tezip::prednet_forecasts(loaded, data[0]);
  REQUIRE(a.size() == 5);
  REQUIRE(a[0].size() == data[0].shape.size());
  CHECK(a == b);
  CHECK(a == c);
}

TEST_CASE("version-2 model files hold the network bit for bit; version-1 files still load", "[prednet][training]") {
  torch::manual_seed(3);
  tezip::PredNetOptions options;
  options.a_channels = {1, 4, 8};
  tezip::PredNet net(options);
  // The file's tensor order is the network's parameter order.
  const auto parameters = net->named_parameters();
  const auto expected = options.parameters();
  REQUIRE(parameters.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK(parameters[i].key() == expected[i].name);
    CHECK(parameters[i].value().sizes().vec() == expected[i].shape);
  }
  tezip::ModelFile v2 = tezip::make_model_file(net, "{}");
  CHECK(v2.version == 2);
  const auto v2_parsed = tezip::parse_model(v2.serialize(), "v2");
  tezip::ModelFile v1 = v2;  // what tezip wrote before version 2: a torch::save stream
  v1.version = 1;
  {
    std::ostringstream out;
    torch::save(net, out);
    const std::string bytes = out.str();
    v1.weights.assign(bytes.begin(), bytes.end());
  }
  const auto v1_parsed = tezip::parse_model(v1.serialize(), "v1");
  CHECK(v1_parsed.version == 1);
  CHECK(v1_parsed.weights_sha256 != v2_parsed.weights_sha256);
  for (const auto* model : {&v1_parsed, &v2_parsed}) {
    auto loaded = tezip::load_prednet(*model, "m");
    const auto got = loaded->named_parameters();
    for (std::size_t i = 0; i < expected.size(); ++i) CHECK(torch::equal(got[i].value(), parameters[i].value()));
  }
  auto seq = mire()[0];
  seq.frames.resize(4);
  CHECK(tezip::prednet_forecasts(v1_parsed, seq) == tezip::prednet_forecasts(v2_parsed, seq));
}

TEST_CASE("training resumed from a checkpoint matches an uninterrupted run", "[prednet][training]") {
  const auto data = mire();
  tezip::test::TempDir dir;
  auto o = tiny(2, 4);
  o.checkpoint = dir / "straight.ckpt";
  const auto straight = tezip::train_prednet(data, o);

  o.checkpoint = dir / "split.ckpt";
  o.epochs = 1;
  tezip::train_prednet(data, o);
  o.epochs = 2;
  o.resume = true;
  const auto resumed = tezip::train_prednet(data, o);
  REQUIRE(resumed.epochs.size() == 2);
  CHECK(resumed.epochs[1].val_mse == straight.epochs[1].val_mse);
  auto seq = data[0];
  seq.frames.resize(5);
  CHECK(tezip::prednet_forecasts(resumed.model, seq) == tezip::prednet_forecasts(straight.model, seq));

  auto other = o;
  other.net.a_channels = {1, 4, 4};
  CHECK_THROWS_AS(tezip::train_prednet(data, other), tezip::TrainingError);
}

TEST_CASE("corrupt or mismatched model files give ModelError", "[prednet][training]") {
  const auto data = mire();
  tezip::ModelFile model = tezip::train_prednet(data, tiny(1, 1)).model;
  const auto bytes = model.serialize();

  auto flipped = bytes;
  flipped[flipped.size() - 100] ^= 0x10;
  CHECK_THROWS_AS(tezip::parse_model(flipped, "flipped"), tezip::ModelError);

  const std::vector<std::uint8_t> truncated(bytes.begin(), bytes.end() - 1);
  CHECK_THROWS_AS(tezip::parse_model(truncated, "truncated"), tezip::ModelError);
  CHECK_THROWS_AS(tezip::parse_model(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 30), "short"), tezip::ModelError);

  auto garbage = bytes;
  for (std::size_t i = 20; i < 40; ++i) garbage[i] = '#';
  CHECK_THROWS_AS(tezip::parse_model(garbage, "garbage"), tezip::ModelError);

  // A valid file whose weights do not fit its options fails when the network is built.
  tezip::ModelFile mismatched = model;
  mismatched.options.a_channels = {1, 4, 16};
  const auto reparsed = tezip::parse_model(mismatched.serialize(), "mismatched");
  CHECK_THROWS_AS(tezip::prednet_forecasts(reparsed, data[0]), tezip::ModelError);

  tezip::test::TempDir dir;
  CHECK_THROWS_AS(tezip::load_model_file(dir / "missing.tzm"), tezip::ModelError);
}

TEST_CASE("training rejects data that cannot make clips or crops", "[prednet][training]") {
  const auto data = mire();
  auto o = tiny(1, 1);
  o.nt = 20;
  CHECK_THROWS_AS(tezip::train_prednet(data, o), tezip::TrainingError);
  o = tiny(1, 1);
  o.crop_height = 128;  // the frames are 120 high
  CHECK_THROWS_AS(tezip::train_prednet(data, o), tezip::TrainingError);
  o = tiny(1, 1);
  o.crop_width = 30;  // not a multiple of 4
  CHECK_THROWS_AS(tezip::train_prednet(data, o), std::invalid_argument);
}

TEST_CASE("tezip train writes a loadable model and refuses to overwrite it", "[prednet][training][cli]") {
  tezip::test::TempDir dir;
  const auto model = dir / "mire.tzm";
  const std::string common = "'" + kMire.string() + "' --stack 1,4,8 --crop 32x32 --nt 4 --batch 2 --epochs 1 --steps 4 --val 0.25 -T 1 ";
  auto run = tezip_cli("train " + common + "-o '" + model.string() + "'");
  REQUIRE(run.code == 0);
  CHECK_THAT(run.output, Contains("epoch 1/1") && Contains("val mse") && Contains("previous frame"));
  const auto loaded = tezip::load_model_file(model);
  CHECK(loaded.options.a_channels == std::vector<int>{1, 4, 8});
  auto seq = mire()[0];
  seq.frames.resize(3);
  CHECK(tezip::prednet_forecasts(loaded, seq).size() == 2);
  CHECK(fs::exists(dir / "mire.ckpt"));

  const auto before = tezip::test::read_file(model);
  run = tezip_cli("train " + common + "-o '" + model.string() + "'");
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("already exists"));
  CHECK(tezip::test::read_file(model) == before);
  run = tezip_cli("train " + common + "--seed 2 -q -f -o '" + model.string() + "'");
  CHECK(run.code == 0);
  CHECK(tezip::test::read_file(model) != before);

  // Bad data is exit code 2 with one line, bad options 1 (the other cases are tested on train_prednet).
  run = tezip_cli("train " + common + "--crop 256 -o '" + (dir / "x.tzm").string() + "'");
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("smaller than the crop"));
  run = tezip_cli("train " + common + "--crop 30x32 -o '" + (dir / "x.tzm").string() + "'");
  CHECK(run.code == 1);
  CHECK(!fs::exists(dir / "x.tzm"));
}
