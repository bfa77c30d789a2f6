// The fitted parameters of one unit (DESIGN.md section 3) in their compact form: per
// action the FP16 per-row scales (and offsets for 1 bit), plus the unit's INT8 salient
// set. The dequantized weights and the integer codes are not stored: they are a cheap,
// exact function of the unit's weights and these parameters (fit_kernels.h), so a plan's
// weights are produced when the plan is applied.
//
// Memory per unit of m rows x c columns with k salient entries: 4 bytes per row per
// stored action as floats here (2 as FP16 in StageFits) and 9 bytes per salient entry.
// No torch here: fit_kernels.cc computes with these types only.
#ifndef WINDQUANT_COMMON_QUANT_UNIT_FIT_H_
#define WINDQUANT_COMMON_QUANT_UNIT_FIT_H_

#include <cstdint>
#include <vector>

#include "common/plan/action.h"
#include "common/plan/effective_bits.h"

namespace windquant::quant {

struct QuantizerOptions {
  double salient_fraction = plan::kDefaultSalientFraction;  // k = SalientCount(n, fraction)
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
  // The searches move to a later grid point only when its error is below the best so far
  // by this relative margin: near-ties (within the float error of the calibration
  // statistics) keep the earlier point, so a last-bit difference in the inputs does not
  // send the refinement to another local optimum.
  double switch_margin = 1e-4;
  // The refined scale's nearest FP16 value and this many FP16 neighbours on each side are
  // scored and the best kept (fit_kernels.cc): the FP16 rounding of a scale that sits on a
  // rounding midpoint then does not depend on the last bit of the inputs.
  int fp16_neighbors = 1;
};

// Salient protection shared by every action except 16.
struct SalientSet {
  std::vector<int32_t> index;  // flat (row-major) positions within the unit, ascending
  std::vector<int8_t> codes;   // INT8 in [-127, 127]
  float scale = 0.0f;          // FP16 value: FP16(max |W_salient| / 127); 0 when k = 0
  int64_t count() const { return static_cast<int64_t>(index.size()); }
};

// Fit of one action on one unit.
struct ActionFit {
  plan::Action action = plan::Action::k16;
  // [rows] FP16 values held as float (alpha for 1 / 1.58 / 2 bit, the step s for 3/4/8);
  // empty for 16. The codes are (fit_kernels.h):
  //   8/4/3: q = clamp(round_half_even(W / s), -2^(b-1), 2^(b-1)-1),  What = s * q
  //   2:     q = clamp(floor(W / s), -2, 1),                        What = s * (q + 0.5)
  //   1.58:  q = clamp(round_half_even(W / s), -1, 1),              What = s * q
  //   1:     q = W >= beta ? 1 : -1,                                What = alpha * q + beta
  // and salient entries are replaced by their INT8 value (code * salient scale).
  std::vector<float> scales;
  std::vector<float> offsets;  // [rows] FP16 values (beta); only for action 1
  // Activation-weighted relative error over the whole unit, salient entries included
  // (after INT8): sum_ij s_j^2 (W - What)^2 / sum_ij s_j^2 W^2 (0 when the denominator is 0).
  double error = 0.0;
  double effective_bits = 0.0;  // UnitEffectiveBits(m, c, salient_count, action)
  // Per row, the search grid point the refinement started from (-1 for 16 and 1 bit):
  // what the stability tests watch.
  std::vector<int16_t> grid_point;
};

struct UnitFit {
  int64_t rows = 0;
  int64_t cols = 0;
  SalientSet salient;
  std::vector<ActionFit> fits;  // in the order the actions were requested
  const ActionFit* Find(plan::Action a) const;
};

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_UNIT_FIT_H_
