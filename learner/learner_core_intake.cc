// LearnerCore's episode intake (StreamTransitions): SubmitEpisode, whose
// journal write runs without the core's mutex, and the screened-out episodes
// learned from their predicted reward. The rest of the class is in
// learner_core.cc.
#include <cmath>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rl/environment.h"
#include "common/rl/episode_reward.h"
#include "common/rl/reward_model.h"
#include "learner/learner_core.h"

namespace windquant::learner {

absl::StatusOr<bool> LearnerCore::SubmitEpisode(rl::Episode episode) {
  std::shared_ptr<const plan::UnitTable> table;
  const HeldEpisodes* journal = nullptr;
  {
    absl::MutexLock lock(&mu_);
    std::optional<absl::StatusOr<bool>> answer = AdmitLocked(episode);
    if (answer.has_value()) {
      PublishLocked();
      return *std::move(answer);
    }
    table = tables_.table();
    journal = &held_;  // Journal is thread-safe
  }
  // Durable before the ack, written without mu_: the streams share a sync
  // (EpisodeJournal's group commit) and nobody waits for the disk on mu_.
  const absl::Status journaled = journal->Journal(episode, *table);
  absl::MutexLock lock(&mu_);
  absl::StatusOr<bool> held = HoldJournaledLocked(std::move(episode), journaled);
  PublishLocked();
  return held;
}

absl::StatusOr<bool> LearnerCore::HoldJournaledLocked(rl::Episode episode,
                                                      const absl::Status& journaled) {
  const uint64_t id = episode.episode_id;
  if (!journaled.ok()) {
    held_.Unreserve(id);  // not acknowledged: the actor may send it again
    return journaled;
  }
  if (run_.done() || run_.stopped()) {  // while it was journaled: refused as it would be now
    held_.Release(id);
    return false;
  }
  metrics_.OnEpisode(static_cast<double>(episode.steps.size()),
                     static_cast<double>(policy_->version() - episode.policy_version));
  held_.HoldReserved(std::move(episode));
  outbox_.emplace_back(rl::PlanKind::kEpisode, id);
  ++counts_.episodes;
  return true;
}

std::optional<absl::StatusOr<bool>> LearnerCore::AdmitLocked(rl::Episode& episode) {
  if (tables_.table() == nullptr) return absl::UnavailableError("unit table incomplete");
  if (!policy_ready_) return absl::UnavailableError("the run's start is not decided yet");
  if (run_.done() || run_.stopped() || curriculum_.finished()) return false;
  const int64_t v = policy_->version();
  // From a policy this learner never had (it restarted from an older
  // checkpoint), or older than max_policy_lag versions.
  if (episode.policy_version > v ||
      episode.policy_version < v - options_.policy.ppo.max_policy_lag) {
    ++counts_.dropped_stale;
    return false;
  }
  if (held_.Seen(episode.episode_id)) return false;
  if (episode.screened_out) return LearnPredictedLocked(std::move(episode));
  held_.Reserve(episode.episode_id);  // a copy sent meanwhile is refused
  return std::nullopt;
}

absl::StatusOr<bool> LearnerCore::LearnPredictedLocked(rl::Episode e) {
  if (fp_eval_ppl_ <= 0 || e.steps.empty()) return false;  // nothing measured yet to predict from
  const double target = e.plan.target_bits > 0 ? e.plan.target_bits : curriculum_.target_bits();
  const plan::UnitTable& table = *tables_.table();
  const rl::PlanEvaluation pe = rl::ChargedEvaluation(
      options_.policy.env, table, e.steps,
      rl::PredictedEvaluation(e.predicted_log_ppl, table.EffectiveBits(e.plan.actions),
                              fp_eval_ppl_));
  const rl::EpisodeReward reward =
      rl::EpisodeEndReward(options_.policy.env, pe, lambda_, target, options_.lagrange);
  if (!std::isfinite(reward.total)) {
    return absl::InvalidArgumentError(
        absl::StrCat("predicted_log_ppl: reward not finite for ", "episode ", e.episode_id));
  }
  held_.MarkSeen(e.episode_id);
  e.steps.back().reward += static_cast<float>(reward.total);
  batch_.AddPredicted(std::move(e.steps));
  ++counts_.predicted;
  return true;
}

}  // namespace windquant::learner
