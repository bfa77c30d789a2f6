// The Lagrange multiplier of the episode-end reward's constraint (DESIGN.md
// section 4; what it prices and why: docs/lagrange.md):
//
//   lambda <- clip(lambda + eta * (g - epsilon), 0, lambda_max)
//
// g = ConstraintValue of a sampled episode's plan: with lagrange.prices
// "quality" the relative perplexity increase d = PPL_plan / PPL_fp - 1 (lambda
// scales the penalty lambda * d); with "budget" (soft budget mode) the overrun
// bits - target (lambda is the reward price of one bit over the target, the
// penalty lambda * (bits - target)); with "target" (the quality-target mode)
// g = d again and epsilon is the maximum d: lambda settles at the exchange
// rate of bits for quality, the penalty lambda * (d - epsilon). lambda grows while g exceeds
// epsilon and shrinks otherwise (EpisodeEndReward, episode_reward.h). Thread-compatible.
#ifndef WINDQUANT_COMMON_RL_LAGRANGE_H_
#define WINDQUANT_COMMON_RL_LAGRANGE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/rl/lagrange_options.h"
#include "common/rl/plan_evaluation.h"

namespace windquant::rl {

// The constraint value g of one evaluated plan at `target_bits` (above).
double ConstraintValue(const LagrangeOptions& options, const PlanEvaluation& evaluation,
                       double target_bits);

class LagrangeMultiplier {
 public:
  explicit LagrangeMultiplier(const LagrangeOptions& options)
      : options_(options), lambda_(options.lambda_init) {}

  // Applies the update above for one constraint value g and returns the new
  // lambda. A non-finite g counts as lambda_max pressure (lambda goes to lambda_max).
  double Update(double constraint_value);

  double lambda() const { return lambda_; }
  void set_lambda(double lambda) { lambda_ = lambda; }
  const LagrangeOptions& options() const { return options_; }

 private:
  LagrangeOptions options_;
  double lambda_;
};

// The lambda of the episode-end rewards of PPO batches, kept by its one owner,
// the evaluator (evaluator::EvaluationQueue, DESIGN.md section 4: "the
// evaluator updates lambda and pushes it"): every episode of batch k (the
// episodes the learner's k-th PPO update trains on) is rewarded with the same
// lambda_k, the one in effect when the batch began (lambda_0 = lambda_init);
// every measured g of the batch's episodes (its ConstraintValue) updates the
// multiplier (Observe) in the order the learner accepted them, and EndBatch()
// (the learner ran the update) makes the updated value lambda_{k+1}. So an
// episode's reward does not depend on the order evaluations finish, only on
// its batch. Candidate plans (reference, greedy) neither use nor move lambda.
// Every lambda_k is kept (8 bytes per PPO update), so that the owner can go
// back to the batch a restarted learner resumes at (Rewind).
// Thread-compatible.
class BatchLambda {
 public:
  explicit BatchLambda(const LagrangeOptions& options)
      : multiplier_(options), history_{multiplier_.lambda()} {}

  // The open batch: the PPO updates run so far.
  int64_t batch() const { return static_cast<int64_t>(history_.size()) - 1; }
  // lambda_k of the open batch k, for every episode of it.
  double batch_lambda() const { return history_.back(); }
  // The multiplier after the g's observed so far (= batch_lambda() right after EndBatch).
  double lambda() const { return multiplier_.lambda(); }
  // What lambda() would be after Observe(g), without observing it: the next
  // batch's lambda when g is the last of its batch.
  double Preview(double constraint_value) const;
  // One constraint value g of an episode of the open batch.
  void Observe(double constraint_value) { multiplier_.Update(constraint_value); }
  // The batch is complete: the next batch uses the updated lambda. Returns it.
  double EndBatch() {
    history_.push_back(multiplier_.lambda());
    return history_.back();
  }
  // Back to the start of an earlier (or the open) batch, with its lambda and no
  // g observed: what a learner restarted from its checkpoint at `batch`
  // updates continues with. False (nothing changed) for a batch not reached.
  bool Rewind(int64_t batch);
  // Continues at `batch` with `lambda` when this owner never reached it (its
  // state was lost): lambda_k of the batches in between are unknown (Rewind to
  // them answers false).
  void Adopt(int64_t batch, double lambda);
  const LagrangeOptions& options() const { return multiplier_.options(); }

  // The whole state as text (exact: doubles in hexadecimal), for the owner's
  // file; Parse answers INVALID_ARGUMENT for text Serialize did not write.
  std::string Serialize() const;
  absl::Status Parse(std::string_view text);

 private:
  LagrangeMultiplier multiplier_;
  std::vector<double> history_;  // lambda_0 .. lambda_k of the open batch k; NaN = unknown
};

}  // namespace windquant::rl

#endif  // WINDQUANT_COMMON_RL_LAGRANGE_H_
