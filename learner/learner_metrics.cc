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

void LearnerMetrics::SetState(double policy_version, double target, double batch_lambda) const {
  SetIf(version, policy_version);
  SetIf(target_bits, target);
  SetIf(lambda, batch_lambda);
}

void LearnerMetrics::SetBest(double effective_bits, double perplexity) const {
  SetIf(best_bits, effective_bits);
  SetIf(best_ppl, perplexity);
}

}  // namespace windquant::learner
