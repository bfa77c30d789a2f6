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
#ifndef WINDQUANT_COMMON_QUANT_GPTQ_TORCH_H_
#define WINDQUANT_COMMON_QUANT_GPTQ_TORCH_H_

#include <ATen/ATen.h>

#include <vector>

#include "common/quant/gptq.h"

namespace windquant::quant {

// As CompensateLinear: `w` ([rows, in] float32) is quantized in place, on its device;
// `quantized_from` (null, or [rows, in] float32 on the same device) receives the
// compensated weights each entry was quantized from. Uses options.block_columns
// (row_group and trailing are the CPU kernels' and are not read).
void CompensateLinearTorch(const std::vector<ColumnUnit>& units, const PackedUpper& u,
                           at::Tensor* w, at::Tensor* quantized_from,
                           const GptqOptions& options = {});

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_GPTQ_TORCH_H_
