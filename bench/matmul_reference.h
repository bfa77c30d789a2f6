// What the benchmarks divide by: a wall clock in seconds and the GFLOP/s of a plain
// square at::matmul measured in the same run (this machine's own limit).
#ifndef WINDQUANT_BENCH_MATMUL_REFERENCE_H_
#define WINDQUANT_BENCH_MATMUL_REFERENCE_H_

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>

namespace windquant::bench {

inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// GFLOP/s of an n x n x n float32 matmul, mean of `iters` runs after one warm-up.
inline double MatmulGflops(int64_t n, int iters) {
  at::manual_seed(0);
  const at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
  at::matmul(a, b);  // warm-up
  const double t0 = Now();
  for (int i = 0; i < iters; ++i) at::matmul(a, b);
  return 2.0 * n * n * n / ((Now() - t0) / iters) / 1e9;
}

}  // namespace windquant::bench

#endif  // WINDQUANT_BENCH_MATMUL_REFERENCE_H_
