// The quantizer's hand-written kernels (DESIGN.md section 3), on raw float32 memory:
// fitting every action of one unit row by row, and turning a unit's weights + fitted
// parameters back into its dequantized values or its integer codes.
//
// Why hand-written: the ATen formulation (reference_quantizer.h, kept as the slow
// reference of the tests) made ~40 temporaries of the unit's size per action; here a row
// (a few hundred floats) stays in L1 while every search and refinement step runs over it.
//
// Determinism: the loops use GCC vector types of 8 float lanes with a fixed reduction
// order, no FMA contraction (-ffp-contract=off) and no runtime-dispatched library code,
// so the results are bit-identical on every x86-64 CPU whatever vector width the compiled
// clone uses (SSE2 or AVX2). Sums of a row are taken in 8 float lanes then combined in
// double; sums over rows are in double.
//
// Dequantize/Codes compute exactly (bit for bit) the values the fit scored: the plan's
// weights, the exporter's codes and what the evaluator measures are the same numbers.
//
// Thread-safe (no shared state); the caller parallelises over units.
#ifndef WINDQUANT_COMMON_QUANT_FIT_KERNELS_H_
#define WINDQUANT_COMMON_QUANT_FIT_KERNELS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/quant/unit_fit.h"

namespace windquant::quant {

// A unit as raw memory: rows x cols float32 values, row i at data + i * stride.
struct UnitView {
  const float* data = nullptr;
  int64_t stride = 0;
  int64_t rows = 0;
  int64_t cols = 0;
};

// float -> nearest FP16 (round half to even, as at::Tensor::to(kHalf)) -> float.
float RoundToHalf(float x);
uint16_t HalfBits(float x);  // the FP16 bits of RoundToHalf(x)
float FromHalfBits(uint16_t h);

// The k entries of largest |W_ij| * s_j (ties: the lower flat index first), as
// ascending flat (row-major) indices.
std::vector<int32_t> SelectSalient(const UnitView& weight, const float* act_scale, int64_t k);

// Fits `actions` (duplicates allowed, any order) on the unit; act_scale has `cols`
// entries. Inputs are not checked (quantizer.h's FitUnit checks them): finite weights,
// finite act_scale >= 0. Orderings and seeding as documented in quantizer.h.
UnitFit FitUnitKernel(const UnitView& weight, const float* act_scale,
                      absl::Span<const plan::Action> actions, const QuantizerOptions& options);

// Writes the dequantized unit of action `a` (scales / offsets: [rows] FP16 values as in
// ActionFit; unused for 16) into out (row i at out + i * out_stride). `out` may be the
// weights themselves (in place, same stride). Salient entries get their INT8 value
// except for action 16.
void DequantizeKernel(const UnitView& weight, plan::Action a, const float* scales,
                      const float* offsets, const SalientSet& salient, float* out,
                      int64_t out_stride);

// The integer codes of action a (not 16) as in ActionFit, row-major into out
// [rows * cols]; salient positions hold the operator's code (ignored by readers).
void CodesKernel(const UnitView& weight, plan::Action a, const float* scales, const float* offsets,
                 int8_t* out);

// Sums over a unit for its static features (unit_table_builder.cc): 8 float lanes per
// row, rows added in double.
struct UnitStats {
  double sum = 0, sum_sq = 0;   // of W
  double var = 0;               // E[W^2] - E[W]^2 (population)
  double mass = 0;              // sum |W_ij| s_j
  int64_t sparse = 0;           // entries with |W_ij| < sparse_below
  int64_t outliers = 0;         // entries with |W_ij - mean| > 3 std
  double s_sum = 0, s_max = 0;  // of the activation scales
};
UnitStats UnitStatsKernel(const UnitView& weight, const float* act_scale, float sparse_below);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_FIT_KERNELS_H_
