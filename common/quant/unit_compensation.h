// The unit table's error proxy when plans are applied with error compensation
// (quant.compensation: gptq, gptq.h). Without compensation a unit's error is that of
// rounding the unit on its own (ActionFit::error). With compensation the rounding error
// of a column is carried into the columns quantized after it, and how much that helps
// depends on the unit and the action (coarse grids gain most), so the rounding error
// alone ranks actions and plans less well. Here each unit's error is measured with
// compensation inside the unit: the unit's columns quantized column by column with its
// fitted scales, offsets and salient entries (CompensateLinear on the unit alone), the
// error carried among the unit's own columns through the upper Cholesky factor of
// (H_uu + damp I)^-1, H_uu the unit's diagonal block of its linear's calibration Hessian
// and damp the dampening the linear's compensation uses (damp_fraction x mean diag of
// the whole H). What the error then measures: the output error of the compensated unit
// relative to the unit's output, tr(D H_uu D^T) / tr(W H_uu W^T) with D = W - What (the
// Hessian-weighted form of ActionFit::error, whose weights are the diagonal s_j^2).
// Error carried into later units of the same linear is not modelled: a unit's error
// stays a function of that unit, so the decision process can still add units up.
//
// Only the errors change: the fits (scales, offsets, salient sets), the bits and the
// static features stay those of the uncompensated fit, so a plan's weights and bits do
// not depend on which proxy the table holds.
// Memory while it runs: the float32 copy of one linear, one unit's [c, c] block and
// factor in float64 and a few [rows, c] copies per thread. Thread-compatible.
//
// Measured and NOT used (docs/results-quant.md): on stories260k it ranked plans worse
// than the plain rounding error and led the Lagrangian baseline to worse plans under
// compensation, so no unit table is built with it; kept, tested, for the next try (e.g.
// modelling the error carried into later units, or a calibrated correction).
#ifndef WINDQUANT_COMMON_QUANT_UNIT_COMPENSATION_H_
#define WINDQUANT_COMMON_QUANT_UNIT_COMPENSATION_H_

#include <ATen/ATen.h>

#include <string>

#include "absl/status/statusor.h"
#include "common/model/llama_weights.h"
#include "common/quant/gptq.h"
#include "common/quant/stage_fits.h"
#include "common/quant/unit_fit.h"

namespace windquant::quant {

// The dampened block of the unit's columns [col_begin, col_begin + cols) of the linear's
// Hessian `h` ([in, in] float32): H_uu + damp_fraction * mean(diag h) * I in float64,
// diagonal zeros (dead inputs) first set to 1 as InverseHessianFactor does.
at::Tensor DampedUnitBlock(const at::Tensor& h, int64_t col_begin, int64_t cols,
                           double damp_fraction);

// The error above of one unit: `w` its full-precision columns [rows, cols] (float32),
// `block` its DampedUnitBlock, `unit` its action with its fitted parameters (col_begin
// ignored). INVALID_ARGUMENT naming `what` when the block is not positive definite.
absl::StatusOr<double> CompensatedUnitError(const at::Tensor& w, const at::Tensor& block,
                                            const ColumnUnit& unit, const std::string& what);

// `fits` with every unit's error of every action replaced by CompensatedUnitError, from
// the stage's full-precision `weights` and calibration `hessians` (both covering the
// fits' layers). Everything else (parameters, bits, features, fingerprint) is kept.
// INVALID_ARGUMENT naming the layer and matrix when a Hessian is missing or a block is
// not positive definite; INTERNAL for a torch error.
absl::StatusOr<StageFits> WithCompensatedUnitErrors(const StageFits& fits,
                                                    const model::LlamaWeights& weights,
                                                    const StageHessians& hessians,
                                                    double damp_fraction = 0.01);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_UNIT_COMPENSATION_H_
