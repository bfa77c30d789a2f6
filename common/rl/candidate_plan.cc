#include "common/rl/candidate_plan.h"

#include <cmath>

namespace windquant::rl {
namespace {

// Plans may sit exactly on the budget; the sums behind EffectiveBits round.
constexpr double kFeasibleBitsSlack = 1e-9;

}  // namespace

bool ConsiderCandidate(const CandidatePlan& candidate, double final_target, CandidatePlan* best,
                       CandidatePlan* best_stage) {
  const PlanEvaluation& e = candidate.evaluation;
  if (!std::isfinite(e.eval_ppl)) return false;
  auto better = [&](const CandidatePlan& c) {
    return c.actions.empty() || e.eval_ppl < c.evaluation.eval_ppl;
  };
  bool changed = false;
  if (e.effective_bits <= final_target + kFeasibleBitsSlack && better(*best)) {
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
