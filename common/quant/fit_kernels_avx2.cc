// The kernels of fit_kernels_impl.inc, with -mavx2 -mno-fma (common/quant/CMakeLists.txt); called
// only when the CPU has AVX2.
#include "common/quant/fit_kernels_isa.h"

#define WQ_KERNEL_NS avx2
#include "common/quant/fit_kernels_impl.inc"  // NOLINT(build/include)
