// The kernels of fit_kernels_impl.inc, with the x86-64 baseline instruction set.
#include "common/quant/fit_kernels_isa.h"

#define WQ_KERNEL_NS baseline
#include "common/quant/fit_kernels_impl.inc"  // NOLINT(build/include)
