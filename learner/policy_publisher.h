// PolicyPublisher: the policy the learner trains (rl::PpoLearner) and what
// the actors get of it (PublishedPolicy): the policy snapshot with the
// curriculum step, λ and, with reward-model screening
// (training.screen_samples > 1), the model of every plan measured since the
// unit table was completed (rl::RewardModelFitter), fitted only for a snapshot
// that is sent. It clones plans into the policy (the step's Lagrangian
// reference, self-imitation) and finds its greedy plan; both need the unit
// table (SetTable).
// Thread-compatible (the learner calls it under its mutex).
// Memory: no model weights. The policy MLP (ppo.hidden) with its Adam moments,
// the unit costs (a few numbers per unit and action) and, when screening, at
// most RewardModelFitter::kMaxPlans measured plans of one byte per unit.
#ifndef WINDQUANT_LEARNER_POLICY_PUBLISHER_H_
#define WINDQUANT_LEARNER_POLICY_PUBLISHER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/plan/unit_table.h"
#include "common/rl/environment.h"
#include "common/rl/environment_options.h"
#include "common/rl/plan_evaluation.h"
#include "common/rl/ppo.h"
#include "common/rl/ppo_options.h"
#include "common/rl/reward_model.h"
#include "common/rl/run_policy.h"
#include "common/rl/warm_start.h"

namespace windquant::learner {

struct PublishedPolicy {
  rl::PolicySnapshot snapshot;
  int curriculum_stage = 0;  // the curriculum step (the proto's name)
  double target_bits = 0;
  double lambda = 0;
  rl::RewardModel reward_model;  // empty unless training.screen_samples > 1
};

class PolicyPublisher {
 public:
  // What it reads (the keys it is built from: job/learner_options.h).
  struct Options {
    rl::PpoOptions ppo;          // ppo.*: the policy network and its PPO updates
    rl::EnvironmentOptions env;  // env.*: the episodes ClonePlan replays and GreedyPlan runs
    uint64_t seed = 0;           // training.seed: the initial weights and the PPO shuffle
    int warm_start_steps = 200;  // training.warm_start_steps: Adam steps of one ClonePlan at most
    int screen_samples = 0;      // training.screen_samples: > 1 = fit the reward model
  };

  // A fresh policy (rl::CreatePpoLearner); errors of the policy's options.
  static absl::StatusOr<std::unique_ptr<PolicyPublisher>> Create(const Options& options);

  // The table is complete (its unit costs); the reward model starts afresh
  // (it learns from the plans measured from now on). Errors of
  // rl::UnitCosts::Create.
  absl::Status SetTable(const plan::UnitTable& table);

  int64_t version() const { return ppo_->version(); }
  // One PPO update (rl::PpoLearner::Update). When screening, the reward
  // model of the plans measured so far is fitted here and is the one every
  // snapshot of the new version carries: what an actor screens with then
  // depends on the run's events up to the update, not on when it asks (a
  // plan measured between the update and a Publish would otherwise make two
  // runs of one seed differ).
  absl::StatusOr<rl::PpoStats> Update(const std::vector<rl::Transition>& batch);
  // Behaviour-clones `actions` at `target_bits` into the policy
  // (rl::WarmStartOnPlan); returns the mean probability of the plan's actions.
  // FAILED_PRECONDITION before SetTable.
  absl::StatusOr<double> ClonePlan(double target_bits, const std::vector<int>& actions,
                                   double target_prob = rl::kWarmStartTargetProb);
  // The policy's argmax plan at `target_bits`. FAILED_PRECONDITION before SetTable.
  absl::StatusOr<std::vector<int>> GreedyPlan(double target_bits) const;

  // A measured plan, for the reward model (ignored when not screening and for
  // a cached evaluation: the evaluator measured that plan before).
  void AddMeasured(const std::vector<int>& actions, const rl::PlanEvaluation& evaluation);
  // The current policy for an actor that has `known_version`; the plan model
  // is attached only when the snapshot is new to it: the one fitted at the
  // update that made this version, or (no update yet) fitted now.
  PublishedPolicy Publish(int64_t known_version, int curriculum_step, double target_bits,
                          double lambda);

  // rl::PpoLearner::SaveState / LoadState (the checkpoint's learner_state).
  absl::StatusOr<std::string> SaveState() const { return ppo_->SaveState(); }
  absl::Status LoadState(const std::string& bytes) { return ppo_->LoadState(bytes); }

 private:
  PolicyPublisher(const Options& options, std::unique_ptr<rl::PpoLearner> ppo)
      : options_(options), ppo_(std::move(ppo)) {}

  const Options options_;
  std::unique_ptr<rl::PpoLearner> ppo_;
  std::shared_ptr<const rl::UnitCosts> costs_;  // null before SetTable
  // The reward model for screening; null when off (or before SetTable).
  std::unique_ptr<rl::RewardModelFitter> fitter_;
  rl::RewardModel version_model_;  // fitted by the last Update (screening)
  int64_t version_model_of_ = -1;  // the policy version it belongs to; -1: none
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_POLICY_PUBLISHER_H_
