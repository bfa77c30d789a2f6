#include "common/plan/effective_bits.h"

#include <algorithm>
#include <cmath>

namespace windquant::plan {

int64_t SalientCount(int64_t n, double salient_fraction) {
  if (n <= 0 || !(salient_fraction > 0.0)) return 0;
  const double f = std::min(salient_fraction, 1.0);
  return std::clamp<int64_t>(std::llround(f * static_cast<double>(n)), 0, n);
}

int IndexBits(int64_t n) {
  int bits = 0;
  while (bits < 63 && (int64_t{1} << bits) < n) ++bits;
  return bits;
}

int ScaleParamsPerRow(Action a) {
  switch (a) {
    case Action::k16:
      return 0;
    case Action::k8:
    case Action::k4:
    case Action::k3:
    case Action::k2:
    case Action::k1_58:
      return 1;
    case Action::k1:
      return 2;
  }
  return 0;
}

double UnitEffectiveBits(int64_t rows, int64_t cols, int64_t salient_count, Action a) {
  const int64_t n = rows * cols;
  if (a == Action::k16) return 16.0 * static_cast<double>(n);
  const int64_t k = std::clamp<int64_t>(salient_count, 0, n);
  const double code_bits = static_cast<double>(n - k) * BitsOf(a);
  const double salient_bits =
      static_cast<double>(k) * (kSalientValueBits + IndexBits(n)) + (k > 0 ? kScaleBits : 0);
  const double scale_bits = static_cast<double>(rows) * kScaleBits * ScaleParamsPerRow(a);
  return code_bits + salient_bits + scale_bits;
}

double UnitBitsPerWeight(int64_t rows, int64_t cols, int64_t salient_count, Action a) {
  const int64_t n = rows * cols;
  return n > 0 ? UnitEffectiveBits(rows, cols, salient_count, a) / static_cast<double>(n) : 0.0;
}

int FixedParamBits(const std::string& torch_dtype) { return torch_dtype == "float32" ? 32 : 16; }

double WholeModelBits(double unit_bits, int64_t unit_weights, int64_t fixed_params,
                      int fixed_param_bits) {
  const double n = static_cast<double>(unit_weights + fixed_params);
  if (n <= 0) return 0.0;
  return (unit_bits + static_cast<double>(fixed_params) * fixed_param_bits) / n;
}

}  // namespace windquant::plan
