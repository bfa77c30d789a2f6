#include "job/plan_measurement.h"

#include <cmath>

#include "common/base/status_macros.h"
#include "common/rl/candidate_plan.h"

namespace windquant::job {

bool HasHeldOut(const EvaluationSlices& slices, int64_t context) {
  return static_cast<int64_t>(slices.heldout.size()) >= context;
}

absl::Status MeasurePlan(rl::LocalPlanEvaluator& evaluator, const EvaluationSlices& slices,
                         bool have_heldout, MeasuredPlan* m) {
  WQ_ASSIGN_OR_RETURN(model::PerplexityResult s, evaluator.Measure(m->actions, slices.selection));
  m->selection_ppl = s.perplexity;
  double nll = s.total_nll, tokens = static_cast<double>(s.tokens);
  if (have_heldout) {
    WQ_ASSIGN_OR_RETURN(model::PerplexityResult h, evaluator.Measure(m->actions, slices.heldout));
    m->heldout_ppl = h.perplexity;
    nll += h.total_nll;
    tokens += static_cast<double>(h.tokens);
  }
  m->whole_ppl = std::exp(nll / tokens);
  return absl::OkStatus();
}

std::string PickWinner(const std::vector<MeasuredPlan>& plans, double target_bits,
                       bool have_heldout) {
  std::string winner;
  double winner_ppl = 1e300;
  for (auto it = plans.rbegin(); it != plans.rend(); ++it) {
    const double ppl = have_heldout ? it->heldout_ppl : it->whole_ppl;
    if (it->bits <= target_bits + kSameBitsTolerance && ppl < winner_ppl) {
      winner_ppl = ppl;
      winner = it->name;
    }
  }
  return winner;
}

double SelectionDegradation(const MeasuredPlan& plan, double fp_selection_ppl) {
  const double d = plan.selection_ppl / fp_selection_ppl - 1.0;
  return fp_selection_ppl > 0 && std::isfinite(d) ? d : std::nan("");
}

int PickReturned(const std::vector<MeasuredPlan>& plans, const std::vector<std::string>& candidates,
                 double target_bits, double max_ppl_increase, double fp_selection_ppl) {
  auto better = [&](const MeasuredPlan& a, const MeasuredPlan& b) {
    if (max_ppl_increase <= 0) return a.selection_ppl < b.selection_ppl;
    return rl::QualityTargetBetter(a.bits, SelectionDegradation(a, fp_selection_ppl), b.bits,
                                   SelectionDegradation(b, fp_selection_ppl), max_ppl_increase);
  };
  int best = -1;
  for (const std::string& name : candidates) {
    for (size_t i = 0; i < plans.size(); ++i) {
      const MeasuredPlan& m = plans[i];
      if (m.name != name || !std::isfinite(m.selection_ppl) ||
          m.bits > target_bits * (1.0 + 1e-9)) {
        continue;
      }
      if (best < 0 || better(m, plans[best])) best = static_cast<int>(i);
    }
  }
  return best;
}

}  // namespace windquant::job
