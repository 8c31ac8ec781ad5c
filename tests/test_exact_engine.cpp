// The exact PredNet engine in the core (predictor/prednet_exact.cpp), without libtorch: its kernels
// against plain int64 references, the portable and AVX2 convolution kernels each forced, batches
// that only partition the work, and golden hashes that the engine of tezip 7e1b983 (on libtorch
// tensors, in the learned module) produced, so that any machine and either build must reproduce
// them. tests/test_prednet_exact.cpp compares with that engine itself where libtorch is there.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "predictor/prednet_exact.hpp"
#include "support/exact_frames.hpp"

using namespace tezip;
using test::fnv1a;
using test::portable_weights;
using test::run_engine;

namespace {

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

std::vector<std::int64_t> conv(const std::vector<std::int16_t>& in, int batch, int height, int width,
                               const exact::QuantConv& q, exact::Kernel kernel) {
  std::vector<std::int32_t> out(std::size_t(batch) * q.out_channels * height * width);
  exact::conv2d(in.data(), batch, height, width, q, out.data(), kernel);
  return {out.begin(), out.end()};
}

std::vector<exact::Kernel> kernels() {
  std::vector<exact::Kernel> list = exact::supported_kernels();
  list.push_back(exact::Kernel::best);
  return list;
}

PredNetOptions stack(std::vector<int> a_channels) {
  PredNetOptions o;
  o.a_channels = std::move(a_channels);
  return o;
}

// The mire sample as [1][1][H][W] frames.
test::GrayFrames mire() {
  auto frames = test::read_pgm_folder(test::kMire);
  REQUIRE(frames.frames.size() == 16);
  return frames;
}

}  // namespace

TEST_CASE("exact conv2d equals an int64 reference, on the portable and the AVX2 kernel", "[exact]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (const auto& [cin, cout, h, w] : std::vector<std::array<int, 4>>{{3, 5, 7, 9}, {18, 8, 12, 16}, {50, 64, 8, 40}}) {
    std::vector<float> weight(std::size_t(cout) * cin * 9), bias(cout);
    for (auto& v : weight) v = 0.3f * normal(rng);
    for (auto& v : bias) v = normal(rng);
    std::vector<int> in_frac(cin), out_frac(cout);
    for (auto& f : in_frac) f = 8 + int(rng() % 10);
    for (auto& f : out_frac) f = 10 + int(rng() % 10);
    const auto q = exact::quantize_conv(weight, bias, cout, cin, 3, in_frac, out_frac);
    // The quantization bound that makes int32 accumulation exact in any order, and the weights'
    // rounding: |q - w * 2^(scale - frac)| <= 1/2.
    for (int o = 0; o < cout; ++o) {
      std::int64_t l1 = 0, l1_finer = 0, max_finer = 0;  // finer: at scale + 1, which must break a bound
      for (int k = 0; k < cin * 9; ++k) {
        const double ideal = std::ldexp(double(weight[std::size_t(o) * cin * 9 + k]), q.scale[o] - in_frac[k / 9]);
        REQUIRE(std::abs(q.weight(o, k) - ideal) <= 0.5);
        l1 += std::abs(q.weight(o, k));
        const auto finer = std::int64_t(std::abs(std::round(2 * ideal)));
        l1_finer += finer;
        max_finer = std::max(max_finer, finer);
      }
      REQUIRE(std::abs(q.bias[o] - std::ldexp(double(bias[o]), q.scale[o])) <= 0.5);
      REQUIRE(l1 * exact::kMaxInput <= (std::int64_t{1} << 31) - 1);
      REQUIRE((l1_finer * exact::kMaxInput > (std::int64_t{1} << 31) - 1 || max_finer > 32767));
    }
    std::uniform_int_distribution<int> any(-exact::kMaxInput, exact::kMaxInput);
    std::vector<std::int16_t> in(std::size_t(2) * cin * h * w);
    for (auto& v : in) v = std::int16_t(any(rng));
    const auto expected = ref_conv(in, 2, h, w, q);
    for (const auto kernel : kernels()) REQUIRE(conv(in, 2, h, w, q, kernel) == expected);

    // The worst case: inputs at +-32767 with the signs of an output's weights reach sum |w| * 32767.
    std::vector<std::int16_t> worst(std::size_t(cin) * 9);
    for (int c = 0; c < cin; ++c)
      for (int k = 0; k < 9; ++k) worst[c * 9 + k] = std::int16_t(q.weight(0, c * 9 + k) < 0 ? -32767 : 32767);
    for (const auto kernel : kernels()) REQUIRE(conv(worst, 1, 3, 3, q, kernel) == ref_conv(worst, 1, 3, 3, q));
  }
  // Bad input is refused, not read past.
  const std::vector<float> w(2 * 3 * 9), b(2);
  const std::vector<int> in_frac(3, 15), out_frac(2, 15);
  CHECK_THROWS_AS(exact::quantize_conv(w, b, 2, 3, 3, in_frac, std::vector<int>(3, 15)), std::invalid_argument);
  CHECK_THROWS_AS(exact::quantize_conv(std::vector<float>(5), b, 2, 3, 3, in_frac, out_frac), std::invalid_argument);
  std::vector<float> nan = w;
  nan[4] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_AS(exact::quantize_conv(nan, b, 2, 3, 3, in_frac, out_frac), std::invalid_argument);
  for (const auto kernel : {exact::Kernel::avx2, exact::Kernel::avx512vnni})
    if (!exact::kernel_available(kernel)) CHECK_THROWS_AS(exact::resolve(kernel), std::invalid_argument);
  CHECK(exact::supported_kernels().front() == exact::Kernel::portable);
}

TEST_CASE("exact hard sigmoid is Keras's clip(0.2 z + 0.5, 0, 1) rounded half up", "[exact]") {
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

TEST_CASE("exact LSTM update equals its definition through hard_sigmoid_q15 and tanh_q15", "[exact]") {
  // lstm_update computes the gates in 32-bit arithmetic on clamped inputs (and 16 cells at a time
  // with AVX-512); the values must be the 64-bit definitions' for every int32 input, on every kernel.
  std::mt19937 rng(12);
  constexpr std::int32_t kMin = std::numeric_limits<std::int32_t>::min(), kMax = std::numeric_limits<std::int32_t>::max();
  const std::vector<std::int32_t> edges = {kMin, kMin + 1, -(8 << 15) - 1, -(8 << 15), -(8 << 15) + 1, -81925, -81923,
                                           -81922, -81918, -1, 0, 1, 81917, 81918, 81920, 81925, (8 << 15) - 1,
                                           8 << 15, (8 << 15) + 1, kMax - 1, kMax};
  std::uniform_int_distribution<std::int32_t> wide(kMin, kMax), near(-300000, 300000), cells(-(1 << 30), 1 << 30);
  constexpr std::int64_t n = 4099;  // not a multiple of any vector width
  std::vector<std::int32_t> gates(4 * n), c(n);
  for (std::int64_t k = 0; k < 4 * n; ++k)
    gates[k] = k % 7 == 0 ? edges[rng() % edges.size()] : k % 3 == 0 ? wide(rng) : near(rng);
  for (auto& v : c) v = rng() % 5 == 0 ? (rng() % 2 ? 1 << 30 : -(1 << 30)) : rng() % 4 == 0 ? wide(rng) : cells(rng);
  for (const auto kernel : exact::supported_kernels()) {
    INFO("kernel " << exact::kernel_name(kernel));
    std::vector<std::int32_t> c_out = c;
    std::vector<std::int16_t> r(n);
    exact::lstm_update(gates.data(), n, n, c_out.data(), r.data(), kernel);
    for (std::int64_t k = 0; k < n; ++k) {
      const std::int64_t i = exact::hard_sigmoid_q15(gates[k]), f = exact::hard_sigmoid_q15(gates[n + k]),
                         o = exact::hard_sigmoid_q15(gates[2 * n + k]);
      const std::int64_t cell = std::clamp<std::int64_t>(
          (f * c[k] + i * exact::tanh_q15(gates[3 * n + k]) + (1 << 14)) >> 15, -(std::int64_t{1} << 30),
          std::int64_t{1} << 30);
      INFO("element " << k);
      REQUIRE(c_out[k] == cell);
      REQUIRE(r[k] == std::int16_t((o * exact::tanh_q15(std::int32_t(cell)) + (1 << 14)) >> 15));
    }
  }
}

TEST_CASE("exact error planes equal their int64 definitions on every kernel", "[exact]") {
  // frame_errors and pooled_errors run in 32-bit lanes, 8 at a time with AVX2; the values must be
  // the int64 definitions' for any int32 input, lengths and widths not multiples of 8 included.
  std::mt19937 rng(31);
  constexpr std::int32_t kMin = std::numeric_limits<std::int32_t>::min(), kMax = std::numeric_limits<std::int32_t>::max();
  auto clamp16 = [](std::int64_t v) { return std::int16_t(std::clamp<std::int64_t>(v, 0, 32767)); };
  for (const std::uint32_t max : {255u, 1023u, 65535u}) {
    std::vector<std::int32_t> q15(max + 1), q24(max + 1);
    for (std::uint32_t p = 0; p <= max; ++p) {
      q15[p] = std::int32_t(((std::int64_t(p) << 16) + max) / (2 * std::int64_t(max)));
      q24[p] = std::int32_t(((std::int64_t(p) << 25) + max) / (2 * std::int64_t(max)) + 7);  // any table
    }
    constexpr std::int64_t n = 1000 + 7;
    std::vector<std::int32_t> frame(n), forecast(n);
    std::uniform_int_distribution<std::int32_t> pixel(-3, std::int32_t(max) + 3), q(-5, (1 << 24) + 5);
    const std::vector<std::int32_t> edges = {kMin, -1, 0, 1, 255, 256, 511, 512, 1 << 24, (1 << 24) + 1, kMax};
    for (std::int64_t k = 0; k < n; ++k) {
      frame[k] = k % 11 == 0 ? edges[rng() % edges.size()] : pixel(rng);
      forecast[k] = k % 13 == 0 ? edges[rng() % edges.size()] : q(rng);
    }
    for (const auto kernel : exact::supported_kernels()) {
      INFO("kernel " << exact::kernel_name(kernel) << ", max " << max);
      std::vector<std::int16_t> below(n), above(n);
      std::vector<std::int32_t> last(n);
      exact::frame_errors(frame.data(), forecast.data(), n, q15, q24, below.data(), above.data(), last.data(), kernel);
      for (std::int64_t k = 0; k < n; ++k) {
        INFO("pixel " << k);
        const std::int64_t p = std::clamp<std::int64_t>(frame[k], 0, max);
        const std::int64_t prediction = ref_round_shift(std::clamp<std::int64_t>(forecast[k], 0, 1 << 24), 9);
        REQUIRE(below[k] == clamp16(prediction - q15[p]));
        REQUIRE(above[k] == clamp16(q15[p] - prediction));
        REQUIRE(last[k] == q24[p]);
      }
      std::vector<std::int16_t> b2(n), a2(n);  // without `last`: the same halves
      exact::frame_errors(frame.data(), forecast.data(), n, q15, q24, b2.data(), a2.data(), nullptr, kernel);
      REQUIRE(b2 == below);
      REQUIRE(a2 == above);
    }
  }
  for (const std::int64_t width : {1, 8, 19, 48}) {
    const std::int64_t height = 5;
    std::vector<std::int32_t> pre(4 * height * width), prediction(height * width);
    std::uniform_int_distribution<std::int32_t> near(-70000, 70000), wide(kMin, kMax);
    for (auto& v : pre) v = rng() % 6 == 0 ? wide(rng) : near(rng);
    for (auto& v : prediction) v = rng() % 6 == 0 ? wide(rng) : near(rng);
    pre[0] = kMax;
    prediction[0] = kMin;
    prediction[height * width - 1] = kMax;
    for (const auto kernel : exact::supported_kernels()) {
      INFO("kernel " << exact::kernel_name(kernel) << ", width " << width);
      std::vector<std::int16_t> below(height * width), above(height * width);
      exact::pooled_errors(pre.data(), prediction.data(), height, width, below.data(), above.data(), kernel);
      for (std::int64_t y = 0; y < height; ++y)
        for (std::int64_t x = 0; x < width; ++x) {
          const std::int32_t* a = pre.data() + 2 * y * 2 * width + 2 * x;
          const std::int64_t target = std::max<std::int64_t>({a[0], a[1], a[2 * width], a[2 * width + 1], 0});
          const std::int64_t guess = std::max<std::int64_t>(prediction[y * width + x], 0);
          INFO("output " << y << "," << x);
          REQUIRE(below[y * width + x] == clamp16(guess - target));
          REQUIRE(above[y * width + x] == clamp16(target - guess));
        }
    }
  }
}

TEST_CASE("exact tanh: the integer-series table and its interpolation", "[exact]") {
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

TEST_CASE("exact ConvLSTM update equals an int64 reference", "[exact]") {
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

TEST_CASE("exact engine: golden forecasts of a fixed model and probe, as tezip 7e1b983 computed them", "[exact]") {
  // Weights and probe built from integers only: any machine must reproduce these hashes exactly.
  // The values are those of the torch engine's golden test before the engine moved into the core.
  const auto options = stack({1, 8, 16, 32});
  for (const auto kernel : kernels()) {
    const auto engine = make_exact_engine(options, portable_weights(options, 2026), kernel);
    REQUIRE(engine->arithmetic() == "exact");
    REQUIRE(engine->arithmetic_description() == "exact");
    std::vector<std::vector<std::int32_t>> probe8, probe16;
    for (int t = 0; t < 4; ++t)
      for (int b = 0; b < 2; ++b) {
        std::vector<std::int32_t> f(16 * 24);
        for (int y = 0; y < 16; ++y)
          for (int x = 0; x < 24; ++x) f[y * 24 + x] = ((x + 3 * t) * 37 + y * y * 11 + b * 97) % (b == 0 ? 256 : 65536);
        (b == 0 ? probe8 : probe16).push_back(std::move(f));
      }
    auto forecasts = run_engine(*engine, probe8, 1, 16, 24, 255);
    const auto deep = run_engine(*engine, probe16, 1, 16, 24, 65535);
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
}

TEST_CASE("exact engine: every convolution kernel gives the same forecasts on real frames", "[exact]") {
  const auto frames = mire();
  const auto options = stack({1, 8, 16, 32});
  const auto weights = test::lifted(portable_weights(options, 7));
  const auto portable = run_engine(*make_exact_engine(options, weights, exact::Kernel::portable), frames.frames, 1,
                                   frames.height, frames.width, 255);
  const auto best = run_engine(*make_exact_engine(options, weights), frames.frames, 1, frames.height, frames.width, 255);
  REQUIRE(portable.size() == 15);
  CHECK(portable == best);
  for (const auto kernel : exact::supported_kernels()) {
    INFO("kernel " << exact::kernel_name(kernel));
    CHECK(portable == run_engine(*make_exact_engine(options, weights, kernel), frames.frames, 1, frames.height,
                                 frames.width, 255));
  }
  if (!exact::avx2_available()) WARN("no AVX2 on this CPU: only the portable kernel ran");
  // Not trivially equal: the forecasts change from frame to frame and are not all zero.
  CHECK(portable.front() != portable.back());
  CHECK(std::any_of(portable.back().begin(), portable.back().end(), [](std::int32_t v) { return v != 0; }));
}

TEST_CASE("exact engine: a batch of states only partitions the work", "[exact]") {
  const auto options = stack({1, 4, 8});
  const auto engine = make_exact_engine(options, test::lifted(portable_weights(options, 3)));
  constexpr int kH = 32, kW = 48, kSteps = 4;
  std::mt19937 rng(2);
  // Three GOPs: 1, 3 and 2 samples (a gray model runs each channel of colour frames as a sample).
  const std::vector<int> samples = {1, 3, 2};
  std::vector<std::vector<std::vector<std::int32_t>>> frames(samples.size());
  for (std::size_t g = 0; g < samples.size(); ++g)
    for (int t = 0; t < kSteps; ++t) {
      std::vector<std::int32_t> f(std::size_t(samples[g]) * kH * kW);
      for (std::size_t i = 0; i < f.size(); ++i) {
        const int x = int(i % kW), y = int(i / kW % kH), s = int(i / (kW * kH));
        f[i] = std::clamp(int(128 + 100 * std::sin(0.2 * (x + 2 * t + s + 5 * g) + 0.1 * y)) + int(rng() % 9) - 4, 0, 255);
      }
      frames[g].push_back(std::move(f));
    }
  std::vector<std::vector<std::vector<std::int32_t>>> alone;
  for (std::size_t g = 0; g < samples.size(); ++g) alone.push_back(run_engine(*engine, frames[g], samples[g], kH, kW, 255));
  // A sample's forecast does not depend on the other samples of its state either.
  std::vector<std::vector<std::int32_t>> third_frames;
  for (const auto& f : frames[1]) third_frames.emplace_back(f.begin() + 2 * kH * kW, f.end());
  const auto third_alone = run_engine(*engine, third_frames, 1, kH, kW, 255);
  for (int t = 0; t + 1 < kSteps; ++t)
    CHECK(std::equal(third_alone[t].begin(), third_alone[t].end(), alone[1][t].begin() + 2 * kH * kW));

  std::vector<std::unique_ptr<PredNetEngineState>> owned;
  std::vector<PredNetEngineState*> states;
  std::vector<std::vector<std::int32_t>> forecasts;
  for (std::size_t g = 0; g < samples.size(); ++g) {
    owned.push_back(engine->initial_state(samples[g], kH, kW));
    states.push_back(owned.back().get());
    forecasts.emplace_back(std::size_t(samples[g]) * kH * kW);
  }
  for (int t = 0; t < kSteps; ++t) {
    std::vector<std::span<std::int32_t>> out(forecasts.begin(), forecasts.end());
    engine->predict(states, 255, out);
    if (t > 0)
      for (std::size_t g = 0; g < samples.size(); ++g) CHECK(forecasts[g] == alone[g][t - 1]);
    std::vector<std::span<const std::int32_t>> in;
    for (std::size_t g = 0; g < samples.size(); ++g) in.emplace_back(frames[g][t]);
    engine->correct(states, in, 255);
  }
  CHECK(alone[0][0] != alone[0][2]);  // the forecasts move: the comparisons above are not of zeros
  CHECK(std::any_of(alone[1][2].begin(), alone[1][2].end(), [](std::int32_t v) { return v != 0; }));
}

TEST_CASE("exact engine refuses what does not fit", "[exact]") {
  const auto options = stack({1, 4, 8});
  auto weights = portable_weights(options, 1);
  const auto engine = make_exact_engine(options, weights);
  CHECK_THROWS_AS(engine->initial_state(1, 30, 48), std::invalid_argument);  // not a multiple of 4
  CHECK_THROWS_AS(engine->initial_state(0, 32, 48), std::invalid_argument);
  auto state = engine->initial_state(1, 32, 48);
  PredNetEngineState* states[] = {state.get()};
  std::vector<std::int32_t> small(10), frame(32 * 48);
  std::span<std::int32_t> wrong[] = {small};
  CHECK_THROWS_AS(engine->predict(states, 255, wrong), std::invalid_argument);
  std::span<std::int32_t> right[] = {frame};
  CHECK_THROWS_AS(engine->predict(states, 0, right), std::invalid_argument);
  CHECK_THROWS_AS(engine->predict(states, 65536, right), std::invalid_argument);
  PredNetEngineState foreign;
  PredNetEngineState* foreign_states[] = {&foreign};
  CHECK_THROWS_AS(engine->predict(foreign_states, 255, right), std::invalid_argument);
  weights[2].shape[1] += 1;  // ahat0 takes more channels than R_0 has
  CHECK_THROWS_AS(make_exact_engine(options, weights), ModelError);
}
