// Effective bits of a unit under an action: the storage cost model of DESIGN.md
// section 3. Every number windquant prints as "bits" comes from UnitEffectiveBits.
// Pure functions, thread-safe.
#ifndef WINDQUANT_COMMON_PLAN_EFFECTIVE_BITS_H_
#define WINDQUANT_COMMON_PLAN_EFFECTIVE_BITS_H_

#include <cstdint>
#include <string>

#include "common/plan/action.h"

namespace windquant::plan {

// Bits of one stored FP16 parameter (a per-row scale/offset, or the per-unit salient scale).
inline constexpr int kScaleBits = 16;
// Bits of one salient value (INT8, symmetric, per-unit scale).
inline constexpr int kSalientValueBits = 8;
inline constexpr double kDefaultSalientFraction = 0.005;

// Number of salient entries k of a unit with n entries: k = round(fraction * n), rounding
// half up (std::llround), clamped to [0, n]. Round (not ceil) so that fraction * n values
// like 10.000000000000002 do not gain an entry, and a tiny unit (n * fraction < 0.5)
// protects nothing. fraction must be in [0, 1] (clamped otherwise).
int64_t SalientCount(int64_t n, double salient_fraction);

// Bits to address one entry of a unit with n entries: ceil(log2(n)) (0 for n <= 1).
int IndexBits(int64_t n);

// FP16 parameters stored per row by the action's operator:
//   1    (binarization, BiT)  2: alpha and beta
//   1.58 (ternary)            1: alpha
//   2    (SEQ)                1: alpha (levels alpha*{-1.5,-0.5,0.5,1.5}, no offset)
//   3/4/8 (uniform symmetric) 1: s (no zero point)
//   16                        0
int ScaleParamsPerRow(Action a);

// THE effective-bit formula (DESIGN.md section 3). For a unit of `rows` x `cols`
// (n = rows*cols entries) with k = `salient_count` salient entries under action a:
//
//   a != 16:  bits = (n - k) * b_a                  codes of the non-salient entries
//                  + k * (8 + IndexBits(n))         INT8 value + position of each salient
//                  + rows * 16 * ScaleParamsPerRow(a)   per-row FP16 scales/offsets
//                  + (k > 0 ? 16 : 0)               the per-unit FP16 INT8 scale
//   a == 16:  bits = n * 16                         FP16, nothing protected (k ignored)
//
// b_a = BitsOf(a); b_1.58 = log2(3) (packed 5 trits/byte would be 1.6).
// A plan's effective bits = sum of bits / sum of n over its units.
// Requires rows, cols >= 0 and 0 <= salient_count <= n (programmer error otherwise: the
// salient count is clamped).
double UnitEffectiveBits(int64_t rows, int64_t cols, int64_t salient_count, Action a);

// UnitEffectiveBits / n (0 for an empty unit).
double UnitBitsPerWeight(int64_t rows, int64_t cols, int64_t salient_count, Action a);

// Bits of one fixed parameter (embeddings, RMSNorm weights, lm_head: not quantized) as
// the quantized checkpoint stores it, which is the model's own dtype (config.json
// torch_dtype): 32 for "float32", 16 for "bfloat16", "float16" or none. Counting what is
// written (not a nominal FP16) keeps the exported model bit-identical to the evaluated
// one and makes whole-model bits equal the bytes of the file (exporter.h).
int FixedParamBits(const std::string& torch_dtype);

// Whole-model bits per parameter: the quantized linears' bits (sum of UnitEffectiveBits
// over `unit_weights` entries) plus `fixed_params` stored at `fixed_param_bits` each,
// over all parameters: (unit_bits + fixed_params * fixed_param_bits) /
// (unit_weights + fixed_params); 0 for an empty model.
double WholeModelBits(double unit_bits, int64_t unit_weights, int64_t fixed_params,
                      int fixed_param_bits);

}  // namespace windquant::plan

#endif  // WINDQUANT_COMMON_PLAN_EFFECTIVE_BITS_H_
