// The trailing update of gptq_kernels.inc with -mavx2 -mno-fma (common/quant/CMakeLists.txt):
// tiles of 4 rows x 16 columns (8 accumulators, 2 vectors of u, 1 broadcast). Called only
// when the CPU has AVX2.
#include "common/quant/gptq_kernels.h"

#define WQ_GPTQ_NS gptq_avx2
#define WQ_GPTQ_ROWS 4
#define WQ_GPTQ_LANES 8
#include "common/quant/gptq_kernels.inc"  // NOLINT(build/include)
