// CompensateLinearTorch: the error compensation of gptq.h (CompensateLinear) with torch
// ops on the weights' device, so that a stage on a GPU compensates there (issue 35
// item 4) instead of copying each layer to the host and back.
//
// The same definition, laid out for a device: the linear is transposed once (each input
// column a contiguous row of `rows` values), each column is quantized with the unit's
// action, scales, offsets and salient values as QuantizeEntry does (vector ops over the
// rows; no reductions), its error is carried into the block's later columns by a
// rank-one update (a rounded product, then a rounded difference, as the CPU kernels), and
// each block's errors go into the columns after it in one GEMM (addmm) instead of the
// CPU's register-blocked term-by-term kernel. The factor stays packed on the device; each
// block's rows are unpacked into a [block, in - block start] buffer.
//   * With block_columns >= in (one block, no GEMM) every entry gets the very operations
//     of the definition: bit-identical to CompensateLinear (gptq_torch_test).
//   * With smaller blocks the GEMM sums each entry's terms in its own order, so values
//     differ in the last bits and a rounding may flip; the layer's output error is the
//     same within the tolerance gptq_torch_test states.
// No host sync: every scalar (the diagonal of U, scales) stays a device tensor.
// Memory on the device: the packed factor (2 * in * (in + 1) bytes), the transposed
// weights and (when asked) their quantized-from copy (4 bytes per weight each), one
// block of the factor (4 * block * in bytes) and one of errors (4 * block * rows), and the
// salient map (5 bytes per weight of the linear).
//
// InverseHessianFactorTorch: the factor U of gptq.h (InverseHessianFactor) made with
// torch ops on the Hessian's device, so that a stage on a GPU factors its Hessians where
// HessianCollector summed them and keeps the packed factors there for
// CompensateLinearTorch (no copy to the host and back). The same steps as the CPU path
// (gptq.cc FactorOf), in float64 on the device:
//   1. H's zero diagonal entries (dead inputs) set to 1, then damp = damp_fraction *
//      mean(diag H) added to the diagonal;
//   2. L = Cholesky(H) from H's lower triangle (the triangle the CPU path factors);
//   3. (H + damp I)^-1 = L^-T L^-1: L^-1 by a triangular solve against I, then one GEMM
//      (ATen's cholesky_inverse, the CPU's step, reads its LAPACK status on the host);
//   4. U = the upper Cholesky factor of that inverse;
//   5. packed (PackedUpper's rows, rounded to float32 as the CPU's Pack does), the
//      packed positions' rows and columns computed on the device.
// No retries: a Hessian that is not finite, or not positive definite after damping, is an
// error, as on the CPU. No host sync: the outcome stays a device tensor (`failure`), which
// the caller brings to the host once for many factors (CheckTorchFactors). The values
// differ from the CPU path's in the last bits (other reduction orders: gptq_torch_test
// states the tolerance), so the CPU keeps its path; this one runs where the Hessians are
// not on the CPU, or with GptqOptions::torch_ops (the tests).
// Memory on the device: two float64 [in, in] buffers (H itself when the caller hands over
// its only reference, else a copy; and L^-1), 16 bytes * in^2, then H and the packed
// float32 factor (2 * in * (in + 1) bytes) until H is released; at in = 8192 / 14336 /
// 28672 (LLaMA-3.2-1B / 8B / 70B down_proj) 1.07 / 3.29 / 13.2 GB at the peak.
// GptqFactors (gptq.h) makes a stage's factors this way when its Hessians are off the CPU
// (FromInputs on a model on a device) and keeps them in the device's memory, where
// CompensateLinearTorch reads them: GptqOptions::spill_dir does not apply to them (a
// scratch file would be the round trip through the host this avoids). That is gptq.h's
// 0.16 / 0.51 / 2.05 GB per layer at 1B / 8B / 70B on the device, for the stage's life.
// The one transfer left: Create checks its factors' outcomes in one copy (FromInputs:
// once per layer, 8 bytes per input kind), so that a bad Hessian is still an error.
#ifndef WINDQUANT_COMMON_QUANT_GPTQ_TORCH_H_
#define WINDQUANT_COMMON_QUANT_GPTQ_TORCH_H_

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/quant/gptq.h"

namespace windquant::quant {

// As CompensateLinear: `w` ([rows, in] float32) is quantized in place, on its device;
// `quantized_from` (null, or [rows, in] float32 on the same device) receives the
// compensated weights each entry was quantized from. Uses options.block_columns
// (row_group and trailing are the CPU kernels' and are not read).
void CompensateLinearTorch(const std::vector<ColumnUnit>& units, const PackedUpper& u,
                           at::Tensor* w, at::Tensor* quantized_from,
                           const GptqOptions& options = {});

// What a device factorisation leaves in TorchFactor::failure (the first that applies).
enum class FactorFailure : int64_t {
  kNone = 0,
  kNotFinite = 1,                   // H has a NaN or an infinity
  kNotPositiveDefinite = 2,         // the damped H
  kInverseNotPositiveDefinite = 3,  // its inverse, as computed
};

struct TorchFactor {
  PackedUpper u;       // float32 packed rows, on the Hessian's device (not readable by
                       // RowBase / Dense / CompensateLinear unless that is the CPU)
  at::Tensor failure;  // int64 scalar on that device: a FactorFailure
};

// U of (h + damp_fraction * mean(diag h) * I)^-1 for h ([in, in], float32 or float64, on
// any device), as above. Takes h: pass the only reference to a contiguous float64 h and
// the factorisation runs in its memory. INVALID_ARGUMENT (naming `what`) when h is
// missing or not square (known without looking at its values); INTERNAL for a torch
// error. A failure of the values is only known after CheckTorchFactors.
absl::StatusOr<TorchFactor> InverseHessianFactorTorch(at::Tensor h, double damp_fraction,
                                                      const std::string& what);

// The failures of factors made by InverseHessianFactorTorch (one per entry of `what`),
// brought to the host in one copy: OK, or INVALID_ARGUMENT naming the first failed
// `what` with the CPU path's message (gptq.h GptqFactors::Create). INTERNAL for a torch
// error.
absl::Status CheckTorchFactors(const std::vector<at::Tensor>& failures,
                               const std::vector<std::string>& what);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_GPTQ_TORCH_H_
