#include "common/rl/episode_reward.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace windquant::rl {
namespace {

// Stand-in for a non-finite measurement in the reward (a plan that broke the
// model): large enough to be the worst outcome, finite so PPO stays numeric.
constexpr double kBrokenPlanPenalty = 1e3;

double Finite(double x) { return std::isfinite(x) ? x : kBrokenPlanPenalty; }

}  // namespace

EpisodeReward EpisodeEndReward(const EnvironmentOptions& env, const PlanEvaluation& e,
                               double lambda, double target_bits, const LagrangeOptions& lagrange) {
  EpisodeReward r;
  r.bit_reduction = (16.0 - e.effective_bits) / 16.0;
  r.violation = std::max(0.0, e.effective_bits - target_bits);
  if (lagrange.quality_target()) {  // formula in the header: the paper's Lagrangian
    r.total = env.bit_reduction_weight * r.bit_reduction -
              env.violation_penalty_weight * r.violation -
              lambda * (Finite(e.relative_ppl_increase) - lagrange.epsilon);
    return r;
  }
  const std::string& prices = lagrange.prices;
  // DESIGN.md section 4, episode-end reward (formula documented in the header).
  r.total = env.bit_reduction_weight * r.bit_reduction -
            env.loss_penalty_weight * Finite(e.loss_increase) -
            env.violation_penalty_weight * r.violation -
            env.ppl_penalty_weight * (prices == "budget" ? 1.0 : lambda) *
                Finite(e.relative_ppl_increase);
  if (prices == "budget") r.total -= lambda * (e.effective_bits - target_bits);
  return r;
}

}  // namespace windquant::rl
