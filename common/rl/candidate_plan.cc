#include "common/rl/candidate_plan.h"

#include <cmath>

namespace windquant::rl {
namespace {

// Plans may sit exactly on the budget; the sums behind EffectiveBits round.
constexpr double kFeasibleBitsSlack = 1e-9;

}  // namespace

bool QualityTargetBetter(double bits, double d, double other_bits, double other_d, double epsilon) {
  const bool within = std::isfinite(d) && d <= epsilon;
  const bool other_within = std::isfinite(other_d) && other_d <= epsilon;
  if (within != other_within) return within;
  if (!std::isfinite(d)) return false;
  if (!std::isfinite(other_d)) return true;
  if (!within) return d < other_d || (d == other_d && bits < other_bits);
  if (std::abs(bits - other_bits) > kFeasibleBitsSlack) return bits < other_bits;
  return d < other_d;
}

bool ConsiderCandidate(const CandidatePlan& candidate, double final_target, CandidatePlan* best,
                       CandidatePlan* best_stage, double max_ppl_increase) {
  const PlanEvaluation& e = candidate.evaluation;
  if (!std::isfinite(e.eval_ppl)) return false;
  auto better = [&](const CandidatePlan& c) {
    return c.actions.empty() || e.eval_ppl < c.evaluation.eval_ppl;
  };
  auto better_best = [&](const CandidatePlan& c) {
    if (max_ppl_increase <= 0 || c.actions.empty()) return better(c);
    return QualityTargetBetter(e.effective_bits, e.relative_ppl_increase,
                               c.evaluation.effective_bits, c.evaluation.relative_ppl_increase,
                               max_ppl_increase);
  };
  bool changed = false;
  if (e.effective_bits <= final_target + kFeasibleBitsSlack && better_best(*best)) {
    *best = candidate;
    best->target_bits = final_target;
    changed = true;
  }
  if (best_stage != nullptr && candidate.source != "lagrange" &&
      e.effective_bits <= candidate.target_bits + kFeasibleBitsSlack && better(*best_stage)) {
    *best_stage = candidate;
  }
  return changed;
}

}  // namespace windquant::rl
