// The exact (integer) PredNet engine (predictor/learned/prednet_exact.cpp): its kernels against
// plain int64 references, its independence of batch size and threads, its closeness to the float
// engine on the bundled mire sample, and a golden hash that catches a machine computing otherwise.
// Torch before Catch: glog (through torch) defines a CHECK of its own; these tests use REQUIRE.
#include "predictor/learned/engine.hpp"
#include "predictor/learned/prednet_exact.hpp"
#include "predictor/model_file.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace tezip;

namespace {

const fs::path kMire = fs::path(TEZIP_SOURCE_DIR) / "datasets/sample/mire";

// floor(v / 2^shift) + round half up, written with division rather than shifts.
std::int64_t ref_round_shift(std::int64_t v, int shift) {
  if (shift <= 0) return v * (std::int64_t{1} << -shift);
  const std::int64_t d = std::int64_t{1} << shift;
  const std::int64_t n = 2 * v + d, dd = 2 * d;  // floor((2v + d) / 2d) = floor(v / d + 1/2)
  std::int64_t q = n / dd;
  if (n % dd != 0 && n < 0) --q;
  return q;
}

// The integer u with -5 < 10 u - 2 z <= 5 (z / 5 rounded half up), plus 1/2, clamped.
std::int64_t ref_hard_sigmoid(std::int64_t z) {
  std::int64_t u = z / 5;
  while (10 * u - 2 * z > 5) --u;
  while (10 * u - 2 * z <= -5) ++u;
  return std::clamp<std::int64_t>(u + 16384, 0, 32768);
}

// conv2d by definition: zero padding, int64 sums, rounding and saturation as documented.
std::vector<std::int64_t> ref_conv(const std::vector<std::int16_t>& in, int batch, int height, int width,
                                   const exact::QuantConv& q) {
  const int k = q.kernel, half = k / 2;
  std::vector<std::int64_t> out(std::size_t(batch) * q.out_channels * height * width);
  for (int b = 0; b < batch; ++b)
    for (int o = 0; o < q.out_channels; ++o)
      for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) {
          std::int64_t sum = 0;
          for (int c = 0; c < q.in_channels; ++c)
            for (int dy = 0; dy < k; ++dy)
              for (int dx = 0; dx < k; ++dx) {
                const int sy = y + dy - half, sx = x + dx - half;
                if (sy < 0 || sy >= height || sx < 0 || sx >= width) continue;
                const std::int64_t v = in[((std::size_t(b) * q.in_channels + c) * height + sy) * width + sx];
                sum += v * q.weight(o, (c * k + dy) * k + dx);
              }
          const std::int64_t r = ref_round_shift(sum + q.bias[o], q.shift[o]);
          out[((std::size_t(b) * q.out_channels + o) * height + y) * width + x] =
              std::clamp<std::int64_t>(r, -(std::int64_t{1} << 31) + 1, (std::int64_t{1} << 31) - 1);
        }
  return out;
}

std::vector<std::int64_t> as_int64(const torch::Tensor& t) {
  const auto v = t.to(torch::kInt64).contiguous();
  return std::vector<std::int64_t>(v.data_ptr<std::int64_t>(), v.data_ptr<std::int64_t>() + v.numel());
}

PredNet random_net(std::vector<int> a_channels, std::uint64_t seed) {
  torch::manual_seed(seed);
  PredNetOptions o;
  o.a_channels = std::move(a_channels);
  PredNet net(o);
  net->eval();
  return net;
}

// A model whose weights are exactly the same on every machine: splitmix64 draws turned into
// multiples of 2^-16 (torch's own initialisation runs through float kernels that may differ by CPU).
PredNet portable_net(std::vector<int> a_channels, std::uint64_t seed) {
  PredNetOptions o;
  o.a_channels = std::move(a_channels);
  PredNet net(o);
  std::uint64_t state = seed;
  auto next = [&] {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  torch::NoGradGuard no_grad;
  for (auto& p : net->parameters()) {
    const std::int64_t fan_in = p.dim() == 4 ? p.size(1) * p.size(2) * p.size(3) : 64;
    // Uniform in about +-1/sqrt(fan_in), as torch's default: integers in +-limit times 2^-16.
    const std::int64_t limit = std::int64_t(65536 / std::sqrt(double(fan_in)));
    std::vector<float> v(std::size_t(p.numel()));
    for (auto& x : v) x = float(std::int64_t(next() % std::uint64_t(2 * limit + 1)) - limit) / 65536.0f;
    p.copy_(torch::from_blob(v.data(), p.sizes(), torch::kFloat32));
  }
  net->eval();
  return net;
}

// Binary 8-bit PGM (P5) -> int32 [1, 1, H, W].
torch::Tensor read_pgm(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string magic;
  int width = 0, height = 0, max = 0;
  in >> magic >> width >> height >> max;
  in.get();
  REQUIRE((magic == "P5" && max == 255 && width > 0 && height > 0));
  std::vector<std::uint8_t> bytes(std::size_t(width) * height);
  in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
  REQUIRE(in);
  return torch::from_blob(bytes.data(), {1, 1, height, width}, torch::kUInt8).to(torch::kInt32);
}

std::vector<torch::Tensor> mire_frames() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kMire))
    if (entry.path().extension() == ".pgm") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<torch::Tensor> frames;
  for (const auto& f : files) frames.push_back(read_pgm(f));
  return frames;
}

// Forecasts of frames 1..T-1 (int32 [B, C, H, W] each) by one engine, feeding every frame.
std::vector<torch::Tensor> run(const PredNetEngine& engine, const std::vector<torch::Tensor>& frames,
                               std::uint32_t max_value) {
  auto state = engine.initial_state(frames[0].size(0), frames[0].size(2), frames[0].size(3));
  std::vector<torch::Tensor> out;
  for (std::size_t t = 0; t < frames.size(); ++t) {
    const auto forecast = engine.predict(state, max_value);
    if (t > 0) out.push_back(forecast);
    engine.correct(state, frames[t], max_value);
  }
  return out;
}

std::uint64_t fnv1a(const std::vector<torch::Tensor>& tensors) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& t : tensors)
    for (std::int64_t v : as_int64(t))
      for (int byte = 0; byte < 4; ++byte) {
        h ^= std::uint64_t(v >> (8 * byte)) & 0xff;
        h *= 0x100000001b3ULL;
      }
  return h;
}

struct ThreadCount {  // restores torch's thread count
  int saved = torch::get_num_threads();
  ~ThreadCount() { torch::set_num_threads(saved); }
};

}  // namespace

TEST_CASE("exact conv2d equals an int64 reference, on every kernel", "[prednet_exact]") {
  torch::manual_seed(11);
  std::mt19937 rng(5);
  for (const auto& [cin, cout, h, w] : std::vector<std::array<int, 4>>{{3, 5, 7, 9}, {18, 8, 12, 16}, {50, 64, 8, 40}}) {
    const auto weight = torch::randn({cout, cin, 3, 3}) * 0.3;
    const auto bias = torch::randn({cout});
    std::vector<int> in_frac(cin), out_frac(cout);
    for (auto& f : in_frac) f = 8 + int(rng() % 10);
    for (auto& f : out_frac) f = 10 + int(rng() % 10);
    const auto q = exact::quantize_conv(weight, bias, in_frac, out_frac);
    // The quantization bound that makes int32 accumulation exact in any order, and the weights'
    // rounding: |q - w * 2^(scale - frac)| <= 1/2.
    const auto wf = weight.contiguous();
    for (int o = 0; o < cout; ++o) {
      std::int64_t l1 = 0, l1_finer = 0, max_finer = 0;  // finer: at scale + 1, which must break a bound
      for (int k = 0; k < cin * 9; ++k) {
        const double w = wf.data_ptr<float>()[o * cin * 9 + k];
        const double ideal = std::ldexp(w, q.scale[o] - in_frac[k / 9]);
        REQUIRE(std::abs(q.weight(o, k) - ideal) <= 0.5);
        l1 += std::abs(q.weight(o, k));
        const auto finer = std::int64_t(std::abs(std::round(2 * ideal)));
        l1_finer += finer;
        max_finer = std::max(max_finer, finer);
      }
      REQUIRE(std::abs(q.bias[o] - std::ldexp(double(bias[o].item<float>()), q.scale[o])) <= 0.5);
      REQUIRE(l1 * exact::kMaxInput <= (std::int64_t{1} << 31) - 1);
      REQUIRE((l1_finer * exact::kMaxInput > (std::int64_t{1} << 31) - 1 || max_finer > 32767));
    }
    std::uniform_int_distribution<int> any(-exact::kMaxInput, exact::kMaxInput);
    std::vector<std::int16_t> in(std::size_t(2) * cin * h * w);
    for (auto& v : in) v = std::int16_t(any(rng));
    const auto input = torch::from_blob(in.data(), {2, cin, h, w}, torch::kInt16);
    const auto expected = ref_conv(in, 2, h, w, q);
    REQUIRE(as_int64(exact::conv2d(input, q, exact::Kernel::portable)) == expected);
    if (exact::avx2_available()) REQUIRE(as_int64(exact::conv2d(input, q, exact::Kernel::avx2)) == expected);
    REQUIRE(as_int64(exact::conv2d(input, q)) == expected);

    // The worst case: inputs at +-32767 with the signs of an output's weights reach sum |w| * 32767.
    std::vector<std::int16_t> worst(std::size_t(cin) * 9);
    for (int c = 0; c < cin; ++c)
      for (int k = 0; k < 9; ++k) worst[c * 9 + k] = std::int16_t(q.weight(0, c * 9 + k) < 0 ? -32767 : 32767);
    const auto worst_input = torch::from_blob(worst.data(), {1, cin, 3, 3}, torch::kInt16);
    REQUIRE(as_int64(exact::conv2d(worst_input, q)) == ref_conv(worst, 1, 3, 3, q));
  }
}

TEST_CASE("exact hard sigmoid is Keras's clip(0.2 z + 0.5, 0, 1) rounded half up", "[prednet_exact]") {
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::int32_t> any(-200000, 200000);
  std::vector<std::int32_t> zs = {0, 1, -1, 2, -2, 3, -3, 81920, -81920, 81919, -81919, 81925, -81925};
  for (int i = 0; i < 20000; ++i) zs.push_back(any(rng));
  for (std::int32_t z = -20; z <= 20; ++z) zs.push_back(z);
  for (const std::int32_t z : zs) {
    const std::int64_t u = exact::hard_sigmoid_q15(z);
    REQUIRE(u == ref_hard_sigmoid(z));
    const double ideal = std::clamp(0.2 * (z / 32768.0) + 0.5, 0.0, 1.0) * 32768.0;
    REQUIRE(std::abs(double(u) - ideal) <= 0.5 + 1e-9);
  }
  REQUIRE(exact::hard_sigmoid_q15(std::numeric_limits<std::int32_t>::max()) == 32768);
  REQUIRE(exact::hard_sigmoid_q15(std::numeric_limits<std::int32_t>::min()) == 0);
}

TEST_CASE("exact tanh: the integer-series table and its interpolation", "[prednet_exact]") {
  const auto& table = exact::tanh_table();
  REQUIRE(table.size() == 32769);
  for (std::size_t j = 0; j < table.size(); ++j) {
    // The table is built without libm; libm's tanh only checks it (correctly rounded within 1e-9).
    const double ideal = std::min(std::tanh(double(j) / 4096.0) * 32768.0, 32767.0);
    REQUIRE(std::abs(table[j] - ideal) <= 0.5 + 1e-6);
    if (j > 0) REQUIRE(table[j] >= table[j - 1]);
  }
  std::mt19937 rng(9);
  std::uniform_int_distribution<std::int32_t> any(-400000, 400000);
  for (int i = 0; i < 20000; ++i) {
    const std::int32_t x = any(rng);
    const std::int64_t ax = std::abs(std::int64_t(x));
    std::int64_t expected = table[32768];
    if (ax < 8 * 32768) {
      const std::int64_t j = ax / 8, frac = ax % 8;
      // a + (b - a) * frac / 8, rounded half up (floor of + 1/2)
      const std::int64_t n = 8 * table[j] + (table[j + 1] - table[j]) * frac + 4;
      expected = n >= 0 ? n / 8 : -((-n + 7) / 8);
    }
    if (x < 0) expected = -expected;
    REQUIRE(exact::tanh_q15(x) == expected);
    REQUIRE(std::abs(exact::tanh_q15(x) - std::tanh(x / 32768.0) * 32768.0) <= 1.5);
  }
  REQUIRE(exact::tanh_q15(0) == 0);
  REQUIRE(exact::tanh_q15(std::numeric_limits<std::int32_t>::max()) == 32767);
  REQUIRE(exact::tanh_q15(std::numeric_limits<std::int32_t>::min() + 1) == -32767);
}

TEST_CASE("exact ConvLSTM update equals an int64 reference", "[prednet_exact]") {
  std::mt19937 rng(21);
  std::uniform_int_distribution<std::int32_t> gate(-300000, 300000), cell(-(1 << 21), 1 << 21);
  const std::int64_t n = 5000, stride = 5003;
  std::vector<std::int32_t> gates(4 * stride), c(n);
  for (auto& g : gates) g = gate(rng);
  for (auto& v : c) v = cell(rng);
  c[0] = 1 << 30;
  gates[stride] = 1 << 20;  // f = 1 and a saturated cell: the clamp
  gates[0] = 1 << 20;
  gates[3 * stride] = 1 << 20;
  auto c_exact = c;
  std::vector<std::int16_t> r(n);
  exact::lstm_update(gates.data(), stride, n, c_exact.data(), r.data());
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t i = ref_hard_sigmoid(gates[k]), f = ref_hard_sigmoid(gates[stride + k]),
                       o = ref_hard_sigmoid(gates[2 * stride + k]);
    const std::int64_t sum = f * c[k] + i * exact::tanh_q15(gates[3 * stride + k]);
    const std::int64_t cell_new = std::clamp<std::int64_t>(ref_round_shift(sum, 15), -(1 << 30), 1 << 30);
    REQUIRE(c_exact[k] == cell_new);
    REQUIRE(r[k] == ref_round_shift(o * exact::tanh_q15(std::int32_t(cell_new)), 15));
    // And the float LSTM on the same (dequantized) numbers, within rounding.
    const double gf = std::clamp(0.2 * gates[stride + k] / 32768.0 + 0.5, 0.0, 1.0);
    const double gi = std::clamp(0.2 * gates[k] / 32768.0 + 0.5, 0.0, 1.0);
    const double go = std::clamp(0.2 * gates[2 * stride + k] / 32768.0 + 0.5, 0.0, 1.0);
    const double cf = gf * c[k] / 32768.0 + gi * std::tanh(gates[3 * stride + k] / 32768.0);
    if (std::abs(cf) < 32768.0) {  // in units of 2^-15: f, i rounding 1/2 each, tanh 1.5, c 1/2
      REQUIRE(std::abs(c_exact[k] - cf * 32768.0) <= 0.5 * std::abs(c[k]) / 32768.0 + 3.0);
      REQUIRE(std::abs(r[k] - go * std::tanh(c_exact[k] / 32768.0) * 32768.0) <= 2.5);
    }
  }
}

TEST_CASE("exact engine: forecasts do not depend on batch size or threads", "[prednet_exact]") {
  const auto net = random_net({1, 8, 16, 32}, 4);
  const auto engine = make_exact_engine(net);
  REQUIRE(engine->arithmetic() == "exact");
  std::mt19937 rng(2);
  std::uniform_int_distribution<int> pixel(0, 255);
  constexpr int kBatch = 8, kSteps = 4, kH = 32, kW = 48;
  std::vector<torch::Tensor> frames;  // smooth moving patterns plus noise, [8, 1, H, W]
  for (int t = 0; t < kSteps; ++t) {
    auto f = torch::empty({kBatch, 1, kH, kW}, torch::kInt32);
    auto a = f.accessor<std::int32_t, 4>();
    for (int b = 0; b < kBatch; ++b)
      for (int y = 0; y < kH; ++y)
        for (int x = 0; x < kW; ++x)
          a[b][0][y][x] = std::clamp(int(128 + 100 * std::sin(0.2 * (x + 2 * t + b) + 0.1 * y)) + pixel(rng) % 9 - 4, 0, 255);
    frames.push_back(f);
  }
  ThreadCount restore;
  torch::set_num_threads(2);
  const auto batched = run(*engine, frames, 255);
  torch::set_num_threads(1);
  const auto single_thread = run(*engine, frames, 255);
  for (int t = 0; t + 1 < kSteps; ++t) REQUIRE(torch::equal(batched[t], single_thread[t]));
  torch::set_num_threads(2);
  for (int b : {0, 5, 7}) {
    std::vector<torch::Tensor> one;
    for (const auto& f : frames) one.push_back(f.narrow(0, b, 1).contiguous());
    const auto alone = run(*engine, one, 255);
    for (int t = 0; t + 1 < kSteps; ++t) REQUIRE(torch::equal(alone[t], batched[t].narrow(0, b, 1)));
  }
  // States of separate runs concatenate along dimension 0.
  auto s1 = engine->initial_state(1, kH, kW), s2 = engine->initial_state(1, kH, kW);
  REQUIRE(s1.r[1].size(0) == 1);
  REQUIRE_THROWS(engine->initial_state(1, 30, kW));
}

TEST_CASE("exact engine stays within a few levels of the float engine on mire", "[prednet_exact]") {
  const auto frames = mire_frames();
  REQUIRE(frames.size() == 16);
  // An untrained network forecasts 0 everywhere (relu); lifting the forecast to mid-gray and
  // amplifying R_0's say makes every layer's state matter.
  const auto net = random_net({1, 8, 16, 32}, 1);
  {
    torch::NoGradGuard no_grad;
    net->ahat[0]->bias.fill_(0.5);
    net->ahat[0]->weight.mul_(4.0);
  }
  const auto exact_forecasts = run(*make_exact_engine(net), frames, 255);
  const auto float_forecasts = run(*make_float_engine(net), frames, 255);
  double total = 0, exact_se = 0, float_se = 0;
  std::int64_t worst = 0, count = 0;
  for (std::size_t t = 0; t < exact_forecasts.size(); ++t) {
    const auto d = (exact_forecasts[t] - float_forecasts[t]).abs();
    total += d.sum().item<double>();
    worst = std::max<std::int64_t>(worst, d.max().item<std::int64_t>());
    count += d.numel();
    exact_se += (exact_forecasts[t] - frames[t + 1]).to(torch::kFloat64).pow(2).sum().item<double>();
    float_se += (float_forecasts[t] - frames[t + 1]).to(torch::kFloat64).pow(2).sum().item<double>();
  }
  const double mean = total / double(count);
  INFO("mean |exact - float| " << mean << " levels, max " << worst << "; MSE exact " << exact_se / count
                               << ", float " << float_se / count);
  // Quantization noise is about 1e-4 of full scale per layer (docs/exact_inference.md), i.e. a
  // few hundredths of a level at 8 bits; forecasts that round differently differ by one level.
  REQUIRE(mean < 0.1);
  REQUIRE(worst <= 3);
  REQUIRE(std::abs(exact_se - float_se) <= 0.01 * float_se);
}

TEST_CASE("exact engine: golden forecasts of a fixed model and probe", "[prednet_exact]") {
  // Weights and probe built from integers only: any machine must reproduce this hash exactly.
  const auto net = portable_net({1, 8, 16, 32}, 2026);
  const auto engine = make_exact_engine(net);
  std::vector<torch::Tensor> probe;
  for (int t = 0; t < 4; ++t) {
    auto f = torch::empty({2, 1, 16, 24}, torch::kInt32);
    auto a = f.accessor<std::int32_t, 4>();
    for (int b = 0; b < 2; ++b)
      for (int y = 0; y < 16; ++y)
        for (int x = 0; x < 24; ++x) a[b][0][y][x] = ((x + 3 * t) * 37 + y * y * 11 + b * 97) % (b == 0 ? 256 : 65536);
    probe.push_back(f);
  }
  std::vector<torch::Tensor> probe8, probe16;
  for (const auto& f : probe) {
    probe8.push_back(f.narrow(0, 0, 1).contiguous());
    probe16.push_back(f.narrow(0, 1, 1).contiguous());
  }
  auto forecasts = run(*engine, probe8, 255);
  const auto deep = run(*engine, probe16, 65535);
  forecasts.insert(forecasts.end(), deep.begin(), deep.end());
  std::uint64_t table_hash = 0xcbf29ce484222325ULL;
  for (std::int16_t v : exact::tanh_table()) {
    table_hash ^= std::uint16_t(v);
    table_hash *= 0x100000001b3ULL;
  }
  const std::uint64_t forecast_hash = fnv1a(forecasts);
  INFO("tanh table hash " << table_hash << ", forecast hash " << forecast_hash);
  REQUIRE(table_hash == 12089772182716084143ULL);
  REQUIRE(forecast_hash == 13333625478888953675ULL);
}

TEST_CASE("exact engine speed against the float engine", "[.][prednet_exact_bench]") {
  ThreadCount restore;
  torch::set_num_threads(2);
  for (const auto& stack : std::vector<std::vector<int>>{{1, 8, 16, 32}, {1, 16, 32, 64}}) {
    const auto net = random_net(stack, 1);
    const auto frame = torch::randint(0, 256, {8, 1, 128, 160}, torch::kInt32);
    for (const auto& engine : {make_float_engine(net), make_exact_engine(net)}) {
      auto state = engine->initial_state(8, 128, 160);
      engine->predict(state, 255);
      engine->correct(state, frame, 255);
      const auto start = std::chrono::steady_clock::now();
      constexpr int kSteps = 5;
      for (int t = 0; t < kSteps; ++t) {
        engine->predict(state, 255);
        engine->correct(state, frame, 255);
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("stack {1,%d,%d,%d} %s: %.1f frames/s\n", stack[1], stack[2], stack[3], engine->arithmetic().c_str(),
                  8 * kSteps / seconds);
    }
  }
}

// Exact against float with a trained model: `tezip_tests "[prednet_exact_quality]"`, with
// TEZIP_EXACT_MODEL (default models/prednet-small.tzm) and TEZIP_EXACT_FRAMES (a folder of 8-bit
// PGM frames, default the bundled mire sample; .cache/datasets/mire2 is a longer one).
TEST_CASE("exact engine quality against the float engine with a trained model", "[.][prednet_exact_quality]") {
  const char* model_env = std::getenv("TEZIP_EXACT_MODEL");
  const char* frames_env = std::getenv("TEZIP_EXACT_FRAMES");
  const fs::path model_path = model_env ? fs::path(model_env) : fs::path(TEZIP_SOURCE_DIR) / "models/prednet-small.tzm";
  const fs::path folder = frames_env ? fs::path(frames_env) : kMire;
  REQUIRE(fs::exists(model_path));
  const auto net = load_prednet(load_model_file(model_path), model_path.string());
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.path().extension() == ".pgm") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<torch::Tensor> frames;
  const int m = net->options().padding_multiple();
  for (const auto& f : files) {
    auto frame = read_pgm(f);
    frames.push_back(frame.narrow(2, 0, frame.size(2) / m * m).narrow(3, 0, frame.size(3) / m * m).contiguous());
  }
  REQUIRE(frames.size() >= 2);
  const auto exact_forecasts = run(*make_exact_engine(net), frames, 255);
  const auto float_forecasts = run(*make_float_engine(net), frames, 255);
  double total = 0, exact_se = 0, float_se = 0, previous_se = 0;
  std::int64_t worst = 0, count = 0, differing = 0;
  std::map<std::int64_t, std::int64_t> exact_hist, float_hist;
  for (std::size_t t = 0; t < exact_forecasts.size(); ++t) {
    const auto d = (exact_forecasts[t] - float_forecasts[t]).abs();
    total += d.sum().item<double>();
    worst = std::max<std::int64_t>(worst, d.max().item<std::int64_t>());
    differing += d.ne(0).sum().item<std::int64_t>();
    count += d.numel();
    const auto exact_residual = frames[t + 1] - exact_forecasts[t], float_residual = frames[t + 1] - float_forecasts[t];
    exact_se += exact_residual.to(torch::kFloat64).pow(2).sum().item<double>();
    float_se += float_residual.to(torch::kFloat64).pow(2).sum().item<double>();
    previous_se += (frames[t + 1] - frames[t]).to(torch::kFloat64).pow(2).sum().item<double>();
    for (std::int64_t v : as_int64(exact_residual)) ++exact_hist[v];
    for (std::int64_t v : as_int64(float_residual)) ++float_hist[v];
  }
  auto entropy = [&](const std::map<std::int64_t, std::int64_t>& hist) {
    double bits = 0;
    for (const auto& [value, n] : hist) bits -= double(n) / double(count) * std::log2(double(n) / double(count));
    return bits;
  };
  std::printf("%s on %s (%zu forecasts): mean |exact - float| %.4f levels, max %lld, %.3f%% differ; MSE exact %.3f, "
              "float %.3f, previous frame %.3f; residual entropy exact %.4f, float %.4f bits/pixel\n",
              model_path.filename().c_str(), folder.filename().c_str(), exact_forecasts.size(), total / double(count),
              (long long)worst, 100.0 * double(differing) / double(count), exact_se / double(count),
              float_se / double(count), previous_se / double(count), entropy(exact_hist), entropy(float_hist));
  REQUIRE(std::abs(entropy(exact_hist) - entropy(float_hist)) <= 0.02 * entropy(float_hist));
}
