#include "job/search_baseline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/progress.h"
#include "common/base/status_macros.h"
#include "common/plan/action.h"
#include "common/rl/reward_model.h"
#include "common/search/baselines.h"

namespace windquant::job {
namespace {

// Proposals per requested evaluation before the search gives up (a table so
// small that few distinct feasible plans exist).
constexpr int64_t kProposalsPerEvaluation = 50;
// The budget test's relative slack, as the environment's (a plan exactly on
// the budget must not be refused for rounding in the sums).
constexpr double kBudgetRelativeSlack = 1e-12;
// Screening: proposals drawn per wanted distinct one before it settles for fewer.
constexpr int kDrawsPerScreen = 4;

double TotalBits(const plan::UnitTable& t, const std::vector<int>& a) {
  double b = 0;
  for (size_t i = 0; i < a.size(); ++i) b += t.units[i].bits[a[i]];
  return b;
}

// The most expensive action of `u` strictly cheaper than `current`; -1 if none.
int OneStepDown(const plan::Unit& u, int current) {
  int best = -1;
  for (int a = 0; a < plan::kNumActions; ++a) {
    if (u.bits[a] < u.bits[current] && (best < 0 || u.bits[a] > u.bits[best])) best = a;
  }
  return best;
}

// The cheapest action of `u` strictly more expensive than `current`; -1 if none.
int OneStepUp(const plan::Unit& u, int current) {
  int best = -1;
  for (int a = 0; a < plan::kNumActions; ++a) {
    if (u.bits[a] > u.bits[current] && (best < 0 || u.bits[a] < u.bits[best])) best = a;
  }
  return best;
}

// One proposal from `plan` (see the header): `kick` > 0 units moved (a
// restart), else uniform in [1, max_moves]; false when no repair exists.
bool Propose(const plan::UnitTable& t, double budget, int max_moves, int kick, std::mt19937_64& rng,
             std::vector<int>* plan) {
  const int n = static_cast<int>(plan->size());
  const int k = kick > 0 ? std::min(kick, n)
                         : std::uniform_int_distribution<int>(1, std::min(max_moves, n))(rng);
  std::vector<char> moved(n, 0);
  for (int m = 0; m < k; ++m) {
    int u;
    do {
      u = std::uniform_int_distribution<int>(0, n - 1)(rng);
    } while (moved[u]);
    moved[u] = 1;
    const plan::Unit& unit = t.units[u];
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

// The search's state between measurements.
class LocalSearch {
 public:
  LocalSearch(const plan::UnitTable& t, const SearchOptions& o, const PlanMeasure& measure)
      : t_(t),
        o_(o),
        measure_(measure),
        budget_(o.target_bits * static_cast<double>(t.TotalWeights()) *
                (1.0 + kBudgetRelativeSlack)),
        rng_(o.seed) {
    if (o.screen > 1) fitter_.emplace(t);
    r_.screen = o.screen > 1 ? o.screen : 0;
  }

  absl::StatusOr<SearchResult> Run(const std::vector<int>& start) {
    WQ_ASSIGN_OR_RETURN(r_.start_ppl, Measure(start));
    r_.actions = incumbent_ = start;
    // A non-finite perplexity (a broken plan) is never better than anything.
    r_.selection_ppl = incumbent_ppl_ = Finite(r_.start_ppl);
    r_.best_after.push_back(r_.selection_ppl);
    const int64_t max_proposals = kProposalsPerEvaluation * o_.evaluations * std::max(1, o_.screen);
    const int kick_moves = o_.kick_moves > 0 ? o_.kick_moves : 2 * o_.max_moves;
    while (r_.evaluations < o_.evaluations && r_.proposals < max_proposals) {
      const bool kick = o_.restart_after > 0 && stale_ >= o_.restart_after;
      std::vector<int> candidate;
      if (!Draw(kick ? r_.actions : incumbent_, kick ? kick_moves : 0, max_proposals, &candidate)) {
        continue;
      }
      WQ_ASSIGN_OR_RETURN(const double measured, Measure(candidate));
      const double ppl = Finite(measured);
      if (kick) {  // a restart: the incumbent whatever it measures
        ++r_.restarts;
        stale_ = 0;
        incumbent_ = candidate;
        incumbent_ppl_ = ppl;
      } else if (ppl < incumbent_ppl_) {
        ++r_.accepted;
        stale_ = 0;
        incumbent_ = candidate;
        incumbent_ppl_ = ppl;
      } else {
        ++stale_;
      }
      if (ppl < r_.selection_ppl) {
        r_.actions = std::move(candidate);
        r_.selection_ppl = ppl;
      }
      r_.best_after.push_back(r_.selection_ppl);
    }
    return std::move(r_);
  }

 private:
  static double Finite(double ppl) { return std::isfinite(ppl) ? ppl : HUGE_VAL; }

  absl::StatusOr<double> Measure(const std::vector<int>& plan) {
    WQ_ASSIGN_OR_RETURN(const double ppl, measure_(plan));
    seen_.emplace(plan, ppl);
    ++r_.evaluations;
    if (fitter_.has_value()) fitter_->Add(plan, ppl);
    return ppl;
  }

  // The next plan to measure, from `from`: the first new proposal, or with
  // screening the best-predicted of up to o_.screen distinct new ones. False
  // when none was found (counted in proposals; the caller tries again).
  bool Draw(const std::vector<int>& from, int kick, int64_t max_proposals, std::vector<int>* out) {
    const int want = std::max(1, o_.screen);
    const rl::RewardModel* model = nullptr;
    if (fitter_.has_value() && !fitter_->Model().empty()) model = &fitter_->Model();
    std::set<std::vector<int>> drawn;
    double best = HUGE_VAL;
    for (int tries = 0; tries < kDrawsPerScreen * want && r_.proposals < max_proposals; ++tries) {
      ++r_.proposals;
      std::vector<int> c = from;
      if (!Propose(t_, budget_, o_.max_moves, kick, rng_, &c)) continue;
      if (seen_.count(c) || drawn.count(c)) {
        ++r_.repeats;
        continue;
      }
      if (model == nullptr) {
        *out = std::move(c);
        return true;
      }
      const double predicted = model->Predict(t_, c);
      if (out->empty() || predicted < best) {
        best = predicted;
        *out = c;
      }
      drawn.insert(std::move(c));
      if (static_cast<int>(drawn.size()) >= want) break;
    }
    if (!drawn.empty()) r_.screened += static_cast<int64_t>(drawn.size()) - 1;
    return !out->empty();
  }

  const plan::UnitTable& t_;
  const SearchOptions& o_;
  const PlanMeasure& measure_;
  const double budget_;
  std::mt19937_64 rng_;
  std::optional<rl::RewardModelFitter> fitter_;  // screening's reward model
  std::map<std::vector<int>, double> seen_;      // every measured plan
  std::vector<int> incumbent_;
  double incumbent_ppl_ = HUGE_VAL;
  int64_t stale_ = 0;  // measured proposals in a row that did not beat the incumbent
  SearchResult r_;
};

}  // namespace

absl::StatusOr<SearchResult> SearchPlan(const plan::UnitTable& table, const SearchOptions& options,
                                        const PlanMeasure& measure) {
  if (options.evaluations < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--evals: must be >= 1 (plans to measure), got ", options.evaluations));
  }
  if (options.max_moves < 1) return absl::InvalidArgumentError("search: max_moves must be >= 1");
  if (options.restart_after < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--restart-after: must be >= 0 (0: never), got ", options.restart_after));
  }
  if (options.screen < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--screen: must be >= 0 (0: no screening), got ", options.screen));
  }
  WQ_ASSIGN_OR_RETURN(plan::Plan start, search::LagrangePlan(table, options.target_bits));
  LocalSearch search(table, options, measure);
  return search.Run(start.actions);
}

absl::StatusOr<SearchResult> SearchWithProgress(const plan::UnitTable& table,
                                                const SearchOptions& options, const char* name,
                                                const PlanMeasure& measure) {
  base::Progress progress(name, static_cast<double>(options.evaluations), "plans");
  int64_t measured = 0;
  const PlanMeasure counted = [&](const std::vector<int>& actions) -> absl::StatusOr<double> {
    WQ_ASSIGN_OR_RETURN(const double ppl, measure(actions));
    progress.Update(static_cast<double>(++measured));
    return ppl;
  };
  WQ_ASSIGN_OR_RETURN(SearchResult r, SearchPlan(table, options, counted));
  progress.Finish(absl::StrFormat("best %.4f (start %.4f)", r.selection_ppl, r.start_ppl));
  return r;
}

const char* ProductSearchName(int screen) { return screen > 1 ? "screened-search" : "search"; }

absl::StatusOr<SearchResult> RunProductSearch(const plan::UnitTable& table, double target_bits,
                                              uint64_t seed, int64_t rl_evaluations, int screen,
                                              const PlanMeasure& measure, const base::LogSink& log,
                                              const char* who) {
  const SearchOptions so =
      ProductSearchOptions(target_bits, std::max<int64_t>(1, rl_evaluations), seed, screen);
  const char* name = ProductSearchName(screen);
  WQ_ASSIGN_OR_RETURN(SearchResult r, SearchWithProgress(table, so, name, measure));
  if (log) {
    log(absl::StrFormat(
        "%s: %s: %d plans measured (RL: %d), %d accepted, %d restarts, selection PPL %.4f -> %.4f",
        who, name, r.evaluations, rl_evaluations, r.accepted, r.restarts, r.start_ppl,
        r.selection_ppl));
  }
  return r;
}

}  // namespace windquant::job
