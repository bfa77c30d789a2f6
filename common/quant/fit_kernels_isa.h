// The per-instruction-set builds of the kernels (fit_kernels_impl.inc); fit_kernels.cc
// picks one at run time. Exposed so the tests can check that both give the same bits.
#ifndef WINDQUANT_COMMON_QUANT_FIT_KERNELS_ISA_H_
#define WINDQUANT_COMMON_QUANT_FIT_KERNELS_ISA_H_

#include "common/quant/fit_kernels.h"

namespace windquant::quant {

#define WQ_DECLARE_KERNELS(ns)                                                                    \
  namespace ns {                                                                                  \
  UnitFit FitUnitKernel(const UnitView& weight, const float* act_scale,                           \
                        absl::Span<const plan::Action> actions, const QuantizerOptions& options); \
  void DequantizeKernel(const UnitView& weight, plan::Action a, const float* scales,              \
                        const float* offsets, const SalientSet& salient, float* out,              \
                        int64_t out_stride);                                                      \
  void CodesKernel(const UnitView& weight, plan::Action a, const float* scales,                   \
                   const float* offsets, int8_t* out);                                            \
  UnitStats UnitStatsKernel(const UnitView& weight, const float* act_scale, float sparse_below);  \
  }

WQ_DECLARE_KERNELS(baseline)  // x86-64 baseline (SSE2)
WQ_DECLARE_KERNELS(avx2)      // -mavx2 -mno-fma: used when the CPU has AVX2

#undef WQ_DECLARE_KERNELS

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_FIT_KERNELS_ISA_H_
