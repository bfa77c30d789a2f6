#include "job/search_baseline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/quant/action.h"
#include "common/quant/baselines.h"

namespace windquant::job {
namespace {

// Proposals per requested evaluation before the search gives up (a table so
// small that few distinct feasible plans exist).
constexpr int64_t kProposalsPerEvaluation = 50;
// The budget test's relative slack, as the environment's (a plan exactly on
// the budget must not be refused for rounding in the sums).
constexpr double kBudgetRelativeSlack = 1e-12;

double TotalBits(const quant::UnitTable& t, const std::vector<int>& a) {
  double b = 0;
  for (size_t i = 0; i < a.size(); ++i) b += t.units[i].bits[a[i]];
  return b;
}

// The most expensive action of `u` strictly cheaper than `current`; -1 if none.
int OneStepDown(const quant::Unit& u, int current) {
  int best = -1;
  for (int a = 0; a < quant::kNumActions; ++a) {
    if (u.bits[a] < u.bits[current] && (best < 0 || u.bits[a] > u.bits[best])) best = a;
  }
  return best;
}

// The cheapest action of `u` strictly more expensive than `current`; -1 if none.
int OneStepUp(const quant::Unit& u, int current) {
  int best = -1;
  for (int a = 0; a < quant::kNumActions; ++a) {
    if (u.bits[a] > u.bits[current] && (best < 0 || u.bits[a] < u.bits[best])) best = a;
  }
  return best;
}

// One proposal from `incumbent` (see the header); false when no repair exists.
bool Propose(const quant::UnitTable& t, double budget, int max_moves, std::mt19937_64& rng,
             std::vector<int>* plan) {
  const int n = static_cast<int>(plan->size());
  const int k = std::uniform_int_distribution<int>(1, std::min(max_moves, n))(rng);
  std::vector<char> moved(n, 0);
  for (int m = 0; m < k; ++m) {
    int u;
    do {
      u = std::uniform_int_distribution<int>(0, n - 1)(rng);
    } while (moved[u]);
    moved[u] = 1;
    const quant::Unit& unit = t.units[u];
    const int up = OneStepUp(unit, (*plan)[u]), down = OneStepDown(unit, (*plan)[u]);
    const bool go_up = down < 0 || (up >= 0 && std::bernoulli_distribution(0.5)(rng));
    (*plan)[u] = go_up ? up : down;
  }
  double total = TotalBits(t, *plan);
  std::vector<int> down;  // units that may still step down
  for (int u = 0; u < n; ++u) {
    if (!moved[u] && OneStepDown(t.units[u], (*plan)[u]) >= 0) down.push_back(u);
  }
  while (total > budget) {
    if (down.empty()) return false;
    const size_t i = std::uniform_int_distribution<size_t>(0, down.size() - 1)(rng);
    const int u = down[i];
    const int a = OneStepDown(t.units[u], (*plan)[u]);
    total += t.units[u].bits[a] - t.units[u].bits[(*plan)[u]];
    (*plan)[u] = a;
    if (OneStepDown(t.units[u], a) < 0) {
      down[i] = down.back();
      down.pop_back();
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<SearchResult> SearchPlan(const quant::UnitTable& table, const SearchOptions& options,
                                        const PlanMeasure& measure) {
  if (options.evaluations < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--evals: must be >= 1 (plans to measure), got ", options.evaluations));
  }
  if (options.max_moves < 1) return absl::InvalidArgumentError("search: max_moves must be >= 1");
  WQ_ASSIGN_OR_RETURN(quant::Plan start, quant::LagrangePlan(table, options.target_bits));
  const double budget = options.target_bits * static_cast<double>(table.TotalWeights()) *
                        (1.0 + kBudgetRelativeSlack);
  std::mt19937_64 rng(options.seed);
  std::map<std::vector<int>, double> seen;  // every measured plan
  SearchResult r;
  auto evaluate = [&](const std::vector<int>& plan) -> absl::StatusOr<double> {
    WQ_ASSIGN_OR_RETURN(const double ppl, measure(plan));
    seen.emplace(plan, ppl);
    ++r.evaluations;
    return ppl;
  };
  WQ_ASSIGN_OR_RETURN(r.start_ppl, evaluate(start.actions));
  r.actions = start.actions;
  // A non-finite perplexity (a broken plan) is never better than anything.
  r.selection_ppl = std::isfinite(r.start_ppl) ? r.start_ppl : HUGE_VAL;
  r.best_after.push_back(r.selection_ppl);
  const int64_t max_proposals = kProposalsPerEvaluation * options.evaluations;
  while (r.evaluations < options.evaluations && r.proposals < max_proposals) {
    ++r.proposals;
    std::vector<int> candidate = r.actions;
    if (!Propose(table, budget, options.max_moves, rng, &candidate)) continue;
    if (seen.count(candidate)) {
      ++r.repeats;
      continue;
    }
    WQ_ASSIGN_OR_RETURN(const double ppl, evaluate(candidate));
    if (std::isfinite(ppl) && ppl < r.selection_ppl) {
      r.actions = std::move(candidate);
      r.selection_ppl = ppl;
      ++r.accepted;
    }
    r.best_after.push_back(r.selection_ppl);
  }
  return r;
}

}  // namespace windquant::job
