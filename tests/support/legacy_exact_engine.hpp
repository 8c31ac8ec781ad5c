#pragma once
// The exact PredNet engine as it was in the learned module, on libtorch tensors (tezip 7e1b983,
// predictor/learned/prednet_exact.{hpp,cpp}), kept unchanged but for its namespace as the oracle
// that the core's torch-free engine (predictor/prednet_exact.hpp) must equal byte for byte
// (tests/test_prednet_exact.cpp). Torch tests only; not part of any library.
#include <torch/torch.h>

#include "predictor/learned/prednet.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace tezip::legacy_exact {

// A 'same'-padded, stride-1 convolution quantized for int16 inputs. Input channel k holds
// real / 2^input_frac[k]; accumulator row o holds real * 2^scale[o]; output o holds
// real * 2^output_frac[o], that is round_half_up((acc + bias[o]) / 2^shift[o]) with
// shift = scale - output_frac.
struct QuantConv {
  int out_channels = 0, in_channels = 0, kernel = 0;
  int pairs = 0;                      // ceil(in_channels * kernel^2 / 2)
  std::vector<std::int32_t> weights;  // [out][pairs]: int16 taps 2p (low half) and 2p+1 (high half)
  std::vector<std::int64_t> bias;     // [out], at the accumulator's scale
  std::vector<int> scale, shift;      // [out]
  // Per output channel: sum |w| * 32767 + |bias|, at the accumulator's scale (a bound on |acc + bias|).
  std::vector<std::int64_t> bound;

  std::int16_t weight(int o, int k) const;  // tap k = (c * kernel + dy) * kernel + dx
};

// |inputs| <= kMaxInput so that |sum of products| <= 2^31 - 1 (see quantize_conv).
inline constexpr std::int32_t kMaxInput = 32767;

// Chooses each output channel's scale as the largest power of two with |w| <= 32767 and
// sum |w| * kMaxInput <= 2^31 - 1, so that the int32 accumulation cannot overflow in any order.
// weight: float [out][in][k][k]; bias: float [out]. Only exact operations on the float bits.
QuantConv quantize_conv(const torch::Tensor& weight, const torch::Tensor& bias, std::span<const int> input_frac,
                        std::span<const int> output_frac);

enum class Kernel { best, portable, avx2 };
bool avx2_available();

// in: int16 [batch][in_channels][height][width] with |x| <= kMaxInput; out: int32
// [batch][out_channels][height][width], saturated to +-(2^31 - 1). Threaded with at::parallel_for.
void conv2d(const std::int16_t* in, int batch, int height, int width, const QuantConv& conv, std::int32_t* out,
            Kernel kernel = Kernel::best);
// Tensor form: in int16 [B, C, H, W] -> int32 [B, O, H, W].
torch::Tensor conv2d(const torch::Tensor& in, const QuantConv& conv, Kernel kernel = Kernel::best);

// Keras's hard sigmoid clip(0.2 z + 0.5, 0, 1): z and the result in Q15 (1.0 = 32768), rounding
// half up: clamp(floor((2 z + 5) / 10) + 16384, 0, 32768).
std::int32_t hard_sigmoid_q15(std::int32_t z);
// tanh: x in Q15, result in Q15 in [-32767, 32767]. Table of round(tanh(j / 4096) * 32768) for
// j = 0..32768 (capped at 32767), linear interpolation between entries rounding half up, odd
// symmetry, saturated for |x| >= 8.
std::int32_t tanh_q15(std::int32_t x);
const std::vector<std::int16_t>& tanh_table();

// The ConvLSTM update of `count` cells: gates int32 Q15, gate k of cell n at gates[k * gate_stride
// + n] in the order i, f, o, g (torch's chunk(4, 1)); c int32 Q15 in place, clamped to +-2^30;
// r int16 Q15 out. With i, f, o = hard_sigmoid_q15 of their gates:
//   c = floor((f c + i tanh_q15(g) + 2^14) / 2^15), r = floor((o tanh_q15(c) + 2^14) / 2^15)
void lstm_update(const std::int32_t* gates, std::int64_t gate_stride, std::int64_t count, std::int32_t* c,
                 std::int16_t* r);

// floor((v + 2^(shift-1)) / 2^shift) for shift > 0, v * 2^-shift otherwise.
inline std::int64_t round_shift(std::int64_t v, int shift) {
  return shift > 0 ? (v + (std::int64_t{1} << (shift - 1))) >> shift : v * (std::int64_t{1} << -shift);
}

}  // namespace tezip::legacy_exact

namespace tezip::legacy_exact {

// The old engine's interface (predictor/learned/engine.hpp of 7e1b983): states of torch tensors,
// batch first; frames and forecasts int32 [B, C, H, W].
class Engine {
 public:
  virtual ~Engine() = default;
  virtual PredNetState initial_state(std::int64_t batch, std::int64_t height, std::int64_t width) const = 0;
  virtual torch::Tensor predict(PredNetState& state, std::uint32_t max_value) const = 0;
  virtual void correct(PredNetState& state, const torch::Tensor& pixels, std::uint32_t max_value) const = 0;
};

std::unique_ptr<Engine> make_engine(PredNet net);

}  // namespace tezip::legacy_exact
