// LearnerMetrics: the learner's Prometheus metrics (windquant_learner_* of
// common/metrics/metric_names.h: episodes, transitions, PPO updates, policy
// version and lag, mean reward, target bits, best plan bits, perplexity and
// relative perplexity increase, λ, the quality target's epsilon). Without a registry every pointer
// is nullptr and the setters do nothing. The metrics are thread-safe; the struct is filled once,
// then only read.
#ifndef WINDQUANT_LEARNER_LEARNER_METRICS_H_
#define WINDQUANT_LEARNER_LEARNER_METRICS_H_

#include "absl/status/statusor.h"
#include "common/metrics/registry.h"
#include "common/rl/plan_evaluation.h"

namespace windquant::learner {

struct LearnerMetrics {
  // The learner's metrics in `registry` (its errors for a clashing name).
  static absl::StatusOr<LearnerMetrics> Create(metrics::Registry& registry);

  // One accepted episode of `steps` transitions, `lag` versions behind.
  void OnEpisode(double steps, double lag_versions) const;
  void OnUpdate(double episode_reward) const;
  // `max_ppl_increase`: the quality-target mode's epsilon (0: fixed budget).
  void SetState(double policy_version, double target, double batch_lambda,
                double max_ppl_increase = 0) const;
  // The best plan's bits, perplexity and d on the selection slice.
  void SetBest(const rl::PlanEvaluation& best) const;

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
  metrics::Gauge* max_ppl_increase = nullptr;
  metrics::Gauge* best_ppl_increase = nullptr;
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_LEARNER_METRICS_H_
