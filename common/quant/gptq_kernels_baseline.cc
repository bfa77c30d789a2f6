// The trailing update of gptq_kernels.inc with the x86-64 baseline instruction set (16
// SSE registers: tiles of 4 rows x 8 columns, 4-lane vectors), and the choice of the
// build for this CPU.
#include "common/quant/gptq_kernels.h"

#define WQ_GPTQ_NS gptq_baseline
#define WQ_GPTQ_ROWS 4
#define WQ_GPTQ_LANES 4
#include "common/quant/gptq_kernels.inc"  // NOLINT(build/include)

namespace windquant::quant {

TrailingUpdateFn TrailingUpdateForCpu() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 ? &gptq_avx2::TrailingUpdate : &gptq_baseline::TrailingUpdate;
}

}  // namespace windquant::quant
