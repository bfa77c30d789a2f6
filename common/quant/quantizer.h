// Quantizer: fits the operators of DESIGN.md section 3 to one unit (a column chunk W [m, c]
// of a linear weight) and returns the fitted parameters (unit_fit.h) and the error proxy;
// the dequantized weights and the integer codes of a fit are recomputed from the weights
// on demand (DequantizeUnit, UnitCodes), exactly the values the fit scored. The work is
// done by the row kernels of fit_kernels.h; this file checks inputs and adapts tensors.
//
// Objective of every operator (per row i, over the non-salient entries only):
//     minimise  sum_j s_j^2 (W_ij - What_ij)^2          s_j = mean |x_j| of input channel j
// Rows whose non-salient weight sum_j s_j^2 is zero (all-zero activations) fall back to
// unweighted least squares so their parameters stay meaningful.
//
// Stored parameters are FP16 (that is what UnitEffectiveBits counts): fitted scales and
// offsets are rounded to FP16 before the codes and What are produced, so What is exactly
// what an exporter reproduces from codes + FP16 scales.
//
// Stateless free functions; thread-safe; single-threaded (the caller parallelises).
#ifndef WINDQUANT_COMMON_QUANT_QUANTIZER_H_
#define WINDQUANT_COMMON_QUANT_QUANTIZER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/plan/action.h"
#include "common/plan/effective_bits.h"
#include "common/quant/unit_fit.h"

namespace windquant::quant {

// The top-k entries (k = SalientCount(m*c, fraction)) by |W_ij| * s_j, as a bool mask.
// Ties are broken towards the lower flat (row-major) index.
// Errors: INVALID_ARGUMENT for W not 2-D float32, s not [c] float32, non-finite values.
absl::StatusOr<at::Tensor> SalientMask(const at::Tensor& weight, const at::Tensor& act_scale,
                                       double fraction);

// Fits `actions` (duplicates allowed, any order) on one unit.
// weight [m, c] float32, act_scale [c] float32 (>= 0), both finite.
//
// Guaranteed orderings of the error proxy (the fit of a higher-precision action is
// seeded with the scale that reproduces the lower one's levels on its finer grid, and
// keeps the better of seed and own search, per row):
//     err(8) <= err(4) <= err(3) <= err(2)     and     err(3) <= err(1.58)
// (SEQ levels alpha*{+-.5,+-1.5} lie on the 3-bit grid of step alpha/2; ternary alpha*{-1,0,1}
// on the 3-bit grid of step alpha; b-bit of step s on the (b+1)-bit grid of step s/2.)
// To make results independent of which actions were requested, fitting any of 3/4/8 also
// fits the actions below it in that chain internally. 1 bit and 16 bit have no ordering
// guarantee. Holds up to float rounding and while the halved FP16 scales stay normal.
// The clip and threshold searches keep an earlier grid point unless a later one is better
// by options.switch_margin (relative), so last-bit changes of the inputs do not move them.
// Errors: INVALID_ARGUMENT for bad shapes/dtypes/values (message names the argument).
absl::StatusOr<UnitFit> FitUnit(const at::Tensor& weight, const at::Tensor& act_scale,
                                absl::Span<const plan::Action> actions,
                                const QuantizerOptions& options = {});

// The dequantized unit [m, c] float32 of action `a` of `fit` (which must hold it), computed
// from `weight` (the weights the fit was made on). INVALID_ARGUMENT for a shape that is
// not the fit's or an action the fit lacks.
absl::StatusOr<at::Tensor> DequantizeUnit(const at::Tensor& weight, const UnitFit& fit,
                                          plan::Action a);
// The integer codes [m, c] int8 of action `a` (not 16), as documented in unit_fit.h.
absl::StatusOr<at::Tensor> UnitCodes(const at::Tensor& weight, const UnitFit& fit, plan::Action a);

// Activation-weighted relative error: sum s_j^2 (W - What)^2 / sum s_j^2 W^2 over the
// unit (0 when the denominator is 0), in double. Shapes as in FitUnit.
double RelativeError(const at::Tensor& weight, const at::Tensor& dequant,
                     const at::Tensor& act_scale);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_QUANTIZER_H_
