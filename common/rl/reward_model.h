// A learned reward model for screening: a model of a plan's log perplexity on
// the selection slice, fitted on the plans measured so far, so that actors
// spend real evaluations on the samples it ranks best.
//   log PPL(plan) ~ bias + scale * log ProxyError(plan) + sum_u correction[u][a_u]
// The first two terms are the unit table's own guess (the error proxy the
// Lagrangian plan minimises), fitted by least squares; `correction` is an
// additive per-(unit, action) term fitted by ridge regression on the residuals
// in its dual form (kernel = the share of units on which two plans agree),
// the ridge chosen by leave-one-out error.
// Cost for n <= 256 kept plans of U units (bench/reward_model_bench.cc): Add
// O(n U) (the new plan's agreement with every kept one), Fit O(n^3 + n U),
// Predict O(U); memory n^2 doubles + n U bytes, and the model U x 7 floats
// (LLaMA-70B at chunk 64: ~97k units, a 2.7 MB model, 25 MB of kept plans).
// Thread-compatible.
#ifndef WINDQUANT_COMMON_RL_REWARD_MODEL_H_
#define WINDQUANT_COMMON_RL_REWARD_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/unit_table.h"
#include "common/rl/episode.h"
#include "common/rl/plan_evaluation.h"
#include "common/rl/policy.h"
#include "common/rl/rollout_worker.h"

namespace windquant::v1 {
class RewardModel;
}

namespace windquant::rl {

struct RewardModel {
  double bias = 0, scale = 0;
  std::vector<float> correction;   // units x plan::kNumActions, row major
  int32_t plans = 0;               // measured plans it was fitted on; 0 = no model
  std::vector<uint64_t> measured;  // rl::PlanHash of each, sorted

  bool empty() const { return plans == 0; }
  // The predicted log perplexity of `actions` (one action index per unit of
  // `table`, the table the model was fitted for).
  double Predict(const plan::UnitTable& table, const std::vector<int>& actions) const;

  void ToProto(v1::RewardModel* out) const;
  // INVALID_ARGUMENT for a non-finite number. (Whether the correction covers
  // a table is for its user to check: correction.size() == units x 7.)
  static absl::StatusOr<RewardModel> FromProto(const v1::RewardModel& in);
};

// The `keep` episodes whose plans `model` predicts best (lowest), plans not
// measured yet (model.measured) and distinct first; all of them, in order,
// when there are no more than `keep`.
std::vector<Episode> KeepBestPredicted(std::vector<Episode> episodes, size_t keep,
                                       const RewardModel& model, const plan::UnitTable& table);

// At least `samples` episodes that `worker` runs with `policy`, batch after
// batch (worker.envs() each): first the `keep` best (KeepBestPredicted), to be
// measured, then every other sample, marked screened_out with its predicted
// log perplexity (Episode::predicted_log_ppl), for PPO to learn from as well.
// Memory: every sample's transitions (~200 bytes per unit and sample).
absl::StatusOr<std::vector<Episode>> RunScreened(RolloutWorker& worker, const Policy& policy,
                                                 double target_bits, int64_t samples, size_t keep,
                                                 const RewardModel& model);

// The stand-in for the measurement of a screened-out sample (its episode-end
// reward, rl::EpisodeEndReward): eval_nll = the predicted log perplexity,
// relative_ppl_increase against `fp_eval_ppl` (the full-precision selection
// perplexity), and, since the model predicts no calibration loss, loss_increase
// = the predicted selection NLL increase over full precision.
PlanEvaluation PredictedEvaluation(double predicted_log_ppl, double effective_bits,
                                   double fp_eval_ppl);

class RewardModelFitter {
 public:
  explicit RewardModelFitter(const plan::UnitTable& table) : table_(table) {}

  // A measured plan and its perplexity; ignored when the perplexity is not
  // finite and positive or the plan does not cover the table. The model is
  // fitted on the last kMaxPlans plans (the ones near the incumbent; a bound
  // on the O(n^3) refit and the memory); every plan stays in `measured`.
  void Add(const std::vector<int>& actions, double perplexity);
  // The model of every plan added; empty while fewer than kMinPlans were.
  RewardModel Fit() const;
  // Fit(), refitted only when plans were added since the last call.
  const RewardModel& Model();
  size_t size() const { return plans_.size(); }  // kept plans

  static constexpr size_t kMinPlans = 4;
  static constexpr size_t kMaxPlans = 256;

 private:
  const plan::UnitTable& table_;
  std::vector<std::vector<uint8_t>> plans_;  // action indices
  std::vector<uint64_t> hashes_;
  std::vector<double> log_ppl_, log_proxy_;
  std::vector<std::vector<double>> agreement_;  // lower triangle, [i][j] for j <= i
  size_t added_ = 0;                            // plans added, kept or not
  RewardModel model_;
  size_t model_added_ = 0;  // added_ when model_ was fitted
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_REWARD_MODEL_H_
