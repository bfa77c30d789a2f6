// Quantizer: fits the operators of DESIGN.md section 3 to one unit (a column chunk W [m, c]
// of a linear weight) and returns the fake-quantized weights, the fitted parameters and the
// error proxy. All rows are fitted at once with ATen ops (vectorised across rows).
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
// Stateless free functions; thread-safe; the caller chooses ATen's thread count.
#ifndef WINDQUANT_COMMON_QUANT_QUANTIZER_H_
#define WINDQUANT_COMMON_QUANT_QUANTIZER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/quant/action.h"
#include "common/quant/effective_bits.h"

namespace windquant::quant {

struct QuantizerOptions {
  double salient_fraction = kDefaultSalientFraction;  // k = SalientCount(n, fraction)
  // Uniform (3/4/8) and SEQ 2-bit initial clip search: scale = r * max|W_row| / top_level
  // for r on a grid of `clip_grid_points` from 1.0 down to `clip_min_ratio`.
  int clip_grid_points = 16;
  double clip_min_ratio = 0.3;
  // Ternary threshold search: Delta = r * max|W_row| for r on a grid of
  // `ternary_grid_points` from ternary_min_ratio to ternary_max_ratio.
  int ternary_grid_points = 16;
  double ternary_min_ratio = 0.02;
  double ternary_max_ratio = 0.6;
  // Alternating (assign codes / closed-form weighted LS scale) steps after the search.
  int refine_steps = 4;
  // Alternating (assign signs / closed-form weighted LS alpha,beta) steps for binarization.
  int binarize_steps = 8;
};

// Fit of one action on one unit.
struct ActionFit {
  Action action = Action::k16;
  // What [m, c] float32: the operator's values, with salient entries replaced by their
  // INT8 value (not for action 16: FP16 round trip of every entry).
  at::Tensor dequant;
  // Integer codes [m, c] int8 (undefined for action 16). Meaning per action:
  //   8/4/3: q in [-2^(b-1), 2^(b-1)-1],  What = scale * q
  //   2:     q in {-2,-1,0,1},            What = scale * (q + 0.5)   (levels +-0.5, +-1.5)
  //   1.58:  q in {-1,0,1},               What = scale * q
  //   1:     q in {-1,1},                 What = scale * q + offset
  // Codes at salient positions are the operator's nearest code and are ignored: the
  // exporter stores those entries as salient values instead.
  at::Tensor codes;
  at::Tensor scales;   // [m] float32 holding FP16 values (alpha or s); undefined for 16
  at::Tensor offsets;  // [m] float32 holding FP16 values (beta); only for action 1
  // Activation-weighted relative error over the whole unit, salient entries included
  // (after INT8): sum_ij s_j^2 (W - What)^2 / sum_ij s_j^2 W^2 (0 when the denominator is 0).
  double error = 0.0;
  double effective_bits = 0.0;  // UnitEffectiveBits(m, c, salient_count, action)
};

// Salient protection shared by every action except 16.
struct SalientSet {
  at::Tensor mask;     // [m, c] bool, exactly `count` entries true
  at::Tensor index;    // [k] int64 flat (row-major) positions, ascending
  at::Tensor codes;    // [k] int8 in [-127, 127]
  float scale = 0.0f;  // FP16 value: FP16(max |W_salient| / 127); 0 when k = 0
  int64_t count = 0;
};

struct UnitFit {
  int64_t rows = 0;
  int64_t cols = 0;
  SalientSet salient;
  std::vector<ActionFit> fits;  // in the order the actions were requested
  const ActionFit* Find(Action a) const;
};

// The top-k entries (k = SalientCount(m*c, fraction)) by |W_ij| * s_j, as a bool mask.
// Ties are broken by at::topk (unspecified but deterministic on CPU).
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
// Errors: INVALID_ARGUMENT for bad shapes/dtypes/values (message names the argument);
// INTERNAL if ATen throws.
absl::StatusOr<UnitFit> FitUnit(const at::Tensor& weight, const at::Tensor& act_scale,
                                absl::Span<const Action> actions,
                                const QuantizerOptions& options = {});

// Activation-weighted relative error: sum s_j^2 (W - What)^2 / sum s_j^2 W^2 over the
// unit (0 when the denominator is 0). Shapes as in FitUnit.
double RelativeError(const at::Tensor& weight, const at::Tensor& dequant,
                     const at::Tensor& act_scale);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_QUANTIZER_H_
