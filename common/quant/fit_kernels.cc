// Public entry points of the kernels: the FP16 helpers, the salient selection, and the
// dispatch to the build of the kernels for this CPU (fit_kernels_impl.inc).
#include "common/quant/fit_kernels.h"

#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "common/quant/fit_kernels_isa.h"

namespace windquant::quant {
namespace {

bool UseAvx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}

}  // namespace

// Ties are broken towards the lower flat index: a deterministic rule, unlike a library
// top-k whose order may change with the CPU's vector width.
std::vector<int32_t> SelectSalient(const UnitView& w, const float* s, int64_t k) {
  std::vector<int32_t> out;
  if (k <= 0) return out;
  const int64_t m = w.rows, c = w.cols, n = m * c;
  // Scores |W_ij| s_j >= 0 as their float bits (sign cleared): for non-negative floats the
  // bit patterns order like the values, so a radix select on the top 16 bits finds the
  // bucket of the k-th largest and only that bucket is sorted.
  // Scratch reused by the thread: a fresh megabyte per unit would be a fresh mapping,
  // whose page faults and unmapping serialise the threads fitting units in parallel.
  thread_local std::vector<uint32_t> score, in_bucket;
  thread_local std::vector<int64_t> hist;
  score.resize(n);
  for (int64_t i = 0; i < m; ++i) {
    const float* row = w.data + i * w.stride;
    for (int64_t j = 0; j < c; ++j) {
      const float v = std::fabs(row[j]) * s[j];
      uint32_t b;
      std::memcpy(&b, &v, sizeof(b));
      score[i * c + j] = b & 0x7fffffffu;
    }
  }
  uint32_t threshold = 0;
  if (k < n) {
    hist.assign(1 << 16, 0);
    for (uint32_t b : score) ++hist[b >> 16];
    int64_t above = 0;
    int bucket = (1 << 16) - 1;
    for (; bucket > 0 && above + hist[bucket] < k; --bucket) above += hist[bucket];
    in_bucket.clear();
    for (uint32_t b : score) {
      if (static_cast<int>(b >> 16) == bucket) in_bucket.push_back(b);
    }
    const int64_t need = k - above;  // 1 <= need <= in_bucket.size()
    std::nth_element(in_bucket.begin(), in_bucket.begin() + (need - 1), in_bucket.end(),
                     std::greater<uint32_t>());
    threshold = in_bucket[need - 1];
  }
  int64_t above = 0;
  for (uint32_t b : score) above += b > threshold;
  int64_t ties = k - above;
  out.reserve(k);
  for (int64_t i = 0; i < n; ++i) {
    if (score[i] > threshold || (score[i] == threshold && ties-- > 0)) {
      out.push_back(static_cast<int32_t>(i));
    }
  }
  return out;
}

float RoundToHalf(float x) { return static_cast<float>(c10::Half(x)); }
uint16_t HalfBits(float x) { return c10::Half(x).x; }
float FromHalfBits(uint16_t h) { return static_cast<float>(c10::Half(h, c10::Half::from_bits())); }

UnitFit FitUnitKernel(const UnitView& w, const float* act_scale,
                      absl::Span<const plan::Action> actions, const QuantizerOptions& o) {
  return UseAvx2() ? avx2::FitUnitKernel(w, act_scale, actions, o)
                   : baseline::FitUnitKernel(w, act_scale, actions, o);
}

void DequantizeKernel(const UnitView& w, plan::Action a, const float* scales, const float* offsets,
                      const SalientSet& salient, float* out, int64_t out_stride) {
  if (UseAvx2()) {
    avx2::DequantizeKernel(w, a, scales, offsets, salient, out, out_stride);
  } else {
    baseline::DequantizeKernel(w, a, scales, offsets, salient, out, out_stride);
  }
}

void CodesKernel(const UnitView& w, plan::Action a, const float* scales, const float* offsets,
                 int8_t* out) {
  if (UseAvx2()) {
    avx2::CodesKernel(w, a, scales, offsets, out);
  } else {
    baseline::CodesKernel(w, a, scales, offsets, out);
  }
}

UnitStats UnitStatsKernel(const UnitView& w, const float* act_scale, float sparse_below) {
  return UseAvx2() ? avx2::UnitStatsKernel(w, act_scale, sparse_below)
                   : baseline::UnitStatsKernel(w, act_scale, sparse_below);
}

}  // namespace windquant::quant
