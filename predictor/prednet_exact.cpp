// Exact (integer) PredNet inference in the core, without libtorch: every machine computes the same
// bits (docs/exact_inference.md).
//
// Why the results cannot depend on the machine:
// - The float model is turned into integers with exact operations only: float -> double, multiply
//   by a power of two (std::ldexp) and std::round (half away from zero). Every scale is a power of
//   two, so requantization is a shift that rounds half up. No libm transcendental is called: the
//   tanh table comes from integer series (make_tanh_table).
// - Convolutions multiply int16 by int16 and add in int32. quantize_conv bounds each output
//   channel's weights so that sum |w| * 32767 <= 2^31 - 1, and inputs are saturated to +-32767, so
//   every partial sum, in whatever order a kernel adds (scalar, AVX2 pmaddwd pairs, any tiling), is
//   an exact integer below 2^31: integer addition is associative when it cannot overflow, so all
//   orders give the same sum.
// - Everything else (gates, LSTM state, pooling, errors, pixels) is int32/int64 arithmetic with
//   explicit rounding (floor of a shifted value, i.e. round half up) and saturation.
#include "predictor/prednet_exact.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TEZIP_EXACT_X86 1
// GCC bug 105593, as in codecs/entropy/striped_rans.cpp: silenced in the intrinsics' header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace tezip::exact {
namespace {

constexpr std::int64_t kAccLimit = (std::int64_t{1} << 31) - 1;
constexpr int kTile = 128;  // output pixels per im2col tile (a multiple of 32)

std::int64_t floor_div(std::int64_t n, std::int64_t d) {  // d > 0
  std::int64_t q = n / d;
  if (n % d != 0 && n < 0) --q;
  return q;
}

std::int32_t saturate32(std::int64_t v) { return std::int32_t(std::clamp<std::int64_t>(v, -kAccLimit, kAccLimit)); }

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

// Where tap k = (c * kernel + dy) * kernel + dx reads: channel c, displaced by (dx, dy).
struct Tap {
  int c = 0, dx = 0, dy = 0;
  bool present = false;  // false: the odd tap count's last pair has no second tap (reads 0)
};

std::vector<Tap> conv_taps(const QuantConv& conv) {
  const int k2 = conv.kernel * conv.kernel, taps = conv.in_channels * k2;
  std::vector<Tap> out(std::size_t(2) * conv.pairs);
  for (int k = 0; k < taps; ++k)
    out[k] = {k / k2, k % conv.kernel - conv.kernel / 2, (k / conv.kernel) % conv.kernel - conv.kernel / 2, true};
  return out;
}

// xs[pair][kTile]: int16 taps 2p (low half) and 2p+1 (high half) of output pixels [p0, p0 + count)
// of one image, outside the image 0; pixels past `count` are 0. Written row segment by row segment
// (the tile's pixels in one image row), each pair in one pass: the columns where both taps read the
// image as one loop the compiler vectorises, the few at the image's edges one by one. (It was two
// passes of memset and memcpy per tap and segment into scratch, then an interleaving one: 44% of
// PredNet decoding on mire2 went to them and the calls.) Inlined into conv2d's clones.
[[gnu::always_inline]] inline void im2col_tile(const std::int16_t* image, int height, int width, std::span<const Tap> taps,
                                               int pairs, int p0, int count, std::int32_t* xs) {
  if (count < kTile)
    for (int p = 0; p < pairs; ++p) std::fill(xs + std::int64_t(p) * kTile + count, xs + std::int64_t(p + 1) * kTile, 0);
  const std::int64_t plane_size = std::int64_t(height) * width;
  for (int i = 0, y = p0 / width, x = p0 % width; i < count; i += width - x, x = 0, ++y) {
    const int n = std::min(count - i, width - x);  // the tile's pixels in row y
    for (int p = 0; p < pairs; ++p) {
      // Each tap: the index of segment pixel j's sample is at + j, valid for j in [lo, hi).
      std::int64_t at[2] = {0, 0};
      int lo[2] = {0, 0}, hi[2] = {0, 0};
      for (int h = 0; h < 2; ++h) {
        const Tap& t = taps[2 * p + h];
        const int sy = y + t.dy;
        if (!t.present || sy < 0 || sy >= height) continue;
        at[h] = std::int64_t(t.c) * plane_size + std::int64_t(sy) * width + x + t.dx;
        lo[h] = std::clamp(-t.dx - x, 0, n);
        hi[h] = std::clamp(width - t.dx - x, lo[h], n);
      }
      std::int32_t* dst = xs + std::int64_t(p) * kTile + i;
      const auto one = [&](int j) {
        const std::uint32_t a = j >= lo[0] && j < hi[0] ? std::uint16_t(image[at[0] + j]) : 0u;
        const std::uint32_t b = j >= lo[1] && j < hi[1] ? std::uint16_t(image[at[1] + j]) : 0u;
        dst[j] = std::int32_t(a | (b << 16));
      };
      const int both_lo = std::max(lo[0], lo[1]), both_hi = std::min(hi[0], hi[1]);
      if (both_lo >= both_hi) {
        for (int j = 0; j < n; ++j) one(j);
        continue;
      }
      for (int j = 0; j < both_lo; ++j) one(j);
      const std::int16_t* s0 = image + at[0] + both_lo;  // inside the image from both_lo on
      const std::int16_t* s1 = image + at[1] + both_lo;
      std::int32_t* d = dst + both_lo;
      for (int j = 0; j < both_hi - both_lo; ++j)
        d[j] = std::int32_t(std::uint32_t(std::uint16_t(s0[j])) | (std::uint32_t(std::uint16_t(s1[j])) << 16));
      for (int j = both_hi; j < n; ++j) one(j);
    }
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

// The same sums with AVX-512 VNNI: vpdpwssd multiplies the int16 pairs and adds both products to
// the int32 accumulator in one instruction, 16 pixels a register. The bound above holds for every
// partial sum, so nothing wraps and the sums equal the AVX2 and portable ones.
template <int OB>
__attribute__((target("avx2,avx512f,avx512vl,avx512bw,avx512vnni"))) void gemm_block_vnni(const std::int32_t* xs,
                                                                                           const QuantConv& conv, int o0,
                                                                                           std::int32_t* acc) {
  const std::int32_t* w[OB];
  for (int o = 0; o < OB; ++o) w[o] = conv.weights.data() + std::int64_t(o0 + o) * conv.pairs;
  for (int i = 0; i < kTile; i += 32) {
    __m512i a[OB][2];
    for (int o = 0; o < OB; ++o) a[o][0] = a[o][1] = _mm512_setzero_si512();
    const std::int32_t* x = xs + i;
    for (int p = 0; p < conv.pairs; ++p, x += kTile) {
      const __m512i x0 = _mm512_loadu_si512(x);
      const __m512i x1 = _mm512_loadu_si512(x + 16);
      for (int o = 0; o < OB; ++o) {
        const __m512i wv = _mm512_set1_epi32(w[o][p]);
        a[o][0] = _mm512_dpwssd_epi32(a[o][0], x0, wv);
        a[o][1] = _mm512_dpwssd_epi32(a[o][1], x1, wv);
      }
    }
    for (int o = 0; o < OB; ++o) {
      _mm512_storeu_si512(acc + std::int64_t(o) * kTile + i, a[o][0]);
      _mm512_storeu_si512(acc + std::int64_t(o) * kTile + i + 16, a[o][1]);
    }
  }
}

// The SIMD kernel's block of `ob` (1-4) outputs.
void gemm_simd(Kernel kernel, const std::int32_t* xs, const QuantConv& conv, int o0, int ob, std::int32_t* acc) {
  using Block = void (*)(const std::int32_t*, const QuantConv&, int, std::int32_t*);
  static constexpr Block avx2[] = {gemm_block_avx2<1>, gemm_block_avx2<2>, gemm_block_avx2<3>, gemm_block_avx2<4>};
  static constexpr Block vnni[] = {gemm_block_vnni<1>, gemm_block_vnni<2>, gemm_block_vnni<3>, gemm_block_vnni<4>};
  (kernel == Kernel::avx512vnni ? vnni : avx2)[ob - 1](xs, conv, o0, acc);
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

QuantConv quantize_conv(std::span<const float> weight, std::span<const float> bias, int out_channels, int in_channels,
                        int kernel, std::span<const int> input_frac, std::span<const int> output_frac) {
  QuantConv q;
  q.out_channels = out_channels;
  q.in_channels = in_channels;
  q.kernel = kernel;
  if (out_channels < 1 || in_channels < 1 || kernel < 1 || kernel % 2 == 0 ||
      std::int64_t(input_frac.size()) != in_channels || std::int64_t(output_frac.size()) != out_channels ||
      std::int64_t(bias.size()) != out_channels ||
      std::int64_t(weight.size()) != std::int64_t(out_channels) * in_channels * kernel * kernel)
    throw std::invalid_argument("quantize_conv: shapes do not fit");
  const int k2 = q.kernel * q.kernel, taps = q.in_channels * k2;
  q.pairs = (taps + 1) / 2;
  q.weights.assign(std::size_t(q.out_channels) * q.pairs, 0);
  q.bias.resize(q.out_channels);
  q.scale.resize(q.out_channels);
  q.shift.resize(q.out_channels);
  q.bound.resize(q.out_channels);
  std::vector<std::int64_t> taps_q(taps);
  std::vector<double> wo(taps);  // float -> double is exact
  for (int o = 0; o < q.out_channels; ++o) {
    for (int k = 0; k < taps; ++k) wo[k] = double(weight[std::size_t(o) * taps + k]);
    const double bias_o = double(bias[o]);
    // The first scale to try: 2^(15 - e) with e the largest binary exponent of the weights per
    // input unit; each step down halves the weights until both bounds hold.
    int e_max = -1000;
    for (int k = 0; k < taps; ++k) {
      if (!std::isfinite(wo[k])) throw std::invalid_argument("quantize_conv: a weight is not finite");
      if (wo[k] != 0) e_max = std::max(e_max, std::ilogb(wo[k]) + 1 - input_frac[k / k2]);
    }
    if (!std::isfinite(bias_o)) throw std::invalid_argument("quantize_conv: a bias is not finite");
    int s = std::min(40, e_max == -1000 ? 40 : 15 - e_max);
    for (;; --s) {
      if (s < -60) throw std::invalid_argument("quantize_conv: weights too large to quantize");
      std::int64_t l1 = 0, largest = 0;
      for (int k = 0; k < taps; ++k) {
        taps_q[k] = std::int64_t(std::round(std::ldexp(wo[k], s - input_frac[k / k2])));
        largest = std::max(largest, std::abs(taps_q[k]));
        l1 += std::abs(taps_q[k]);
      }
      const double bias_scaled = std::round(std::ldexp(bias_o, s));
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
  static const bool available = __builtin_cpu_supports("avx2");
  return available;
#else
  return false;
#endif
}

bool vnni_available() {
#ifdef TEZIP_EXACT_X86
  static const bool available = avx2_available() && __builtin_cpu_supports("avx512f") &&
                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vnni");
  return available;
#else
  return false;
#endif
}

bool kernel_available(Kernel kernel) {
  switch (kernel) {
    case Kernel::best:
    case Kernel::portable:
      return true;
    case Kernel::avx2:
      return avx2_available();
    case Kernel::avx512vnni:
      return vnni_available();
  }
  return false;
}

std::vector<Kernel> supported_kernels() {
  std::vector<Kernel> out;
  for (const Kernel k : {Kernel::portable, Kernel::avx2, Kernel::avx512vnni})
    if (kernel_available(k)) out.push_back(k);
  return out;
}

const char* kernel_name(Kernel kernel) {
  switch (kernel) {
    case Kernel::best:
      return "best";
    case Kernel::portable:
      return "portable";
    case Kernel::avx2:
      return "avx2";
    case Kernel::avx512vnni:
      return "avx512vnni";
  }
  return "?";
}

Kernel resolve(Kernel kernel) {
  static const Kernel best = [] {
    if (const char* forced = std::getenv("TEZIP_EXACT_KERNEL"); forced != nullptr && *forced != '\0') {
      const std::string name = forced;
      for (const Kernel k : {Kernel::portable, Kernel::avx2, Kernel::avx512vnni})
        if (name == kernel_name(k)) return k;
      if (name != "best")
        throw std::invalid_argument("TEZIP_EXACT_KERNEL=" + name + ": portable, avx2, avx512vnni or best");
    }
    const char* capability = std::getenv("ATEN_CPU_CAPABILITY");
    if (capability != nullptr && std::string(capability) == "default") return Kernel::portable;
    return vnni_available() ? Kernel::avx512vnni : avx2_available() ? Kernel::avx2 : Kernel::portable;
  }();
  if (kernel == Kernel::best) kernel = best;
  if (!kernel_available(kernel))
    throw std::invalid_argument(std::string("the exact PredNet engine's ") + kernel_name(kernel) +
                                " kernel was asked for, but this CPU cannot run it");
  return kernel;
}

__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) void conv2d(const std::int16_t* in, int batch, int height, int width, const QuantConv& conv, std::int32_t* out,
            Kernel kernel) {
  kernel = resolve(kernel);
  const std::int64_t pixels = std::int64_t(height) * width;
  const std::int64_t tiles = (pixels + kTile - 1) / kTile;
  const std::int64_t in_stride = std::int64_t(conv.in_channels) * pixels;
  const std::int64_t out_stride = std::int64_t(conv.out_channels) * pixels;
  AlignedBuffer xs(std::size_t(conv.pairs) * kTile), acc(4 * kTile);
  const std::vector<Tap> taps = conv_taps(conv);
  for (std::int64_t task = 0; task < batch * tiles; ++task) {
    const std::int64_t b = task / tiles;
    const int p0 = int((task % tiles) * kTile), count = int(std::min<std::int64_t>(kTile, pixels - p0));
    im2col_tile(in + b * in_stride, height, width, taps, conv.pairs, p0, count, xs.data());
    for (int o0 = 0; o0 < conv.out_channels; o0 += 4) {
      const int ob = std::min(4, conv.out_channels - o0);
#ifdef TEZIP_EXACT_X86
      if (kernel != Kernel::portable)
        gemm_simd(kernel, xs.data(), conv, o0, ob, acc.data());
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

namespace {

// The tanh table as int32 with one more copy of its last entry, so that tanh at the table's end
// (|x| = 8 in Q15) interpolates towards itself without reading past it.
const std::int32_t* tanh_table_padded() {
  static const std::vector<std::int32_t> padded = [] {
    const auto& t = tanh_table();
    std::vector<std::int32_t> p(t.begin(), t.end());
    p.push_back(p.back());
    return p;
  }();
  return padded.data();
}

// hard_sigmoid_q15 and tanh_q15 in 32-bit arithmetic, for a loop the compiler vectorises: each
// input is first clamped to a range beyond which the function is constant (hard_sigmoid_q15 is 0
// below -81922 and 32768 above 81917; tanh_q15 is +-t[32768] from |x| = 8 * 2^15 on), so the
// values equal the int64 definitions for every int32 input (tests/test_exact_engine.cpp).
inline std::int32_t hard_sigmoid_narrow(std::int32_t z) {
  const std::int32_t n = 2 * std::clamp(z, -90000, 90000) + 5 + 180000;  // in [5, 360005]
  return std::clamp(std::int32_t(std::uint32_t(n) / 10u) - 18000 + 16384, 0, 32768);
}

inline std::int32_t tanh_narrow(const std::int32_t* t, std::int32_t x) {
  const std::int32_t c = std::clamp(x, -(8 << 15), 8 << 15);
  const std::int32_t ax = c < 0 ? -c : c, idx = ax >> 3, frac = ax & 7;
  const std::int32_t v = t[idx] + (((t[idx + 1] - t[idx]) * frac + 4) >> 3);
  return c < 0 ? -v : v;
}


void lstm_update_portable(const std::int32_t* gates, std::int64_t gate_stride, std::int64_t count, std::int32_t* c,
                          std::int16_t* r) {
  const std::int32_t *gi = gates, *gf = gates + gate_stride, *go = gates + 2 * gate_stride, *gg = gates + 3 * gate_stride;
  const std::int32_t* t = tanh_table_padded();
  constexpr std::int64_t kCellLimit = std::int64_t{1} << 30;
  for (std::int64_t n = 0; n < count; ++n) {
    const std::int32_t i = hard_sigmoid_narrow(gi[n]), f = hard_sigmoid_narrow(gf[n]), o = hard_sigmoid_narrow(go[n]);
    // |f c| <= 2^15 * 2^31: 64 bits; i tanh and o tanh stay below 2^30.
    const std::int64_t cell = (std::int64_t(f) * c[n] + i * tanh_narrow(t, gg[n]) + (1 << 14)) >> 15;
    const std::int32_t next = std::int32_t(std::clamp(cell, -kCellLimit, kCellLimit));
    c[n] = next;
    r[n] = std::int16_t((o * tanh_narrow(t, next) + (1 << 14)) >> 15);
  }
}

#ifdef TEZIP_EXACT_X86
// hard_sigmoid_narrow on 16 lanes: floor(n / 10) of n < 2^19 as (n * ceil(2^23 / 10)) >> 23, exact
// there (the error n * 4.8e-8 stays below 1/10), in 64-bit products of the even and odd lanes.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) inline __m512i hard_sigmoid_16(__m512i z) {
  const __m512i n = _mm512_add_epi32(
      _mm512_slli_epi32(_mm512_min_epi32(_mm512_max_epi32(z, _mm512_set1_epi32(-90000)), _mm512_set1_epi32(90000)), 1),
      _mm512_set1_epi32(180005));
  const __m512i magic = _mm512_set1_epi64(838861);
  const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(n, magic), 23);
  const __m512i odd = _mm512_srli_epi64(_mm512_mul_epu32(_mm512_srli_epi64(n, 32), magic), 23);
  const __m512i q = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  return _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(q, _mm512_set1_epi32(1616)), _mm512_setzero_si512()),
                          _mm512_set1_epi32(32768));
}

// tanh_narrow on 16 lanes (two gathers from the padded table).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) inline __m512i tanh_16(const std::int32_t* t, __m512i x) {
  const __m512i c = _mm512_min_epi32(_mm512_max_epi32(x, _mm512_set1_epi32(-(8 << 15))), _mm512_set1_epi32(8 << 15));
  const __m512i ax = _mm512_abs_epi32(c), idx = _mm512_srai_epi32(ax, 3), frac = _mm512_and_si512(ax, _mm512_set1_epi32(7));
  const __m512i t0 = _mm512_i32gather_epi32(idx, t, 4);
  const __m512i t1 = _mm512_i32gather_epi32(_mm512_add_epi32(idx, _mm512_set1_epi32(1)), t, 4);
  const __m512i v = _mm512_add_epi32(
      t0, _mm512_srai_epi32(_mm512_add_epi32(_mm512_mullo_epi32(_mm512_sub_epi32(t1, t0), frac), _mm512_set1_epi32(4)), 3));
  return _mm512_mask_sub_epi32(v, _mm512_cmplt_epi32_mask(c, _mm512_setzero_si512()), _mm512_setzero_si512(), v);
}

// (f c + i tanh(g) + 2^14) >> 15 clamped to +-2^30, for 8 lanes widened to 64 bits.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) inline __m256i cell_8(__m256i f, __m256i c, __m256i itg) {
  const __m512i sum = _mm512_add_epi64(
      _mm512_add_epi64(_mm512_mul_epi32(_mm512_cvtepi32_epi64(f), _mm512_cvtepi32_epi64(c)), _mm512_cvtepi32_epi64(itg)),
      _mm512_set1_epi64(1 << 14));
  const __m512i limit = _mm512_set1_epi64(std::int64_t{1} << 30);
  const __m512i cell = _mm512_min_epi64(_mm512_max_epi64(_mm512_srai_epi64(sum, 15), _mm512_sub_epi64(_mm512_setzero_si512(), limit)), limit);
  return _mm512_cvtepi64_epi32(cell);
}

// The same values as lstm_update_portable, 16 cells at a time; the tail the portable way.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void lstm_update_avx512(
    const std::int32_t* gates, std::int64_t gate_stride, std::int64_t count, std::int32_t* c, std::int16_t* r) {
  const std::int32_t *gi = gates, *gf = gates + gate_stride, *go = gates + 2 * gate_stride, *gg = gates + 3 * gate_stride;
  const std::int32_t* t = tanh_table_padded();
  std::int64_t n = 0;
  for (; n + 16 <= count; n += 16) {
    const __m512i i = hard_sigmoid_16(_mm512_loadu_si512(gi + n)), f = hard_sigmoid_16(_mm512_loadu_si512(gf + n));
    const __m512i o = hard_sigmoid_16(_mm512_loadu_si512(go + n));
    const __m512i itg = _mm512_mullo_epi32(i, tanh_16(t, _mm512_loadu_si512(gg + n)));
    const __m512i cv = _mm512_loadu_si512(c + n);
    const __m256i lo = cell_8(_mm512_castsi512_si256(f), _mm512_castsi512_si256(cv), _mm512_castsi512_si256(itg));
    const __m256i hi = cell_8(_mm512_extracti64x4_epi64(f, 1), _mm512_extracti64x4_epi64(cv, 1),
                              _mm512_extracti64x4_epi64(itg, 1));
    const __m512i next = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    _mm512_storeu_si512(c + n, next);
    const __m512i rv = _mm512_srai_epi32(_mm512_add_epi32(_mm512_mullo_epi32(o, tanh_16(t, next)), _mm512_set1_epi32(1 << 14)), 15);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(r + n), _mm512_cvtepi32_epi16(rv));
  }
  lstm_update_portable(gates + n, gate_stride, count - n, c + n, r + n);
}
#endif

// The two halves of an error, clamp(d, 0, 32767) and clamp(-d, 0, 32767), for |d| < 2^31.
inline void split_error(std::int32_t d, std::int16_t& below, std::int16_t& above) {
  below = std::int16_t(std::clamp(d, 0, kMaxInput));
  above = std::int16_t(std::clamp(-d, 0, kMaxInput));
}

// frame_errors in 32-bit arithmetic: the forecast clamped to [0, 2^24] and the target in [0, 32768]
// keep every difference far inside int32 (the int64 of the definition is never needed).
[[gnu::always_inline]] inline void frame_errors_body(const std::int32_t* frame, const std::int32_t* forecast, std::int64_t count,
                                                     std::span<const std::int32_t> q15, std::span<const std::int32_t> q24,
                                                     std::int16_t* below, std::int16_t* above, std::int32_t* last) {
  const std::int32_t max = std::int32_t(q15.size()) - 1;
  for (std::int64_t n = 0; n < count; ++n) {
    const std::int32_t p = std::clamp(frame[n], 0, max);
    const std::int32_t prediction = (std::clamp(forecast[n], 0, 1 << 24) + (1 << 8)) >> 9;
    split_error(prediction - q15[std::size_t(p)], below[n], above[n]);
    if (last != nullptr) last[n] = q24[std::size_t(p)];
  }
}

// Output i of a plane, column x of the rows `top` and `bottom` of `pre`: in 32-bit arithmetic, since
// target and guess are both in [0, 2^31 - 1] and their difference fits.
inline void pooled_error(const std::int32_t* top, const std::int32_t* bottom, std::int64_t x, const std::int32_t* prediction,
                         std::int16_t* below, std::int16_t* above, std::int64_t i) {
  const std::int32_t target = std::max({top[2 * x], top[2 * x + 1], bottom[2 * x], bottom[2 * x + 1], 0});
  split_error(std::max(prediction[i], 0) - target, below[i], above[i]);
}

[[gnu::always_inline]] inline void pooled_errors_body(const std::int32_t* pre, const std::int32_t* prediction, std::int64_t height,
                                                      std::int64_t width, std::int16_t* below, std::int16_t* above) {
  for (std::int64_t y = 0; y < height; ++y) {
    const std::int32_t* top = pre + 2 * y * 2 * width;
    for (std::int64_t x = 0; x < width; ++x) pooled_error(top, top + 2 * width, x, prediction, below, above, y * width + x);
  }
}

void frame_errors_portable(const std::int32_t* frame, const std::int32_t* forecast, std::int64_t count,
                           std::span<const std::int32_t> q15, std::span<const std::int32_t> q24, std::int16_t* below,
                           std::int16_t* above, std::int32_t* last) {
  frame_errors_body(frame, forecast, count, q15, q24, below, above, last);
}

void pooled_errors_portable(const std::int32_t* pre, const std::int32_t* prediction, std::int64_t height, std::int64_t width,
                            std::int16_t* below, std::int16_t* above) {
  pooled_errors_body(pre, prediction, height, width, below, above);
}

#ifdef TEZIP_EXACT_X86
// The halves of 8 errors d, stored as int16: clamp(d, 0, 32767) to below, clamp(-d, ...) to above.
__attribute__((target("avx2"))) inline void split_errors_8(__m256i d, std::int16_t* below, std::int16_t* above) {
  const __m256i zero = _mm256_setzero_si256(), top = _mm256_set1_epi32(kMaxInput);
  const __m256i b = _mm256_min_epi32(_mm256_max_epi32(d, zero), top);
  const __m256i a = _mm256_min_epi32(_mm256_max_epi32(_mm256_sub_epi32(zero, d), zero), top);
  // packs works within 128-bit lanes: b0-3 a0-3 b4-7 a4-7, then the quarters reordered.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(b, a), 0xD8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(below), _mm256_castsi256_si128(packed));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(above), _mm256_extracti128_si256(packed, 1));
}

__attribute__((target("avx2"))) inline __m256i load8(const std::int32_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// frame_errors_body 8 pixels at a time (the tables read by gathers); the tail the portable way.
__attribute__((target("avx2"))) void frame_errors_avx2(const std::int32_t* frame, const std::int32_t* forecast,
                                                       std::int64_t count, std::span<const std::int32_t> q15,
                                                       std::span<const std::int32_t> q24, std::int16_t* below,
                                                       std::int16_t* above, std::int32_t* last) {
  const __m256i zero = _mm256_setzero_si256(), max = _mm256_set1_epi32(std::int32_t(q15.size()) - 1);
  const __m256i one = _mm256_set1_epi32(1 << 24), half = _mm256_set1_epi32(1 << 8);
  std::int64_t n = 0;
  for (; n + 8 <= count; n += 8) {
    const __m256i p = _mm256_min_epi32(_mm256_max_epi32(load8(frame + n), zero), max);
    const __m256i f = _mm256_min_epi32(_mm256_max_epi32(load8(forecast + n), zero), one);
    const __m256i prediction = _mm256_srai_epi32(_mm256_add_epi32(f, half), 9);
    split_errors_8(_mm256_sub_epi32(prediction, _mm256_i32gather_epi32(q15.data(), p, 4)), below + n, above + n);
    if (last != nullptr)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(last + n), _mm256_i32gather_epi32(q24.data(), p, 4));
  }
  frame_errors_body(frame + n, forecast + n, count - n, q15, q24, below + n, above + n, last != nullptr ? last + n : nullptr);
}

// pooled_errors_body 8 outputs at a time: the 2 x 2 maxima of 16 columns of two rows, the even and
// odd columns' maxima taken apart by shuffles; each row's tail the portable way.
__attribute__((target("avx2"))) void pooled_errors_avx2(const std::int32_t* pre, const std::int32_t* prediction,
                                                        std::int64_t height, std::int64_t width, std::int16_t* below,
                                                        std::int16_t* above) {
  const __m256i zero = _mm256_setzero_si256();
  for (std::int64_t y = 0; y < height; ++y) {
    const std::int32_t* top = pre + 2 * y * 2 * width;
    const std::int32_t* bottom = top + 2 * width;
    const std::int64_t row = y * width;
    std::int64_t x = 0;
    for (; x + 8 <= width; x += 8) {
      const __m256 m0 = _mm256_castsi256_ps(_mm256_max_epi32(load8(top + 2 * x), load8(bottom + 2 * x)));
      const __m256 m1 = _mm256_castsi256_ps(_mm256_max_epi32(load8(top + 2 * x + 8), load8(bottom + 2 * x + 8)));
      // even and odd columns: 0 2 | 8 10 | 4 6 | 12 14 (in pairs), restored to order by the permute
      const __m256i even = _mm256_castps_si256(_mm256_shuffle_ps(m0, m1, 0x88));
      const __m256i odd = _mm256_castps_si256(_mm256_shuffle_ps(m0, m1, 0xDD));
      const __m256i target = _mm256_max_epi32(_mm256_permute4x64_epi64(_mm256_max_epi32(even, odd), 0xD8), zero);
      const __m256i guess = _mm256_max_epi32(load8(prediction + row + x), zero);
      split_errors_8(_mm256_sub_epi32(guess, target), below + row + x, above + row + x);
    }
    for (; x < width; ++x) pooled_error(top, bottom, x, prediction, below, above, row + x);
  }
}
#endif

}  // namespace

void lstm_update(const std::int32_t* gates, std::int64_t gate_stride, std::int64_t count, std::int32_t* c,
                 std::int16_t* r, Kernel kernel) {
#ifdef TEZIP_EXACT_X86
  if (resolve(kernel) == Kernel::avx512vnni) return lstm_update_avx512(gates, gate_stride, count, c, r);
#endif
  lstm_update_portable(gates, gate_stride, count, c, r);
}

void frame_errors(const std::int32_t* frame, const std::int32_t* forecast, std::int64_t count, std::span<const std::int32_t> q15,
                  std::span<const std::int32_t> q24, std::int16_t* below, std::int16_t* above, std::int32_t* last,
                  Kernel kernel) {
  if (q15.empty() || q24.size() != q15.size()) throw std::invalid_argument("frame_errors: tables of different sizes");
#ifdef TEZIP_EXACT_X86
  if (resolve(kernel) != Kernel::portable) return frame_errors_avx2(frame, forecast, count, q15, q24, below, above, last);
#endif
  (void)kernel;
  frame_errors_portable(frame, forecast, count, q15, q24, below, above, last);
}

void pooled_errors(const std::int32_t* pre, const std::int32_t* prediction, std::int64_t height, std::int64_t width,
                   std::int16_t* below, std::int16_t* above, Kernel kernel) {
#ifdef TEZIP_EXACT_X86
  if (resolve(kernel) != Kernel::portable) return pooled_errors_avx2(pre, prediction, height, width, below, above);
#endif
  (void)kernel;
  pooled_errors_portable(pre, prediction, height, width, below, above);
}

}  // namespace tezip::exact

namespace tezip {
namespace {

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

// One GOP's state: per layer l (frames of height >> l by width >> l), the ConvLSTM output R_l
// (int16 Q15), its cell c_l (int32 Q15) and the error units E_l (int16, the layer's formats),
// each [samples][channels][h][w]; and the last frame forecast, Ahat_0 in Q24.
struct ExactState final : PredNetEngineState {
  struct Layer {
    int height = 0, width = 0;
    std::vector<std::int16_t> r, e;
    std::vector<std::int32_t> c;
  };
  int samples = 0;
  std::vector<Layer> layers;
  std::vector<std::int32_t> forecast;
  // Residual forecasts: the last frame seen in Q24 (0 before the first), finer than A_0's Q15 so
  // that a zero correction gives back its pixels exactly at 16 bits too.
  std::vector<std::int32_t> last;
  // predict's and correct's scratch, kept from frame to frame and only ever grown: a fresh
  // allocation a frame went back to the kernel and came back zero-filled (6% of decoding mire2).
  std::vector<std::int16_t> input;
  std::vector<std::int32_t> gates, pre, prediction;
};

// v's storage for at least n values (their contents left as they are).
template <class T>
T* scratch(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

class ExactEngine final : public PredNetEngine {
 public:
  ExactEngine(const PredNetOptions& options, const std::vector<WeightTensor>& weights, exact::Kernel kernel)
      : options_(options), kernel_(exact::resolve(kernel)) {
    options_.validate();
    check_weights(weights, options_, "exact PredNet");
    auto quantize = [&](const std::string& name, std::span<const int> in_frac, std::span<const int> out_frac) {
      const WeightTensor* w = find(weights, name + ".weight");
      const WeightTensor* b = find(weights, name + ".bias");
      return exact::quantize_conv(w->values, b->values, int(w->shape[0]), int(w->shape[1]), int(w->shape[2]), in_frac,
                                  out_frac);
    };
    const int layers = options_.layers();
    layers_.resize(layers);
    // Formats bottom-up: layer l's errors are an input of a[l + 1].
    for (int l = 0; l < layers; ++l) {
      Layer& layer = layers_[l];
      const int channels = options_.a_channels[l], r = options_.r(l);
      const std::string index = std::to_string(l);
      std::vector<int> frac(channels, 15);
      if (l > 0) {
        const std::vector<int>& below = layers_[l - 1].e_frac;
        layer.a = quantize("a" + index, below, std::vector<int>(channels, 0));
        layer.ahat = quantize("ahat" + index, std::vector<int>(r, 15), std::vector<int>(channels, 0));
        for (int j = 0; j < channels; ++j)
          frac[j] = std::min(frac_for_bound(layer.a.bound[j], layer.a.scale[j]),
                             frac_for_bound(layer.ahat.bound[j], layer.ahat.scale[j]));
        set_output_frac(layer.a, frac);
        set_output_frac(layer.ahat, frac);
      } else {
        layer.ahat = quantize("ahat0", std::vector<int>(r, 15), std::vector<int>(channels, kForecastFrac));
      }
      layer.e_frac = frac;
      layer.e_frac.insert(layer.e_frac.end(), frac.begin(), frac.end());
    }
    for (int l = 0; l < layers; ++l) {
      std::vector<int> in = layers_[l].e_frac;
      in.insert(in.end(), options_.r(l) + (l + 1 < layers ? options_.r(l + 1) : 0), 15);
      layers_[l].lstm = quantize("lstm" + std::to_string(l), in, std::vector<int>(4 * options_.r(l), 15));
    }
  }

  std::string arithmetic() const override { return "exact"; }
  std::string arithmetic_description() const override { return "exact"; }
  const PredNetOptions& options() const override { return options_; }

  std::unique_ptr<PredNetEngineState> initial_state(int samples, int height, int width) const override {
    check_size(height, width);
    if (samples < 1) throw std::invalid_argument("exact PredNet: a state needs at least one sample");
    auto s = std::make_unique<ExactState>();
    s->samples = samples;
    for (int l = 0; l < options_.layers(); ++l) {
      ExactState::Layer layer;
      layer.height = height >> l;
      layer.width = width >> l;
      const std::size_t hw = std::size_t(layer.height) * layer.width;
      layer.r.assign(std::size_t(samples) * options_.r(l) * hw, 0);
      layer.c.assign(std::size_t(samples) * options_.r(l) * hw, 0);
      layer.e.assign(std::size_t(samples) * 2 * options_.a_channels[l] * hw, 0);
      s->layers.push_back(std::move(layer));
    }
    s->forecast.assign(frame_size(*s), 0);
    if (options_.residual) s->last.assign(frame_size(*s), 0);
    return s;
  }

  void predict(std::span<PredNetEngineState* const> states, std::uint32_t max_value,
               std::span<const std::span<std::int32_t>> forecasts) const override {
    check_max(max_value);
    if (forecasts.size() != states.size()) throw std::invalid_argument("exact PredNet: one forecast per state");
    for (std::size_t i = 0; i < states.size(); ++i) {
      ExactState& s = state_of(states[i]);
      if (forecasts[i].size() != frame_size(s)) throw std::invalid_argument("exact PredNet: the forecast's size does not fit the state");
      predict(s, max_value, forecasts[i]);
    }
  }

  void correct(std::span<PredNetEngineState* const> states, std::span<const std::span<const std::int32_t>> frames,
               std::uint32_t max_value) const override {
    check_max(max_value);
    if (frames.size() != states.size()) throw std::invalid_argument("exact PredNet: one frame per state");
    for (std::size_t i = 0; i < states.size(); ++i) {
      ExactState& s = state_of(states[i]);
      if (frames[i].size() != frame_size(s)) throw std::invalid_argument("exact PredNet: the frame's shape does not fit the state");
      correct(s, frames[i], max_value);
    }
  }

 private:
  struct Layer {
    QuantConv lstm, ahat, a;
    std::vector<int> e_frac;  // fractional bits of each error channel (2 * a_channels)
  };

  // R_l from [E_l, R_l, up(R_{l+1})], top-down; then the forecast min(relu(ahat0(R_0)), 1) in
  // Q24 and its pixels round_half_up(q * max / 2^24).
  void predict(ExactState& s, std::uint32_t max_value, std::span<std::int32_t> pixels) const {
    const int layers = options_.layers();
    const std::int64_t batch = s.samples;
    for (int l = layers - 1; l >= 0; --l) {
      ExactState::Layer& state = s.layers[l];
      const std::int64_t h = state.height, w = state.width, hw = h * w;
      const std::int64_t ce = 2 * options_.a_channels[l], cr = options_.r(l), cu = l + 1 < layers ? options_.r(l + 1) : 0;
      const std::int64_t cin = ce + cr + cu;
      std::int16_t* const input = scratch(s.input, std::size_t(batch * cin * hw));
      const std::int16_t* up = cu > 0 ? s.layers[l + 1].r.data() : nullptr;
      for (std::int64_t plane = 0; plane < batch * cin; ++plane) {
        const std::int64_t b = plane / cin, ch = plane % cin;
        std::int16_t* dst = input + plane * hw;
        if (ch < ce) {
          std::memcpy(dst, state.e.data() + (b * ce + ch) * hw, sizeof(std::int16_t) * hw);
        } else if (ch < ce + cr) {
          std::memcpy(dst, state.r.data() + (b * cr + ch - ce) * hw, sizeof(std::int16_t) * hw);
        } else {  // nearest-neighbour 2x upsampling of R_{l+1}
          const std::int16_t* src = up + (b * cu + ch - ce - cr) * (hw / 4);
          for (std::int64_t y = 0; y < h; y += 2, src += w / 2, dst += 2 * w) {
            for (std::int64_t x = 0; x < w / 2; ++x) dst[2 * x] = dst[2 * x + 1] = src[x];
            std::memcpy(dst + w, dst, sizeof(std::int16_t) * w);  // h and w are even (padding_multiple)
          }
        }
      }
      std::int32_t* const gates = scratch(s.gates, std::size_t(batch * 4 * cr * hw));
      exact::conv2d(input, int(batch), int(h), int(w), layers_[l].lstm, gates, kernel_);
      // A sample's gates are [4][cr * hw] (i, f, o, g); R_l and c_l are updated in place (R_l's
      // old values were copied into the input above).
      const std::int64_t cells = cr * hw;
      for (std::int64_t b = 0; b < batch; ++b)
        exact::lstm_update(gates + b * 4 * cells, cells, cells, state.c.data() + b * cells, state.r.data() + b * cells,
                           kernel_);
    }
    const ExactState::Layer& bottom = s.layers[0];
    exact::conv2d(bottom.r.data(), int(batch), bottom.height, bottom.width, layers_[0].ahat, s.forecast.data(), kernel_);
    // Residual: ahat0's output (Q24) corrects the last frame (Q24), and the sum
    // is clamped to [0, 1] as the float network's clamp(A + ahat0(R_0), 0, 1).
    if (options_.residual)
      for (std::size_t n = 0; n < s.forecast.size(); ++n)
        s.forecast[n] = std::int32_t(std::clamp<std::int64_t>(std::int64_t(s.forecast[n]) + s.last[n], 0, 1 << kForecastFrac));
    for (std::size_t n = 0; n < s.forecast.size(); ++n) {
      s.forecast[n] = std::clamp(s.forecast[n], 0, 1 << kForecastFrac);
      pixels[n] = std::int32_t((std::int64_t(s.forecast[n]) * max_value + (1 << (kForecastFrac - 1))) >> kForecastFrac);
    }
  }

  // Each pixel value p of 0..max in Q15, round_half_up(p * 2^15 / max), and in Q24 (the forecast's
  // fraction), round_half_up(p * 2^24 / max) (back to pixels, floor((q max + 2^23) / 2^24) = p): a
  // table per max instead of two 64-bit divisions a pixel (12% of PredNet decoding on mire2).
  struct PixelScale {
    std::uint32_t max = 0;
    std::vector<std::int32_t> q15, q24;
  };
  static const PixelScale& pixel_scale(std::uint32_t max_value) {
    thread_local PixelScale table;
    if (table.max != max_value) {
      const std::int64_t max = max_value;
      table.q15.resize(std::size_t(max) + 1);
      table.q24.resize(std::size_t(max) + 1);
      for (std::int64_t p = 0; p <= max; ++p) {
        table.q15[std::size_t(p)] = std::int32_t(((p << 16) + max) / (2 * max));
        table.q24[std::size_t(p)] = std::int32_t(((p << (kForecastFrac + 1)) + max) / (2 * max));
      }
      table.max = max_value;
    }
    return table;
  }

  // E_0 from the frame and the forecast, then E_l = [relu(Ahat_l - A_l), relu(A_l - Ahat_l)] with
  // A_l = maxpool2(relu(a_l(E_{l-1}))) and Ahat_l = relu(ahat_l(R_l)), bottom-up.
  void correct(ExactState& s, std::span<const std::int32_t> frame, std::uint32_t max_value) const {
    const std::int64_t batch = s.samples, channels = options_.a_channels[0];
    const std::int64_t hw = std::int64_t(s.layers[0].height) * s.layers[0].width;
    // Layer 0: the frame and the forecast in Q15 (1.0 = 32768), errors saturated to 32767; the
    // frame in Q24 for residual forecasts.
    {
      const PixelScale& scale = pixel_scale(max_value);
      for (std::int64_t plane = 0; plane < batch * channels; ++plane) {
        const std::int64_t b = plane / channels, ch = plane % channels;
        std::int16_t* below = s.layers[0].e.data() + (b * 2 * channels + ch) * hw;  // relu(prediction - target)
        exact::frame_errors(frame.data() + plane * hw, s.forecast.data() + plane * hw, hw, scale.q15, scale.q24, below,
                            below + channels * hw, options_.residual ? s.last.data() + plane * hw : nullptr, kernel_);
      }
    }
    for (int l = 1; l < options_.layers(); ++l) {
      const Layer& layer = layers_[l];
      const ExactState::Layer& lower = s.layers[l - 1];
      ExactState::Layer& state = s.layers[l];
      const std::int64_t ch = options_.a_channels[l], h = state.height, w = state.width;
      std::int32_t* const pre = scratch(s.pre, std::size_t(batch * ch * 4 * h * w));
      std::int32_t* const prediction = scratch(s.prediction, std::size_t(batch * ch * h * w));
      exact::conv2d(lower.e.data(), int(batch), lower.height, lower.width, layer.a, pre, kernel_);
      exact::conv2d(state.r.data(), int(batch), int(h), int(w), layer.ahat, prediction, kernel_);
      for (std::int64_t plane = 0; plane < batch * ch; ++plane) {
        const std::int64_t b = plane / ch, j = plane % ch;
        std::int16_t* below = state.e.data() + (b * 2 * ch + j) * h * w;
        exact::pooled_errors(pre + plane * 4 * h * w, prediction + plane * h * w, h, w, below, below + ch * h * w, kernel_);
      }
    }
  }

  static const WeightTensor* find(const std::vector<WeightTensor>& weights, const std::string& name) {
    for (const auto& w : weights)
      if (w.name == name) return &w;
    throw ModelError("exact PredNet: no tensor '" + name + "'");  // check_weights ran: cannot happen
  }
  std::size_t frame_size(const ExactState& s) const {
    return std::size_t(s.samples) * options_.a_channels[0] * s.layers[0].height * s.layers[0].width;
  }
  void check_size(int height, int width) const {
    const int m = options_.padding_multiple();
    if (height <= 0 || width <= 0 || height % m != 0 || width % m != 0)
      throw std::invalid_argument("exact PredNet: frame size " + std::to_string(height) + "x" + std::to_string(width) +
                                  " is not a multiple of " + std::to_string(m));
  }
  static void check_max(std::uint32_t max_value) {
    if (max_value < 1 || max_value > 65535) throw std::invalid_argument("exact PredNet: max_value must be 1..65535");
  }
  ExactState& state_of(PredNetEngineState* state) const {
    auto* s = dynamic_cast<ExactState*>(state);
    if (s == nullptr || s->layers.size() != std::size_t(options_.layers()))
      throw std::invalid_argument("exact PredNet: the state was not made by this engine");
    return *s;
  }

  PredNetOptions options_;
  exact::Kernel kernel_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<PredNetEngine> make_exact_engine(const PredNetOptions& options, const std::vector<WeightTensor>& weights,
                                                 exact::Kernel kernel) {
  return std::make_unique<ExactEngine>(options, weights, kernel);
}

}  // namespace tezip
