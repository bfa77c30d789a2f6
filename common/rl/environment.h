// The WINDQuant environment (DESIGN.md section 4): one episode walks every
// unit of the global UnitTable in its order (layer, matrix, chunk) and picks
// one of the 7 precisions per unit; the finished episode is a plan.
//
// Budget: B = target_bits * sum n (the effective-bit formula of
// common/plan/effective_bits.h, summed per unit by the table).
//   hard: at step t action a is allowed iff
//           spent + bits(t, a) + sum_{u > t} min_a' bits(u, a') <= B
//         so every finished plan has effective bits <= target by
//         construction. If even the cheapest action of unit t breaks that
//         (only when the target is below the cheapest plan), that cheapest
//         action stays allowed so an episode can always finish.
//   soft: every action allowed; the overrun is penalised at the episode end
//         (EpisodeEndReward, episode_reward.h) and by the step reward.
//   repair: every action allowed, as soft; the finished plan, when over the
//         budget, is repaired to it (search::RepairToBudget in env.repair_order:
//         the proxy's cheapest step downs, or the walk's last units first)
//         before it is measured, so every measured plan
//         can be returned. The episode is charged for the bits it chose
//         (ChosenBits: the penalties and lambda's price, charged by the
//         evaluator, told by the actor in v1::Plan.charged_bits) and
//         rewarded for the quality of the plan measured.
//
// Step reward (dense budget-feasibility signal), for unit t of n_t weights:
//   r_t = step_saving_weight * (n_t / N) * (running_target_t - bits(t, a_t) / n_t)
//         - skip_penalty * [a_t == 16]
// with running_target_t = bits left / weights left before the step (bits per
// weight the rest of the episode may still spend) and N the total weights:
// positive when the unit costs less than its fair share of what is left.
//
// Environment: one episode; BatchedEnvironment: N episodes stepped together
// with one Policy::Act per step. Both are thread-compatible; UnitCosts is
// immutable and shared.
#ifndef WINDQUANT_COMMON_RL_ENVIRONMENT_H_
#define WINDQUANT_COMMON_RL_ENVIRONMENT_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "common/plan/unit_table.h"
#include "common/rl/environment_options.h"
#include "common/rl/plan_evaluation.h"
#include "common/rl/policy.h"
#include "common/rl/ppo.h"
#include "common/rl/state_features.h"
#include "common/search/baselines.h"

namespace windquant::rl {

enum class BudgetMode { kHard, kSoft, kRepair };

// One episode's environment: the decision process's options (the weights'
// defaults are EnvironmentOptions') at one curriculum target.
struct EnvOptions {
  double target_bits = 2.0;
  BudgetMode budget_mode = BudgetMode::kHard;
  search::RepairOrder repair_order = search::RepairOrder::kProxy;  // kRepair only
  double step_saving_weight = EnvironmentOptions().step_saving_weight;
  double skip_penalty = EnvironmentOptions().skip_penalty;
};

// EnvOptions of the decision process (the run config's env section) at a curriculum target.
EnvOptions MakeEnvOptions(const EnvironmentOptions& env, double target_bits);

// Per-unit costs precomputed from a UnitTable (suffix sums for masking).
class UnitCosts {
 public:
  // INVALID_ARGUMENT for an empty table or non-finite / negative bits.
  static absl::StatusOr<std::shared_ptr<const UnitCosts>> Create(const plan::UnitTable& table);

  const plan::UnitTable& table() const { return table_; }
  int64_t num_units() const { return static_cast<int64_t>(table_.units.size()); }
  double total_weights() const { return total_weights_; }
  double bits(int64_t unit, int action) const { return table_.units[unit].bits[action]; }
  double min_bits(int64_t unit) const { return min_bits_[unit]; }
  int cheapest_action(int64_t unit) const { return cheapest_[unit]; }
  // Sums over units [unit, T): weights and cheapest bits.
  double suffix_weights(int64_t unit) const { return suffix_weights_[unit]; }
  double suffix_min_bits(int64_t unit) const { return suffix_min_bits_[unit]; }

 private:
  plan::UnitTable table_;
  double total_weights_ = 0;
  std::vector<double> min_bits_;
  std::vector<int> cheapest_;
  std::vector<double> suffix_weights_, suffix_min_bits_;  // T + 1 entries
};

class Environment {
 public:
  Environment(std::shared_ptr<const UnitCosts> costs, const EnvOptions& options);

  void Reset();
  bool done() const { return step_ >= costs_->num_units(); }
  int64_t step() const { return step_; }
  // State of the current step (kStateDim floats). Requires !done().
  void State(float* out) const;
  // Allowed actions of the current step (kNumActions bytes, 1 = allowed;
  // at least one). Requires !done().
  void Mask(uint8_t* out) const;
  // Applies `action` to the current unit and returns the step reward.
  // INVALID_ARGUMENT if done, out of range or masked.
  absl::StatusOr<float> Step(int action);

  const std::vector<int>& actions() const { return actions_; }
  double spent_bits() const { return spent_bits_; }
  double budget_bits() const { return budget_bits_; }
  // Effective bits of the actions so far (sum bits / sum n over all units).
  double EffectiveBits() const { return spent_bits_ / costs_->total_weights(); }
  const EnvOptions& options() const { return options_; }

 private:
  EpisodeContext Context() const;

  std::shared_ptr<const UnitCosts> costs_;
  EnvOptions options_;
  double budget_bits_;
  int64_t step_ = 0;
  double spent_bits_ = 0;
  std::vector<int> actions_;
};

// N finished episodes.
struct Rollout {
  std::vector<std::vector<Transition>> episodes;  // [episode][step]
  std::vector<std::vector<int>> plans;            // action index per unit (repaired in repair mode)
  std::vector<double> effective_bits;             // of `plans`
  std::vector<double> step_return;                // sum of step rewards per episode
};

class BatchedEnvironment {
 public:
  BatchedEnvironment(std::shared_ptr<const UnitCosts> costs, const EnvOptions& options,
                     int num_envs);

  // Runs num_envs episodes to the end with `policy` (one Act per step over
  // all episodes). Transitions carry the policy's version and episode ids
  // first_episode_id, first_episode_id + 1, ...
  absl::StatusOr<Rollout> Run(const Policy& policy, at::Generator& generator, bool deterministic,
                              int64_t first_episode_id);

  int num_envs() const { return static_cast<int>(envs_.size()); }

 private:
  std::shared_ptr<const UnitCosts> costs_;
  std::vector<Environment> envs_;
};

// The effective bits of the actions an episode chose (its transitions' actions,
// one per unit): in repair mode, before the repair. NaN when the steps do not
// cover the table's units or an action is out of range.
double ChosenBits(const plan::UnitTable& table, const std::vector<Transition>& steps);

// What an episode's reward and lambda are charged with (the actor sends its
// bits as v1::Plan.charged_bits, the evaluator's rl::EpisodeRewarder charges them):
// its plan's evaluation `measured`, with, in the repair budget mode, the bits
// its steps chose (when they cover the table).
PlanEvaluation ChargedEvaluation(const EnvironmentOptions& env, const plan::UnitTable& table,
                                 const std::vector<Transition>& steps, PlanEvaluation measured);

// The transitions of one episode that follows `plan` (e.g. a baseline's):
// states, masks, actions and step rewards; log_prob/value are 0.
// INVALID_ARGUMENT if the plan has the wrong length or an action is masked.
absl::StatusOr<std::vector<Transition>> ReplayPlan(std::shared_ptr<const UnitCosts> costs,
                                                   const EnvOptions& options,
                                                   const std::vector<int>& plan);

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_ENVIRONMENT_H_
