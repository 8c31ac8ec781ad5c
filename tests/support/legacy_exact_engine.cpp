// The old exact engine, unchanged but for its namespace and interface name: see legacy_exact_engine.hpp.
// Exact (integer) PredNet inference: every machine computes the same bits (docs/exact_inference.md).
//
// Why the results cannot depend on the machine:
// - The float model is turned into integers with exact operations only: float -> double, multiply
//   by a power of two (std::ldexp) and std::round (half away from zero). Every scale is a power of
//   two, so requantization is a shift that rounds half up. No libm transcendental is called: the
//   tanh table comes from integer series (make_tanh_table).
// - Convolutions multiply int16 by int16 and add in int32. quantize_conv bounds each output
//   channel's weights so that sum |w| * 32767 <= 2^31 - 1, and inputs are saturated to +-32767, so
//   every partial sum, in whatever order a kernel adds (scalar, AVX2 pmaddwd pairs, any tiling or
//   thread split), is an exact integer below 2^31: integer addition is associative when it cannot
//   overflow, so all orders give the same sum.
// - Everything else (gates, LSTM state, pooling, errors, pixels) is int32/int64 arithmetic with
//   explicit rounding (floor of a shifted value, i.e. round half up) and saturation.
#include "legacy_exact_engine.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>


#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TEZIP_EXACT_X86 1
#include <immintrin.h>
#endif

namespace tezip::legacy_exact {
namespace {

constexpr std::int64_t kAccLimit = (std::int64_t{1} << 31) - 1;
constexpr int kTile = 128;  // output pixels per im2col tile (a multiple of 16)

std::int64_t floor_div(std::int64_t n, std::int64_t d) {  // d > 0
  std::int64_t q = n / d;
  if (n % d != 0 && n < 0) --q;
  return q;
}

std::int32_t saturate32(std::int64_t v) { return std::int32_t(std::clamp<std::int64_t>(v, -kAccLimit, kAccLimit)); }
std::int16_t saturate16(std::int64_t v) { return std::int16_t(std::clamp<std::int64_t>(v, -kMaxInput, kMaxInput)); }

// tanh(j / 4096) for j = 0..32768 in Q15, from exact integer arithmetic in 62-bit fixed point:
// r = e^(-1/2048) by its Taylor series, e^(-2x) = r^j by repeated rounded multiplication (relative
// error below 2^-46 after 32768 steps), tanh = (1 - e^(-2x)) / (1 + e^(-2x)) rounded half up.
std::vector<std::int16_t> make_tanh_table() {
  using u128 = unsigned __int128;
  constexpr int kFrac = 62;
  const std::uint64_t one = std::uint64_t{1} << kFrac;
  std::int64_t r = std::int64_t(one), term = std::int64_t(one);
  for (int n = 1; n <= 10; ++n) {
    term /= 2048 * n;
    r += (n % 2 != 0) ? -term : term;
  }
  std::vector<std::int16_t> table(32769);
  std::uint64_t e = one;  // e^(-j / 2048)
  for (int j = 0; j <= 32768; ++j) {
    if (j > 0) e = std::uint64_t((u128(e) * std::uint64_t(r) + (u128(1) << (kFrac - 1))) >> kFrac);
    const u128 num = u128(one - e) << 16, den = u128(one) + e;
    const u128 q = (num + den) / (2 * den);  // round half up of (1 - e) / (1 + e) * 2^15
    table[j] = std::int16_t(std::min<u128>(q, 32767));
  }
  return table;
}

// ---- im2col and the int16 GEMM -------------------------------------------------------------

// Tap k = (c * kernel + dy) * kernel + dx of output pixels [p0, p0 + count) of one image: dst[i].
void fill_tap(const std::int16_t* image, int height, int width, int kernel, int k, int p0, int count,
              std::int16_t* dst) {
  const int dx = k % kernel - kernel / 2, dy = (k / kernel) % kernel - kernel / 2, c = k / (kernel * kernel);
  const std::int16_t* plane = image + std::int64_t(c) * height * width;
  int i = 0, y = p0 / width, x = p0 % width;
  while (i < count) {
    const int n = std::min(count - i, width - x);  // the rest of row y
    const int sy = y + dy;
    if (sy < 0 || sy >= height) {
      std::memset(dst + i, 0, sizeof(std::int16_t) * n);
    } else {
      // Columns x + j with 0 <= x + j + dx < width come from the row, the others are padding.
      const std::int16_t* row = plane + std::int64_t(sy) * width;
      const int lo = std::clamp(-dx - x, 0, n), hi = std::clamp(width - dx - x, lo, n);
      std::memset(dst + i, 0, sizeof(std::int16_t) * lo);
      std::memcpy(dst + i + lo, row + x + lo + dx, sizeof(std::int16_t) * (hi - lo));
      std::memset(dst + i + hi, 0, sizeof(std::int16_t) * (n - hi));
    }
    i += n;
    x = 0;
    ++y;
  }
}

// xs[pair][kTile]: int16 taps 2p (low half) and 2p+1 (high half) of each pixel; unused pixels are 0.
void im2col_tile(const std::int16_t* image, int height, int width, const QuantConv& conv, int p0, int count,
                 std::int32_t* xs, std::int16_t* scratch) {
  const int taps = conv.in_channels * conv.kernel * conv.kernel;
  std::int16_t* lo = scratch;
  std::int16_t* hi = scratch + kTile;
  for (int p = 0; p < conv.pairs; ++p) {
    if (count < kTile || 2 * p + 1 >= taps) std::fill(lo, lo + 2 * kTile, std::int16_t(0));
    fill_tap(image, height, width, conv.kernel, 2 * p, p0, count, lo);
    if (2 * p + 1 < taps) fill_tap(image, height, width, conv.kernel, 2 * p + 1, p0, count, hi);
    std::int32_t* row = xs + std::int64_t(p) * kTile;
    for (int i = 0; i < kTile; ++i)
      row[i] = std::int32_t(std::uint32_t(std::uint16_t(lo[i])) | (std::uint32_t(std::uint16_t(hi[i])) << 16));
  }
}

std::int32_t dot_pair(std::int32_t x, std::int32_t w) {
  return std::int32_t(std::int16_t(x & 0xffff)) * std::int32_t(std::int16_t(w & 0xffff)) +
         std::int32_t(std::int16_t(std::uint32_t(x) >> 16)) * std::int32_t(std::int16_t(std::uint32_t(w) >> 16));
}

// acc[o][i] = sum over pairs of the tile's products, for outputs [o0, o0 + ob).
void gemm_portable(const std::int32_t* xs, const QuantConv& conv, int o0, int ob, std::int32_t* acc) {
  for (int o = 0; o < ob; ++o) {
    std::int32_t* a = acc + std::int64_t(o) * kTile;
    std::fill(a, a + kTile, 0);
    const std::int32_t* w = conv.weights.data() + std::int64_t(o0 + o) * conv.pairs;
    for (int p = 0; p < conv.pairs; ++p) {
      const std::int32_t* x = xs + std::int64_t(p) * kTile;
      for (int i = 0; i < kTile; ++i) a[i] += dot_pair(x[i], w[p]);
    }
  }
}

#ifdef TEZIP_EXACT_X86
template <int OB>
__attribute__((target("avx2"))) void gemm_block_avx2(const std::int32_t* xs, const QuantConv& conv, int o0,
                                                      std::int32_t* acc) {
  const std::int32_t* w[OB];
  for (int o = 0; o < OB; ++o) w[o] = conv.weights.data() + std::int64_t(o0 + o) * conv.pairs;
  for (int i = 0; i < kTile; i += 16) {
    __m256i a[OB][2];
    for (int o = 0; o < OB; ++o) a[o][0] = a[o][1] = _mm256_setzero_si256();
    const std::int32_t* x = xs + i;
    for (int p = 0; p < conv.pairs; ++p, x += kTile) {
      const __m256i x0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x));
      const __m256i x1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x + 8));
      for (int o = 0; o < OB; ++o) {
        const __m256i wv = _mm256_set1_epi32(w[o][p]);
        a[o][0] = _mm256_add_epi32(a[o][0], _mm256_madd_epi16(x0, wv));
        a[o][1] = _mm256_add_epi32(a[o][1], _mm256_madd_epi16(x1, wv));
      }
    }
    for (int o = 0; o < OB; ++o) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + std::int64_t(o) * kTile + i), a[o][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + std::int64_t(o) * kTile + i + 8), a[o][1]);
    }
  }
}

void gemm_avx2(const std::int32_t* xs, const QuantConv& conv, int o0, int ob, std::int32_t* acc) {
  switch (ob) {
    case 4: return gemm_block_avx2<4>(xs, conv, o0, acc);
    case 3: return gemm_block_avx2<3>(xs, conv, o0, acc);
    case 2: return gemm_block_avx2<2>(xs, conv, o0, acc);
    default: return gemm_block_avx2<1>(xs, conv, o0, acc);
  }
}
#endif

struct AlignedBuffer {  // 32-byte aligned int32 scratch
  explicit AlignedBuffer(std::size_t n) : storage(n + 8) {}
  std::int32_t* data() {
    auto address = reinterpret_cast<std::uintptr_t>(storage.data());
    return storage.data() + ((32 - address % 32) % 32) / sizeof(std::int32_t);
  }
  std::vector<std::int32_t> storage;
};

}  // namespace

std::int16_t QuantConv::weight(int o, int k) const {
  const std::uint32_t v = std::uint32_t(weights[std::size_t(o) * pairs + k / 2]);
  return std::int16_t(k % 2 == 0 ? (v & 0xffff) : (v >> 16));
}

QuantConv quantize_conv(const torch::Tensor& weight, const torch::Tensor& bias, std::span<const int> input_frac,
                        std::span<const int> output_frac) {
  const auto w = weight.detach().to(torch::kCPU, torch::kFloat64).contiguous();  // float -> double is exact
  const auto b = bias.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  QuantConv q;
  q.out_channels = int(w.size(0));
  q.in_channels = int(w.size(1));
  q.kernel = int(w.size(2));
  if (w.size(3) != q.kernel || q.kernel % 2 == 0 || std::int64_t(input_frac.size()) != q.in_channels ||
      std::int64_t(output_frac.size()) != q.out_channels || b.size(0) != q.out_channels)
    throw std::invalid_argument("quantize_conv: shapes do not fit");
  const int k2 = q.kernel * q.kernel, taps = q.in_channels * k2;
  q.pairs = (taps + 1) / 2;
  q.weights.assign(std::size_t(q.out_channels) * q.pairs, 0);
  q.bias.resize(q.out_channels);
  q.scale.resize(q.out_channels);
  q.shift.resize(q.out_channels);
  q.bound.resize(q.out_channels);
  const double* wd = w.data_ptr<double>();
  const double* bd = b.data_ptr<double>();
  std::vector<std::int64_t> taps_q(taps);
  for (int o = 0; o < q.out_channels; ++o) {
    const double* wo = wd + std::int64_t(o) * taps;
    // The first scale to try: 2^(15 - e) with e the largest binary exponent of the weights per
    // input unit; each step down halves the weights until both bounds hold.
    int e_max = -1000;
    for (int k = 0; k < taps; ++k) {
      if (!std::isfinite(wo[k])) throw std::invalid_argument("quantize_conv: a weight is not finite");
      if (wo[k] != 0) e_max = std::max(e_max, std::ilogb(wo[k]) + 1 - input_frac[k / k2]);
    }
    if (!std::isfinite(bd[o])) throw std::invalid_argument("quantize_conv: a bias is not finite");
    int s = std::min(40, e_max == -1000 ? 40 : 15 - e_max);
    for (;; --s) {
      if (s < -60) throw std::invalid_argument("quantize_conv: weights too large to quantize");
      std::int64_t l1 = 0, largest = 0;
      for (int k = 0; k < taps; ++k) {
        taps_q[k] = std::int64_t(std::round(std::ldexp(wo[k], s - input_frac[k / k2])));
        largest = std::max(largest, std::abs(taps_q[k]));
        l1 += std::abs(taps_q[k]);
      }
      const double bias_scaled = std::round(std::ldexp(bd[o], s));
      if (largest > kMaxInput || l1 * kMaxInput > kAccLimit || std::abs(bias_scaled) > 0x1p46) continue;
      q.bias[o] = std::int64_t(bias_scaled);
      q.bound[o] = l1 * kMaxInput + std::abs(q.bias[o]);
      break;
    }
    q.scale[o] = s;
    q.shift[o] = s - output_frac[o];
    if (q.shift[o] < -20 || q.shift[o] > 62) throw std::invalid_argument("quantize_conv: output scale out of range");
    for (int k = 0; k < taps; ++k) {
      std::uint32_t& slot = reinterpret_cast<std::uint32_t&>(q.weights[std::size_t(o) * q.pairs + k / 2]);
      slot |= std::uint32_t(std::uint16_t(std::int16_t(taps_q[k]))) << (16 * (k % 2));
    }
  }
  return q;
}

bool avx2_available() {
#ifdef TEZIP_EXACT_X86
  // ATEN_CPU_CAPABILITY=default (torch's switch to its baseline kernels) selects the portable
  // kernel here too, so that cross-ISA tests run both; the results are the same bits either way.
  static const bool available = [] {
    const char* capability = std::getenv("ATEN_CPU_CAPABILITY");
    return __builtin_cpu_supports("avx2") && !(capability && std::string(capability) == "default");
  }();
  return available;
#else
  return false;
#endif
}

void conv2d(const std::int16_t* in, int batch, int height, int width, const QuantConv& conv, std::int32_t* out,
            Kernel kernel) {
  if (kernel == Kernel::best) kernel = avx2_available() ? Kernel::avx2 : Kernel::portable;
  if (kernel == Kernel::avx2 && !avx2_available()) throw std::invalid_argument("conv2d: no AVX2 on this CPU");
  const std::int64_t pixels = std::int64_t(height) * width;
  const std::int64_t tiles = (pixels + kTile - 1) / kTile;
  const std::int64_t in_stride = std::int64_t(conv.in_channels) * pixels;
  const std::int64_t out_stride = std::int64_t(conv.out_channels) * pixels;
  at::parallel_for(0, batch * tiles, 1, [&](std::int64_t begin, std::int64_t end) {
    AlignedBuffer xs(std::size_t(conv.pairs) * kTile), acc(4 * kTile);
    std::vector<std::int16_t> scratch(2 * kTile);
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t b = task / tiles;
      const int p0 = int((task % tiles) * kTile), count = int(std::min<std::int64_t>(kTile, pixels - p0));
      im2col_tile(in + b * in_stride, height, width, conv, p0, count, xs.data(), scratch.data());
      for (int o0 = 0; o0 < conv.out_channels; o0 += 4) {
        const int ob = std::min(4, conv.out_channels - o0);
#ifdef TEZIP_EXACT_X86
        if (kernel == Kernel::avx2)
          gemm_avx2(xs.data(), conv, o0, ob, acc.data());
        else
#endif
          gemm_portable(xs.data(), conv, o0, ob, acc.data());
        for (int o = 0; o < ob; ++o) {
          const std::int32_t* a = acc.data() + std::int64_t(o) * kTile;
          std::int32_t* dst = out + b * out_stride + std::int64_t(o0 + o) * pixels + p0;
          const int shift = conv.shift[o0 + o];
          if (shift > 0) {  // the usual case, as a loop the compiler can vectorise
            const std::int64_t bias = conv.bias[o0 + o] + (std::int64_t{1} << (shift - 1));
            for (int i = 0; i < count; ++i) dst[i] = saturate32((a[i] + bias) >> shift);
          } else {
            const std::int64_t bias = conv.bias[o0 + o];
            for (int i = 0; i < count; ++i) dst[i] = saturate32(round_shift(a[i] + bias, shift));
          }
        }
      }
    }
  });
}

torch::Tensor conv2d(const torch::Tensor& in, const QuantConv& conv, Kernel kernel) {
  const auto x = in.to(torch::kInt16).contiguous();
  if (x.dim() != 4 || x.size(1) != conv.in_channels) throw std::invalid_argument("conv2d: input shape does not fit");
  auto out = torch::empty({x.size(0), conv.out_channels, x.size(2), x.size(3)}, torch::kInt32);
  conv2d(x.data_ptr<std::int16_t>(), int(x.size(0)), int(x.size(2)), int(x.size(3)), conv, out.data_ptr<std::int32_t>(),
         kernel);
  return out;
}

std::int32_t hard_sigmoid_q15(std::int32_t z) {
  return std::int32_t(std::clamp<std::int64_t>(floor_div(2 * std::int64_t(z) + 5, 10) + 16384, 0, 32768));
}

const std::vector<std::int16_t>& tanh_table() {
  static const std::vector<std::int16_t> table = make_tanh_table();
  return table;
}

std::int32_t tanh_q15(std::int32_t x) {
  const std::int16_t* t = tanh_table().data();
  const std::int64_t ax = std::abs(std::int64_t(x));
  std::int32_t v;
  if (ax >= (std::int64_t{8} << 15)) {
    v = t[32768];
  } else {
    const std::int64_t idx = ax >> 3, frac = ax & 7;
    v = std::int32_t(t[idx] + (((t[idx + 1] - t[idx]) * frac + 4) >> 3));
  }
  return x < 0 ? -v : v;
}

void lstm_update(const std::int32_t* gates, std::int64_t gate_stride, std::int64_t count, std::int32_t* c,
                 std::int16_t* r) {
  const std::int32_t *gi = gates, *gf = gates + gate_stride, *go = gates + 2 * gate_stride, *gg = gates + 3 * gate_stride;
  constexpr std::int64_t kCellLimit = std::int64_t{1} << 30;
  for (std::int64_t n = 0; n < count; ++n) {
    const std::int64_t i = hard_sigmoid_q15(gi[n]), f = hard_sigmoid_q15(gf[n]), o = hard_sigmoid_q15(go[n]);
    const std::int64_t cell = (f * c[n] + i * tanh_q15(gg[n]) + (1 << 14)) >> 15;
    c[n] = std::int32_t(std::clamp(cell, -kCellLimit, kCellLimit));
    r[n] = std::int16_t((o * tanh_q15(c[n]) + (1 << 14)) >> 15);
  }
}

}  // namespace tezip::legacy_exact

namespace tezip::legacy_exact {
namespace {

namespace exact = legacy_exact;
using exact::QuantConv;

// Fractional bits of layer l >= 1's targets A_l, predictions Ahat_l and errors E_l: from the exact
// bound of each channel (quantize_conv's), limited to [kMinFrac, kMaxFrac]; values beyond the
// int16 range saturate.
constexpr int kMinFrac = 8, kMaxFrac = 20;
constexpr int kForecastFrac = 24;  // the frame forecast (layer 0's Ahat), int32

// The largest f in [kMinFrac, kMaxFrac] with bound * 2^(f - scale) <= 32767.
int frac_for_bound(std::int64_t bound, int scale) {
  using i128 = __int128;
  for (int f = kMaxFrac; f > kMinFrac; --f) {
    const int d = f - scale;
    if (d > 60) continue;
    const bool fits = d >= 0 ? (i128(bound) << d) <= i128(exact::kMaxInput) : i128(bound) <= (i128(exact::kMaxInput) << -d);
    if (fits) return f;
  }
  return kMinFrac;
}

void set_output_frac(QuantConv& conv, const std::vector<int>& frac) {
  for (int o = 0; o < conv.out_channels; ++o) conv.shift[o] = conv.scale[o] - frac[o];
}

template <class F>
void parallel_planes(std::int64_t planes, F&& f) {
  at::parallel_for(0, planes, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) f(p);
  });
}

class ExactEngine final : public Engine {
 public:
  explicit ExactEngine(PredNet net) : options_(net->options()) {
    const int layers = options_.layers();
    layers_.resize(layers);
    // Formats bottom-up: layer l's errors are an input of a[l + 1].
    for (int l = 0; l < layers; ++l) {
      Layer& layer = layers_[l];
      const int channels = options_.a_channels[l], r = options_.r(l);
      std::vector<int> frac(channels, 15);
      if (l > 0) {
        const std::vector<int>& below = layers_[l - 1].e_frac;
        layer.a = exact::quantize_conv(net->a[l]->weight, net->a[l]->bias, below, std::vector<int>(channels, 0));
        layer.ahat = exact::quantize_conv(net->ahat[l]->weight, net->ahat[l]->bias, std::vector<int>(r, 15),
                                          std::vector<int>(channels, 0));
        for (int j = 0; j < channels; ++j)
          frac[j] = std::min(frac_for_bound(layer.a.bound[j], layer.a.scale[j]),
                             frac_for_bound(layer.ahat.bound[j], layer.ahat.scale[j]));
        set_output_frac(layer.a, frac);
        set_output_frac(layer.ahat, frac);
      } else {
        layer.ahat = exact::quantize_conv(net->ahat[0]->weight, net->ahat[0]->bias, std::vector<int>(r, 15),
                                          std::vector<int>(channels, kForecastFrac));
      }
      layer.e_frac = frac;
      layer.e_frac.insert(layer.e_frac.end(), frac.begin(), frac.end());
    }
    for (int l = 0; l < layers; ++l) {
      std::vector<int> in = layers_[l].e_frac;
      in.insert(in.end(), options_.r(l) + (l + 1 < layers ? options_.r(l + 1) : 0), 15);
      layers_[l].lstm = exact::quantize_conv(net->lstm[l]->weight, net->lstm[l]->bias, in,
                                             std::vector<int>(4 * options_.r(l), 15));
    }
  }


  PredNetState initial_state(std::int64_t batch, std::int64_t height, std::int64_t width) const override {
    check_size(height, width);
    PredNetState s;
    for (int l = 0; l < options_.layers(); ++l) {
      const std::int64_t h = height >> l, w = width >> l;
      s.r.push_back(torch::zeros({batch, options_.r(l), h, w}, torch::kInt16));
      s.c.push_back(torch::zeros({batch, options_.r(l), h, w}, torch::kInt32));
      s.e.push_back(torch::zeros({batch, 2 * options_.a_channels[l], h, w}, torch::kInt16));
    }
    s.forecast = torch::zeros({batch, options_.a_channels[0], height, width}, torch::kInt32);
    return s;
  }

  torch::Tensor predict(PredNetState& s, std::uint32_t max_value) const override {
    check_max(max_value);
    check_state(s);
    const int layers = options_.layers();
    for (int l = layers - 1; l >= 0; --l) {
      const Layer& layer = layers_[l];
      const auto& e = s.e[l];
      const std::int64_t batch = e.size(0), h = e.size(2), w = e.size(3), hw = h * w;
      const std::int64_t ce = e.size(1), cr = options_.r(l), cu = l + 1 < layers ? options_.r(l + 1) : 0;
      auto input = torch::empty({batch, ce + cr + cu, h, w}, torch::kInt16);
      std::int16_t* in = input.data_ptr<std::int16_t>();
      const auto e_contiguous = e.contiguous();  // kept alive while `ep` is used
      const std::int16_t* ep = e_contiguous.data_ptr<std::int16_t>();
      const auto r_contiguous = s.r[l].contiguous();
      const std::int16_t* rp = r_contiguous.data_ptr<std::int16_t>();
      const auto up_contiguous = cu > 0 ? s.r[l + 1].contiguous() : torch::Tensor();
      const std::int16_t* up = cu > 0 ? up_contiguous.data_ptr<std::int16_t>() : nullptr;
      const std::int64_t cin = ce + cr + cu;
      parallel_planes(batch * cin, [&](std::int64_t plane) {
        const std::int64_t b = plane / cin, ch = plane % cin;
        std::int16_t* dst = in + plane * hw;
        if (ch < ce) {
          std::memcpy(dst, ep + (b * ce + ch) * hw, sizeof(std::int16_t) * hw);
        } else if (ch < ce + cr) {
          std::memcpy(dst, rp + (b * cr + ch - ce) * hw, sizeof(std::int16_t) * hw);
        } else {  // nearest-neighbour 2x upsampling of R_{l+1}
          const std::int16_t* src = up + (b * cu + ch - ce - cr) * (hw / 4);
          for (std::int64_t y = 0; y < h; ++y)
            for (std::int64_t x = 0; x < w; ++x) dst[y * w + x] = src[(y / 2) * (w / 2) + x / 2];
        }
      });
      auto gates = torch::empty({batch, 4 * cr, h, w}, torch::kInt32);
      exact::conv2d(in, int(batch), int(h), int(w), layer.lstm, gates.data_ptr<std::int32_t>());
      auto c = s.c[l].contiguous().clone();
      auto r = torch::empty({batch, cr, h, w}, torch::kInt16);
      const std::int32_t* gp = gates.data_ptr<std::int32_t>();
      std::int32_t* cp = c.data_ptr<std::int32_t>();
      std::int16_t* rq = r.data_ptr<std::int16_t>();
      // A batch item's gates are [4][cr * hw] (i, f, o, g); its cells are split into 8 tasks.
      const std::int64_t cells = cr * hw, chunk = std::max<std::int64_t>(1, cells / 8);
      const std::int64_t chunks = (cells + chunk - 1) / chunk;
      parallel_planes(batch * chunks, [&](std::int64_t task) {
        const std::int64_t b = task / chunks, n0 = (task % chunks) * chunk, n = std::min(chunk, cells - n0);
        exact::lstm_update(gp + b * 4 * cells + n0, cells, n, cp + b * cells + n0, rq + b * cells + n0);
      });
      s.c[l] = c;
      s.r[l] = r;
    }
    // The forecast: min(relu(ahat0(R0)), 1) in Q24, then pixels round_half_up(q * max / 2^24).
    const auto& r0 = s.r[0];
    const std::int64_t batch = r0.size(0), h = r0.size(2), w = r0.size(3), channels = options_.a_channels[0];
    auto forecast = exact::conv2d(r0, layers_[0].ahat);
    auto pixels = torch::empty_like(forecast);
    std::int32_t* fp = forecast.data_ptr<std::int32_t>();
    std::int32_t* pp = pixels.data_ptr<std::int32_t>();
    const std::int64_t hw = h * w;
    parallel_planes(batch * channels, [&](std::int64_t plane) {
      for (std::int64_t n = plane * hw; n < (plane + 1) * hw; ++n) {
        fp[n] = std::clamp(fp[n], 0, 1 << kForecastFrac);
        pp[n] = std::int32_t((std::int64_t(fp[n]) * max_value + (1 << (kForecastFrac - 1))) >> kForecastFrac);
      }
    });
    s.forecast = forecast;
    return pixels;
  }

  void correct(PredNetState& s, const torch::Tensor& pixels, std::uint32_t max_value) const override {
    check_max(max_value);
    check_state(s);
    const auto f = s.forecast.contiguous();
    if (pixels.dim() != 4 || pixels.sizes() != f.sizes())
      throw std::invalid_argument("exact PredNet: the frame's shape does not fit the state");
    const auto frame = pixels.to(torch::kInt32).contiguous();
    const std::int64_t batch = f.size(0), channels = f.size(1), hw = f.size(2) * f.size(3);
    // Layer 0: the frame and the forecast in Q15 (1.0 = 32768), errors saturated to 32767.
    auto e0 = torch::empty({batch, 2 * channels, f.size(2), f.size(3)}, torch::kInt16);
    {
      const std::int32_t* px = frame.data_ptr<std::int32_t>();
      const std::int32_t* fp = f.data_ptr<std::int32_t>();
      std::int16_t* ep = e0.data_ptr<std::int16_t>();
      const std::int64_t max = max_value;
      parallel_planes(batch * channels, [&](std::int64_t plane) {
        const std::int64_t b = plane / channels, ch = plane % channels;
        std::int16_t* below = ep + (b * 2 * channels + ch) * hw;  // relu(prediction - target)
        std::int16_t* above = below + channels * hw;              // relu(target - prediction)
        for (std::int64_t n = 0; n < hw; ++n) {
          const std::int64_t p = std::clamp<std::int64_t>(px[plane * hw + n], 0, max);
          const std::int64_t target = ((p << 16) + max) / (2 * max);  // round_half_up(p * 2^15 / max)
          const std::int64_t prediction = (std::int64_t(fp[plane * hw + n]) + (1 << (kForecastFrac - 16))) >>
                                          (kForecastFrac - 15);
          below[n] = exact::saturate16(std::max<std::int64_t>(prediction - target, 0));
          above[n] = exact::saturate16(std::max<std::int64_t>(target - prediction, 0));
        }
      });
    }
    s.e[0] = e0;
    for (int l = 1; l < options_.layers(); ++l) {
      const Layer& layer = layers_[l];
      // A_l = maxpool2(relu(a_l(E_{l-1}))), Ahat_l = relu(ahat_l(R_l)), in the layer's formats.
      const auto pre = exact::conv2d(s.e[l - 1], layer.a);
      const auto prediction = exact::conv2d(s.r[l], layer.ahat);
      const std::int64_t ch = prediction.size(1), h = prediction.size(2), w = prediction.size(3);
      auto e = torch::empty({batch, 2 * ch, h, w}, torch::kInt16);
      const std::int32_t* ap = pre.data_ptr<std::int32_t>();
      const std::int32_t* hp = prediction.data_ptr<std::int32_t>();
      std::int16_t* ep = e.data_ptr<std::int16_t>();
      parallel_planes(batch * ch, [&](std::int64_t plane) {
        const std::int64_t b = plane / ch, j = plane % ch;
        const std::int32_t* a = ap + plane * 4 * h * w;
        std::int16_t* below = ep + (b * 2 * ch + j) * h * w;
        std::int16_t* above = below + ch * h * w;
        for (std::int64_t y = 0; y < h; ++y)
          for (std::int64_t x = 0; x < w; ++x) {
            const std::int32_t* q = a + (2 * y) * (2 * w) + 2 * x;
            const std::int64_t target = std::max({q[0], q[1], q[2 * w], q[2 * w + 1], 0});
            const std::int64_t guess = std::max(hp[plane * h * w + y * w + x], 0);
            below[y * w + x] = exact::saturate16(std::max<std::int64_t>(guess - target, 0));
            above[y * w + x] = exact::saturate16(std::max<std::int64_t>(target - guess, 0));
          }
      });
      s.e[l] = e;
    }
  }

 private:
  struct Layer {
    QuantConv lstm, ahat, a;
    std::vector<int> e_frac;  // fractional bits of each error channel (2 * a_channels)
  };

  void check_size(std::int64_t height, std::int64_t width) const {
    const int m = options_.padding_multiple();
    if (height <= 0 || width <= 0 || height % m != 0 || width % m != 0)
      throw std::invalid_argument("exact PredNet: frame size " + std::to_string(height) + "x" + std::to_string(width) +
                                  " is not a multiple of " + std::to_string(m));
  }
  static void check_max(std::uint32_t max_value) {
    if (max_value < 1 || max_value > 65535) throw std::invalid_argument("exact PredNet: max_value must be 1..65535");
  }
  void check_state(const PredNetState& s) const {
    const auto layers = std::size_t(options_.layers());
    if (s.r.size() != layers || s.c.size() != layers || s.e.size() != layers || !s.forecast.defined() ||
        s.r[0].scalar_type() != torch::kInt16 || s.c[0].scalar_type() != torch::kInt32 ||
        s.forecast.scalar_type() != torch::kInt32)
      throw std::invalid_argument("exact PredNet: the state was not made by the exact engine");
  }

  PredNetOptions options_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Engine> make_engine(PredNet net) { return std::make_unique<ExactEngine>(std::move(net)); }

}  // namespace tezip::legacy_exact
