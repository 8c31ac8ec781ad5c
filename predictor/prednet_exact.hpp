#pragma once
// The exact PredNet engine (docs/exact_inference.md): a trained PredNet in integer arithmetic, so
// that the encoder's forecast and the decoder's are the same bits on every machine. Torch-free,
// in the core. Every function here is pure integer arithmetic: the same inputs give the same bits
// whichever kernel (portable or AVX2) runs it.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "predictor/model_file.hpp"
#include "predictor/prednet_engine.hpp"

namespace tezip::exact {

// The convolutions' multiply-add kernel; every one gives the same sums. avx512vnni: vpdpwssd on
// 512-bit registers (AVX-512 F/VL/BW and VNNI).
enum class Kernel { best, portable, avx2, avx512vnni };

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
// weight: float [out][in][kernel][kernel], bias: float [out]. Only exact operations on the float
// bits. Throws std::invalid_argument on sizes that do not fit or weights that are not finite.
QuantConv quantize_conv(std::span<const float> weight, std::span<const float> bias, int out_channels, int in_channels,
                        int kernel, std::span<const int> input_frac, std::span<const int> output_frac);

bool avx2_available();  // the CPU has AVX2
bool vnni_available();  // the CPU has AVX2 and AVX-512 F/VL/BW/VNNI
bool kernel_available(Kernel kernel);  // this CPU runs `kernel` (best and portable: always)
const char* kernel_name(Kernel kernel);  // "best", "portable", "avx2", "avx512vnni"
std::vector<Kernel> supported_kernels();  // every kernel this CPU runs, portable first (not best)
// The kernel Kernel::best means: $TEZIP_EXACT_KERNEL (portable, avx2 or avx512vnni) when set,
// portable under ATEN_CPU_CAPABILITY=default (torch's switch to baseline kernels, so that the
// cross-ISA tests run both), else the fastest the CPU has (avx512vnni, avx2). Throws
// std::invalid_argument for a kernel the CPU lacks.
Kernel resolve(Kernel kernel);

// in: int16 [batch][in_channels][height][width] with |x| <= kMaxInput; out: int32
// [batch][out_channels][height][width], saturated to +-(2^31 - 1). Single-threaded: GOPs are the
// unit of parallel work.
void conv2d(const std::int16_t* in, int batch, int height, int width, const QuantConv& conv, std::int32_t* out,
            Kernel kernel = Kernel::best);

// Keras's hard sigmoid clip(0.2 z + 0.5, 0, 1): z and the result in Q15 (1.0 = 32768), rounding
// half up: clamp(floor((2 z + 5) / 10) + 16384, 0, 32768).
std::int32_t hard_sigmoid_q15(std::int32_t z);
// tanh: x in Q15, result in Q15 in [-32767, 32767]. Table of round(tanh(j / 4096) * 32768) for
// j = 0..32768 (capped at 32767), linear interpolation between entries rounding half up, odd
// symmetry, saturated for |x| >= 8.
std::int32_t tanh_q15(std::int32_t x);
const std::vector<std::int16_t>& tanh_table();

// The ConvLSTM update of `count` cells: gates int32 Q15, gate k of cell n at gates[k * gate_stride
// + n] in the order i, f, o, g; c int32 Q15 in place, clamped to +-2^30; r int16 Q15 out. With
// i, f, o = hard_sigmoid_q15 of their gates:
//   c = floor((f c + i tanh_q15(g) + 2^14) / 2^15), r = floor((o tanh_q15(c) + 2^14) / 2^15)
// With Kernel::avx512vnni (or best resolving to it), 16 cells at a time in AVX-512 registers; the
// same values as every other kernel.
void lstm_update(const std::int32_t* gates, std::int64_t gate_stride, std::int64_t count, std::int32_t* c,
                 std::int16_t* r, Kernel kernel = Kernel::best);

// Layer 0's errors of `count` pixels, with p = clamp(frame, 0, max) (max = q15.size() - 1), the
// target q15[p] and the forecast's Q15 value floor((clamp(forecast, 0, 2^24) + 2^8) / 2^9):
// below = clamp(forecast - target, 0, 32767), above = clamp(target - forecast, 0, 32767), and, where
// `last` is not null, last = q24[p]. With any kernel but portable, 8 pixels at a time in AVX2; the
// same values.
void frame_errors(const std::int32_t* frame, const std::int32_t* forecast, std::int64_t count, std::span<const std::int32_t> q15,
                  std::span<const std::int32_t> q24, std::int16_t* below, std::int16_t* above, std::int32_t* last,
                  Kernel kernel = Kernel::best);

// Layer l >= 1's errors of one h x w plane: target = max(0, the 2 x 2 maximum of `pre` (2h x 2w)),
// guess = max(prediction, 0) (h x w); below = clamp(guess - target, 0, 32767), above =
// clamp(target - guess, 0, 32767). With any kernel but portable, 8 outputs at a time in AVX2.
void pooled_errors(const std::int32_t* pre, const std::int32_t* prediction, std::int64_t height, std::int64_t width,
                   std::int16_t* below, std::int16_t* above, Kernel kernel = Kernel::best);

// floor((v + 2^(shift-1)) / 2^shift) for shift > 0, v * 2^-shift otherwise.
inline std::int64_t round_shift(std::int64_t v, int shift) {
  return shift > 0 ? (v + (std::int64_t{1} << (shift - 1))) >> shift : v * (std::int64_t{1} << -shift);
}

}  // namespace tezip::exact

namespace tezip {

// The exact engine of a PredNet with these options and weights (checked with check_weights).
// `kernel` other than best forces one convolution kernel for every call (tests). Throws
// ModelError on weights that do not fit, std::invalid_argument on weights it cannot quantize.
std::unique_ptr<PredNetEngine> make_exact_engine(const PredNetOptions& options, const std::vector<WeightTensor>& weights,
                                                 exact::Kernel kernel = exact::Kernel::best);

}  // namespace tezip
