#include "learner/learner_metrics.h"

#include "common/base/status_macros.h"
#include "common/metrics/metric_names.h"

namespace windquant::learner {
namespace {

void SetIf(metrics::Gauge* gauge, double v) {
  if (gauge != nullptr) gauge->Set(v);
}

}  // namespace

absl::StatusOr<LearnerMetrics> LearnerMetrics::Create(metrics::Registry& r) {
  LearnerMetrics m;
  WQ_ASSIGN_OR_RETURN(auto* episodes, metrics::CounterFamily(r, metrics::kLearnerEpisodesTotal));
  WQ_ASSIGN_OR_RETURN(auto* transitions,
                      metrics::CounterFamily(r, metrics::kLearnerTransitionsTotal));
  WQ_ASSIGN_OR_RETURN(auto* updates, metrics::CounterFamily(r, metrics::kLearnerPpoUpdatesTotal));
  WQ_ASSIGN_OR_RETURN(auto* version, metrics::GaugeFamily(r, metrics::kLearnerPolicyVersion));
  WQ_ASSIGN_OR_RETURN(auto* lag, metrics::HistogramFamily(r, metrics::kLearnerPolicyLagVersions));
  WQ_ASSIGN_OR_RETURN(auto* reward, metrics::GaugeFamily(r, metrics::kLearnerMeanEpisodeReward));
  WQ_ASSIGN_OR_RETURN(auto* target, metrics::GaugeFamily(r, metrics::kLearnerTargetBits));
  WQ_ASSIGN_OR_RETURN(auto* best_bits,
                      metrics::GaugeFamily(r, metrics::kLearnerBestPlanEffectiveBits));
  WQ_ASSIGN_OR_RETURN(auto* best_ppl, metrics::GaugeFamily(r, metrics::kLearnerBestPlanPerplexity));
  WQ_ASSIGN_OR_RETURN(auto* lambda, metrics::GaugeFamily(r, metrics::kLearnerLambda));
  WQ_ASSIGN_OR_RETURN(auto* max_increase,
                      metrics::GaugeFamily(r, metrics::kLearnerMaxPerplexityIncreaseRatio));
  WQ_ASSIGN_OR_RETURN(auto* best_increase,
                      metrics::GaugeFamily(r, metrics::kLearnerBestPlanPerplexityIncreaseRatio));
  m.episodes = &episodes->Get();
  m.transitions = &transitions->Get();
  m.updates = &updates->Get();
  m.version = &version->Get();
  m.lag = &lag->Get();
  m.mean_reward = &reward->Get();
  m.target_bits = &target->Get();
  m.best_bits = &best_bits->Get();
  m.best_ppl = &best_ppl->Get();
  m.lambda = &lambda->Get();
  m.max_ppl_increase = &max_increase->Get();
  m.best_ppl_increase = &best_increase->Get();
  return m;
}

void LearnerMetrics::OnEpisode(double steps, double lag_versions) const {
  if (episodes == nullptr) return;
  episodes->Inc();
  transitions->Inc(steps);
  lag->Observe(lag_versions);
}

void LearnerMetrics::OnUpdate(double episode_reward) const {
  if (updates != nullptr) updates->Inc();
  SetIf(mean_reward, episode_reward);
}

void LearnerMetrics::SetState(double policy_version, double target, double batch_lambda,
                              double max_increase) const {
  SetIf(version, policy_version);
  SetIf(target_bits, target);
  SetIf(lambda, batch_lambda);
  SetIf(max_ppl_increase, max_increase);
}

void LearnerMetrics::SetBest(const rl::PlanEvaluation& best) const {
  SetIf(best_bits, best.effective_bits);
  SetIf(best_ppl, best.eval_ppl);
  SetIf(best_ppl_increase, best.relative_ppl_increase);
}

}  // namespace windquant::learner
