// The quantizer as it was first written: every operator of DESIGN.md section 3 as ATen
// ops over the whole unit (vectorised across rows), returning the dequantized values and
// the codes of every action. It is the slow, obvious reference of the fast row kernels
// (fit_kernels.h) in the tests and in bench/fit_bench (--reference); nothing in the
// product calls it.
//
// Differences of the fast path, by design: ties of the salient top-k are broken towards
// the lower index (here: at::topk's order), the searches keep an earlier grid point
// within QuantizerOptions::switch_margin (here: any smaller error wins), sums run in
// another order. So the fits agree with these up to those rules, not bit for bit; the
// tests say how closely.
//
// Memory: each ReferenceActionFit holds a float32 [m, c] dequantized copy and an int8
// [m, c] code tensor (5 bytes per weight per action) for as long as the caller keeps it.
// Stateless; thread-safe.
#ifndef WINDQUANT_COMMON_QUANT_REFERENCE_QUANTIZER_H_
#define WINDQUANT_COMMON_QUANT_REFERENCE_QUANTIZER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/plan/action.h"
#include "common/plan/effective_bits.h"
#include "common/quant/unit_fit.h"

namespace windquant::quant::reference {

struct ReferenceActionFit {
  plan::Action action = plan::Action::k16;
  at::Tensor dequant;  // [m, c] float32, salient entries replaced (not for 16)
  at::Tensor codes;    // [m, c] int8 (undefined for 16)
  at::Tensor scales;   // [m] float32 holding FP16 values; undefined for 16
  at::Tensor offsets;  // [m] float32 holding FP16 values; only for action 1
  double error = 0.0;
  double effective_bits = 0.0;
};

struct ReferenceSalientSet {
  at::Tensor mask;   // [m, c] bool
  at::Tensor index;  // [k] int64 flat positions, ascending
  at::Tensor codes;  // [k] int8
  float scale = 0.0f;
  int64_t count = 0;
};

struct ReferenceUnitFit {
  int64_t rows = 0;
  int64_t cols = 0;
  ReferenceSalientSet salient;
  std::vector<ReferenceActionFit> fits;
  const ReferenceActionFit* Find(plan::Action a) const;
};

// The first quantizer (switch_margin is ignored). Same arguments and errors as FitUnit.
absl::StatusOr<ReferenceUnitFit> ReferenceFitUnit(const at::Tensor& weight,
                                                  const at::Tensor& act_scale,
                                                  absl::Span<const plan::Action> actions,
                                                  const QuantizerOptions& options = {});

absl::StatusOr<at::Tensor> ReferenceSalientMask(const at::Tensor& weight,
                                                const at::Tensor& act_scale, double fraction);

double ReferenceRelativeError(const at::Tensor& weight, const at::Tensor& dequant,
                              const at::Tensor& act_scale);

// The dequantized unit [m, c] of action `a` from the full-precision unit `weight` [m, c]
// float32 and the stored parameters (FP16 values as floats; offsets only for 1 bit), in
// plain ATen ops following the formulas of unit_fit.h: the slow, obvious reference of
// fit_kernels.h's DequantizeKernel and of the plan weights built from it.
at::Tensor ReferenceDequantize(const at::Tensor& weight, plan::Action a,
                               const std::vector<float>& scales, const std::vector<float>& offsets,
                               const SalientSet& salient);

}  // namespace windquant::quant::reference

#endif  // WINDQUANT_COMMON_QUANT_REFERENCE_QUANTIZER_H_
