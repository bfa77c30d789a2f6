// The trailing lazy update of error compensation (gptq.cc), built once per instruction
// set (gptq_kernels.inc); gptq.cc picks one at run time. Exposed so the tests can check
// that both give the same bits.
//
// For r in [0, rows), c in [0, cols), and j = 0, 1, ..., nj - 1 in that order:
//   w[r * w_stride + c] = w[r * w_stride + c] - e[r * e_stride + j] * u[j][c]
// each term a rounded float32 product then a rounded difference (no FMA: the files are
// built with -ffp-contract=off and without -mfma), so every entry gets the operations of
// the one-column-at-a-time definition whatever the tiling or the vector width.
#ifndef WINDQUANT_COMMON_QUANT_GPTQ_KERNELS_H_
#define WINDQUANT_COMMON_QUANT_GPTQ_KERNELS_H_

#include <cstdint>

namespace windquant::quant {

using TrailingUpdateFn = void (*)(const float* e, int64_t e_stride, const float* const* u,
                                  int64_t nj, float* w, int64_t w_stride, int64_t rows,
                                  int64_t cols);

namespace gptq_baseline {  // x86-64 baseline (SSE2)
void TrailingUpdate(const float* e, int64_t e_stride, const float* const* u, int64_t nj, float* w,
                    int64_t w_stride, int64_t rows, int64_t cols);
}
namespace gptq_avx2 {  // -mavx2 -mno-fma: used when the CPU has AVX2
void TrailingUpdate(const float* e, int64_t e_stride, const float* const* u, int64_t nj, float* w,
                    int64_t w_stride, int64_t rows, int64_t cols);
}

// The build for this CPU.
TrailingUpdateFn TrailingUpdateForCpu();

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_GPTQ_KERNELS_H_
