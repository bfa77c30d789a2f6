#include "common/rl/state_features.h"

#include <algorithm>
#include <cmath>

#include "common/plan/action.h"

namespace windquant::rl {
namespace {

float Clip(double x, double low, double high) {
  if (!std::isfinite(x)) x = x > 0 ? high : low;  // +-inf; NaN cannot arise below
  return static_cast<float>(std::clamp(x, low, high));
}

}  // namespace

void ComputeState(const plan::Unit& unit, const EpisodeContext& c, float* out) {
  for (int i = 0; i < plan::kNumStaticFeatures; ++i) {
    const float v = unit.features[i];
    out[i] = std::isfinite(v) ? v : 0.0f;
  }
  const double t = static_cast<double>(c.step);
  const double total = static_cast<double>(std::max<int64_t>(c.num_units, 1));
  out[kFeatProgress] = Clip(t / total, 0.0, 1.0);
  const double per_weight = c.weights_left > 0 ? c.bits_left / c.weights_left : 0.0;
  out[kFeatBudgetPerWeight] = Clip(per_weight / 16.0, -1.0, 1.0);
  double urgency;
  if (c.bits_left <= 0) {
    urgency = c.min_bits_left > 0 ? -1.0 : 0.0;
  } else if (c.min_bits_left <= 0) {
    urgency = 1.0;
  } else {
    urgency = std::log2(c.bits_left / c.min_bits_left) / 4.0;
  }
  out[kFeatUrgency] = Clip(urgency, -1.0, 1.0);
  const int prev = c.step > 0 ? std::clamp(c.previous_action, 0, plan::kNumActions - 1) : 0;
  out[kFeatPrevAction] = static_cast<float>(prev) / (plan::kNumActions - 1);
}

FeatureRange StateFeatureRange(int i) {
  switch (i) {
    case plan::kFeatWeightMean:
    case plan::kFeatWeightVar:
    case plan::kFeatActMeanRel:
    case plan::kFeatActMaxRel:
    case plan::kFeatMassShare:  // log2(share x units in layer) / 4 (unit_table_builder.cc)
    case kFeatBudgetPerWeight:
    case kFeatUrgency:
      return {-1.0f, 1.0f};
    default:
      return {0.0f, 1.0f};
  }
}

}  // namespace windquant::rl
