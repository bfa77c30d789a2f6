// The training pieces of DESIGN.md section 4 that the learner
// (learner/learner_core.h) puts together: the PPO learner of the config, the
// warm start by behaviour cloning, the greedy candidate of a policy, the
// best-plan rule, seed mixing, and RunResult (what a training run returns).
//
// Warm start (training.warm_start = lagrange), at the start of every stage:
// the reference plan of the stage's target (the Lagrangian baseline) is
// evaluated as a candidate (so the best plan is never worse than it on the
// selection metric), and the policy is behaviour-cloned on it (cross-entropy
// on the states of an episode that follows the plan, Adam, up to
// training.warm_start_steps steps, stopping once the plan's actions have mean
// probability kWarmStartTargetProb so that sampling still explores).
//
// Best plan: the lowest evaluation-slice perplexity among evaluated plans
// whose effective bits are within the final curriculum target; the best at the
// current stage's target among the plans the policy produced (not the
// reference) drives the curriculum criterion.
//
// Thread-compatible.
#ifndef WINDQUANT_COMMON_RL_TRAINING_H_
#define WINDQUANT_COMMON_RL_TRAINING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/run_config.h"
#include "common/quant/unit_table.h"
#include "common/rl/environment.h"
#include "common/rl/episode_evaluator.h"
#include "common/rl/policy.h"
#include "common/rl/ppo.h"
#include "common/rl/run_checkpoint.h"

namespace windquant::rl {

// Mean probability of the reference actions at which behaviour cloning stops.
inline constexpr double kWarmStartTargetProb = 0.9;

// What a training run returns (learner::LearnerCore::Result).
struct RunResult {
  CandidatePlan best;       // best feasible at the final target (actions empty if none)
  CandidatePlan reference;  // the final stage's reference plan as evaluated (may be empty)
  std::vector<UpdateRecord> curve;
  std::vector<StageEvent> stages;
  double lambda = 0;
  int64_t updates = 0;               // total, including those before a resume
  int64_t resumed_from_update = -1;  // -1: fresh run
  int64_t evaluations = 0;           // evaluations received in this process, cached included
  int64_t cache_hits = 0;            // of those, answered from the evaluator's cache
  // Real (uncached) evaluations of the whole run, those before a resume (up
  // to its checkpoint) and late ones (an expired plan's evaluation) included.
  int64_t real_evaluations = 0;
  double seconds = 0;          // wall time of this process
  bool stopped_early = false;  // stop_after_updates hit
};

// SplitMix64 finaliser: a well-mixed 64-bit value of `x`. Seeds for
// MakeGenerator go through it: the CPU generator (mt19937) keeps only the low
// 32 bits of its seed, so seeds that differ only in high bits (e.g. actor
// index << 48) would otherwise give identical sample streams.
uint64_t SplitMix64(uint64_t x);

// The policy (15 state features -> 7 actions) of the config's ppo.hidden,
// initialised from training.seed: the learner's and every actor's copy.
PolicyOptions PolicyOptionsFromConfig(const config::RunConfig& c);

// The PPO learner (policy over the 15 state features and 7 actions) that the
// config's ppo and training sections describe; used by the learner.
absl::StatusOr<std::unique_ptr<PpoLearner>> CreatePpoLearner(const config::RunConfig& c);

// Behaviour cloning: at most `steps` Adam steps (learning rate `lr`) of
// cross-entropy of `transitions`' actions under their masks; stops early when
// the mean probability of those actions reaches `target_prob`. Returns that
// mean probability at the end. INVALID_ARGUMENT for empty input.
absl::StatusOr<double> BehaviourClone(Policy& policy, const std::vector<Transition>& transitions,
                                      int steps, double lr, double target_prob);

// The warm start of a curriculum stage (training.warm_start = lagrange), shared
// by the learner: behaviour-clones `policy` on the
// episode that follows `plan` at `target_bits` (ReplayPlan, then
// BehaviourClone with training.warm_start_steps, its learning rate and
// `target_prob`, kWarmStartTargetProb by default). Returns the mean
// probability of the plan's actions.
absl::StatusOr<double> WarmStartOnPlan(Policy& policy, std::shared_ptr<const UnitCosts> costs,
                                       const config::RunConfig& config, double target_bits,
                                       const std::vector<int>& plan,
                                       double target_prob = kWarmStartTargetProb);

// The deterministic (argmax) plan of `policy` at `target_bits` (one greedy
// episode), the candidate evaluated after every PPO update.
absl::StatusOr<std::vector<int>> PolicyGreedyPlan(const Policy& policy,
                                                  std::shared_ptr<const UnitCosts> costs,
                                                  const config::RunConfig& config,
                                                  double target_bits);

// Best-plan bookkeeping of the learner: `candidate`
// (measured, candidate.target_bits = the stage target it was made for)
// replaces `*best` (the best feasible at `final_target`, target_bits set to
// it) when its perplexity is finite and lower and its effective bits are
// within `final_target`; unless its source is "lagrange" (the reference), it
// also replaces `*best_stage` (may be nullptr) under the same rule at the
// stage target. Returns true when `*best` changed.
bool ConsiderCandidate(const CandidatePlan& candidate, double final_target, CandidatePlan* best,
                       CandidatePlan* best_stage);

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_TRAINING_H_
