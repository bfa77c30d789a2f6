// LearnerMetrics: the learner's Prometheus metrics (windquant_learner_* of
// common/metrics/metric_names.h: episodes, transitions, PPO updates, policy
// version and lag, mean reward, target bits, best plan bits and perplexity,
// λ). Without a registry every pointer is nullptr and the setters do nothing.
// The metrics are thread-safe; the struct is filled once, then only read.
#ifndef WINDQUANT_LEARNER_LEARNER_METRICS_H_
#define WINDQUANT_LEARNER_LEARNER_METRICS_H_

#include "absl/status/statusor.h"
#include "common/metrics/registry.h"

namespace windquant::learner {

struct LearnerMetrics {
  // The learner's metrics in `registry` (its errors for a clashing name).
  static absl::StatusOr<LearnerMetrics> Create(metrics::Registry& registry);

  // One accepted episode of `steps` transitions, `lag` versions behind.
  void OnEpisode(double steps, double lag_versions) const;
  void OnUpdate(double episode_reward) const;
  void SetState(double policy_version, double target, double batch_lambda) const;
  void SetBest(double effective_bits, double perplexity) const;

  metrics::Counter* episodes = nullptr;
  metrics::Counter* transitions = nullptr;
  metrics::Counter* updates = nullptr;
  metrics::Gauge* version = nullptr;
  metrics::Histogram* lag = nullptr;
  metrics::Gauge* mean_reward = nullptr;
  metrics::Gauge* target_bits = nullptr;
  metrics::Gauge* best_bits = nullptr;
  metrics::Gauge* best_ppl = nullptr;
  metrics::Gauge* lambda = nullptr;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_LEARNER_METRICS_H_
