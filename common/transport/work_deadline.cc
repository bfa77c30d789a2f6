#include "common/transport/work_deadline.h"

#include <algorithm>

namespace windquant::transport {

int64_t LayerLinearWeights(const model::LlamaConfig& c) {
  const int64_t head_dim = c.head_dim > 0              ? c.head_dim
                           : c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads
                                                       : 0;
  const int64_t q = c.num_attention_heads * head_dim;
  const int64_t kv = c.num_key_value_heads * head_dim;
  return c.hidden_size * (2 * q + 2 * kv) + 3 * c.hidden_size * c.intermediate_size;
}

absl::Duration PassDeadline(absl::Duration base, int64_t weights, int64_t tokens) {
  const double w = static_cast<double>(std::max<int64_t>(0, weights));
  const double t = static_cast<double>(std::max<int64_t>(0, tokens));
  return kSanitizerSlowdown * (base + absl::Seconds(w * t / kPassFloorWeightTokensPerSecond) +
                               absl::Seconds(w / kFitFloorWeightsPerSecond));
}

absl::Duration FitDeadline(absl::Duration base, int64_t weights) {
  return kSanitizerSlowdown *
         (base + absl::Seconds(static_cast<double>(std::max<int64_t>(0, weights)) /
                               kFitFloorWeightsPerSecond));
}

absl::Duration RegisterTableDeadline(absl::Duration base, int64_t units) {
  return kSanitizerSlowdown *
         (base + absl::Seconds(static_cast<double>(std::max<int64_t>(0, units)) /
                               kTableFloorUnitsPerSecond));
}

}  // namespace windquant::transport
