// Error compensation when a plan is applied (DESIGN.md section 8, GPTQ: Frantar et al.
// 2022): each linear W [out, in] is quantized column by column, in input-column order,
// each column with the action of the unit (column chunk) it belongs to, and the rounding
// error of a quantized column is carried into the columns not yet quantized through the
// Hessian H = 2/N X^T X of the linear's calibration inputs:
//   e_r = (W_rj - Q(W_rj)) / U_jj,   W_rk -= e_r * U_jk   for every k > j,
// with U the upper Cholesky factor of (H + damp I)^-1 (damp = damp_fraction * mean diag H).
// Units chunk over input columns, so a unit's error flows into its own later columns and
// into the later units of the same linear; rows never mix.
//
// What stays as the unit table fitted it: every unit's per-row FP16 scales (and 1-bit
// offsets) and its INT8 salient entries (their values are fixed; the error between the
// compensated weight and that value is carried on like any other). Only the codes change:
// they are the codes of the compensated weights, so the packed export stores codes +
// the same scales + the same salient set, nothing new, and the effective bits are those
// of the plan without compensation.
//
// GptqFactors holds U per decoder layer per input kind (q/k/v share one input, gate/up
// share one, o and down have their own): plan-independent, computed once per stage from
// the calibration Hessians (hessians.h) and kept in float32 for the object's life:
// 4 * (3 * hidden^2 + inter^2) bytes per layer (when the attention width equals hidden),
// e.g. 0.32 GB per layer at LLaMA-3.2-1B, 1.0 GB at 8B. Immutable; thread-safe.
#ifndef WINDQUANT_COMMON_QUANT_GPTQ_H_
#define WINDQUANT_COMMON_QUANT_GPTQ_H_

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/llama_weights.h"
#include "common/quant/action.h"
#include "common/quant/unit_fit.h"

namespace windquant::quant {

// The inputs of a decoder layer's linears: q/k/v read one, gate/up another.
enum class InputKind : int { kQkv = 0, kO, kGateUp, kDown };
inline constexpr int kNumInputKinds = 4;
InputKind InputKindOf(model::Matrix m);

// Per layer of a stage, per input kind: H = 2/N sum_t x_t x_t^T, float32 [in, in].
struct StageHessians {
  int64_t first_layer = 0;
  std::vector<std::array<at::Tensor, kNumInputKinds>> layers;
  int64_t tokens = 0;
};

struct GptqOptions {
  double damp_fraction = 0.01;  // of the mean diagonal of H, added to the diagonal
  int64_t block_columns = 128;  // lazy-update block (changes speed only, not the values)
  int64_t row_group = 16;       // rows processed together (speed only)
};

// One unit of a linear as the compensation quantizes it: columns [col_begin, col_begin +
// cols), its action, its per-row scales / offsets (FP16 values as float; [rows]) and its
// salient set (flat indices within the unit, row-major over its `cols` columns).
struct ColumnUnit {
  int64_t col_begin = 0;
  int64_t cols = 0;
  Action action = Action::k16;
  const float* scales = nullptr;
  const float* offsets = nullptr;
  const SalientSet* salient = nullptr;
};

// The dequantized value of one entry x under action a with the row's scale / offset,
// bit for bit what DequantizeKernel writes for a non-salient entry (tested).
float QuantizeEntry(Action a, float x, float scale, float offset);

// Quantizes, in place, the linear w ([rows, in] float32 contiguous) with error
// compensation: `units` cover [0, in) in column order; `u` is the [in, in] factor.
// When `quantized_from` is not null ([rows, in] float32 contiguous) it receives the
// compensated weights each entry was quantized from: the exporter's codes are the codes
// of these (DequantizeKernel of them == the result, bit for bit). Parallel over row
// groups; the values do not depend on the threads, the block or the group size: every
// entry gets the same sequence of float32 operations as the one-column-at-a-time
// definition above (no reductions; built without FMA contraction).
void CompensateLinear(const std::vector<ColumnUnit>& units, const at::Tensor& u, at::Tensor* w,
                      at::Tensor* quantized_from, const GptqOptions& options = {});

class GptqFactors {
 public:
  // Factors U of every (layer, kind) of `hessians`. INVALID_ARGUMENT naming the layer
  // and input kind when a Hessian is missing, not square, not finite, or not positive
  // definite after dampening.
  static absl::StatusOr<GptqFactors> Create(const StageHessians& hessians,
                                            const GptqOptions& options = {});

  int64_t first_layer() const { return first_layer_; }
  int64_t end_layer() const { return first_layer_ + static_cast<int64_t>(factors_.size()); }
  // [in, in] float32, upper triangular; layer in [first_layer, end_layer).
  const at::Tensor& Factor(int64_t layer, model::Matrix m) const {
    return factors_[layer - first_layer_][static_cast<int>(InputKindOf(m))];
  }
  const GptqOptions& options() const { return options_; }
  int64_t Bytes() const;  // what the header promises

 private:
  int64_t first_layer_ = 0;
  std::vector<std::array<at::Tensor, kNumInputKinds>> factors_;
  GptqOptions options_;
};

// U = upper Cholesky factor of (h + damp_fraction * mean(diag h) * I)^-1, computed in
// float64 and returned as float32. INVALID_ARGUMENT (naming `what`) as Create.
absl::StatusOr<at::Tensor> InverseHessianFactor(const at::Tensor& h, double damp_fraction,
                                                const std::string& what);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_GPTQ_H_
