#include "common/search/baselines.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"

namespace windquant::search {
namespace {

// The repair's budget test allows this relative slack, as the environment's
// mask does, so a plan exactly on the budget is not moved for rounding.
constexpr double kRepairRelativeSlack = 1e-12;

double TotalBits(const plan::UnitTable& t, const std::vector<int>& actions) {
  double b = 0;
  for (size_t i = 0; i < t.units.size(); ++i) b += t.units[i].bits[actions[i]];
  return b;
}

int CheapestAction(const plan::Unit& u) {
  int best = 0;
  for (int a = 1; a < plan::kNumActions; ++a) {
    if (u.bits[a] < u.bits[best] || (u.bits[a] == u.bits[best] && u.error[a] < u.error[best]))
      best = a;
  }
  return best;
}

absl::Status CheckFeasible(const plan::UnitTable& t, double target_bits) {
  if (t.units.empty()) return absl::InvalidArgumentError("baseline: empty unit table");
  const double min_bits = MinEffectiveBits(t);
  if (!(target_bits >= min_bits)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--bits %.4f is below the lowest reachable effective bits %.4f of this unit table",
        target_bits, min_bits));
  }
  return absl::OkStatus();
}

// Spends what is left of budget_total (sum of bits) on the best single-unit upgrades:
// the largest (n_u/N) * error decrease per extra bit first. `actions` must fit the budget.
void GreedyFill(const plan::UnitTable& t, double budget_total, std::vector<int>* actions) {
  const double N = static_cast<double>(t.TotalWeights());
  double remaining = budget_total - TotalBits(t, *actions);
  std::vector<int> version(t.units.size(), 0);
  using Candidate =
      std::tuple<double, int, int, int>;  // ratio, -unit (ties: low id first), action, version
  std::priority_queue<Candidate> heap;
  auto push_best = [&](size_t i) {
    const plan::Unit& u = t.units[i];
    const int cur = (*actions)[i];
    double best_ratio = 0;
    int best = -1;
    for (int a = 0; a < plan::kNumActions; ++a) {
      const double dbits = u.bits[a] - u.bits[cur];
      const double derr = (u.error[cur] - u.error[a]) * static_cast<double>(u.n()) / N;
      if (dbits <= 0 || derr <= 0 || dbits > remaining) continue;
      const double ratio = derr / dbits;
      if (ratio > best_ratio) {
        best_ratio = ratio;
        best = a;
      }
    }
    if (best >= 0) heap.emplace(best_ratio, -static_cast<int>(i), best, version[i]);
  };
  for (size_t i = 0; i < t.units.size(); ++i) push_best(i);
  while (!heap.empty()) {
    const auto [ratio, neg_i, a, ver] = heap.top();
    heap.pop();
    const size_t i = static_cast<size_t>(-neg_i);
    if (ver != version[i]) continue;
    const double dbits = t.units[i].bits[a] - t.units[i].bits[(*actions)[i]];
    if (dbits > remaining) {  // no longer fits: the unit's best upgrade that does
      ++version[i];
      push_best(i);
      continue;
    }
    (*actions)[i] = a;
    remaining -= dbits;
    ++version[i];
    push_best(i);
  }
}

}  // namespace

std::vector<int> RepairToBudget(const plan::UnitTable& t, std::vector<int> actions,
                                double target_bits, RepairOrder order) {
  const double N = static_cast<double>(t.TotalWeights());
  const double budget = target_bits * N * (1.0 + kRepairRelativeSlack);
  double total = TotalBits(t, actions);
  if (total <= budget) return actions;
  // The unit's step down: its most expensive strictly cheaper action (ties to
  // the lower error), or -1 at its cheapest.
  auto next_cheaper = [&](int i) {
    const plan::Unit& u = t.units[i];
    const int cur = actions[i];
    int next = -1;
    for (int a = 0; a < plan::kNumActions; ++a) {
      if (u.bits[a] >= u.bits[cur]) continue;
      if (next < 0 || u.bits[a] > u.bits[next] ||
          (u.bits[a] == u.bits[next] && u.error[a] < u.error[next])) {
        next = a;
      }
    }
    return next;
  };
  auto step = [&](int i, int a) {
    total -= t.units[i].bits[actions[i]] - t.units[i].bits[a];
    actions[i] = a;
  };
  if (order == RepairOrder::kWalk) {
    for (int i = static_cast<int>(t.units.size()) - 1; i >= 0 && total > budget; --i) {
      for (int a = next_cheaper(i); a >= 0 && total > budget; a = next_cheaper(i)) step(i, a);
    }
    return actions;
  }
  // Min-heap of (error added per bit saved, unit, cheaper action): one entry per unit.
  using Step = std::tuple<double, int, int>;
  std::priority_queue<Step, std::vector<Step>, std::greater<Step>> heap;
  auto push_step = [&](int i) {
    const int next = next_cheaper(i);
    if (next < 0) return;
    const plan::Unit& u = t.units[i];
    const int cur = actions[i];
    const double derr = (u.error[next] - u.error[cur]) * static_cast<double>(u.n()) / N;
    heap.emplace(derr / (u.bits[cur] - u.bits[next]), i, next);
  };
  for (size_t i = 0; i < t.units.size(); ++i) push_step(static_cast<int>(i));
  while (total > budget && !heap.empty()) {
    const auto [cost, i, a] = heap.top();
    heap.pop();
    step(i, a);
    push_step(i);
  }
  return actions;
}

namespace {

std::vector<int> LagrangeChoice(const plan::UnitTable& t, double mu) {
  const double N = static_cast<double>(t.TotalWeights());
  std::vector<int> out(t.units.size());
  for (size_t i = 0; i < t.units.size(); ++i) {
    const plan::Unit& u = t.units[i];
    const double w = static_cast<double>(u.n()) / N;
    int best = 0;
    double best_cost = w * u.error[0] + mu * u.bits[0] / N;
    for (int a = 1; a < plan::kNumActions; ++a) {
      const double cost = w * u.error[a] + mu * u.bits[a] / N;
      if (cost < best_cost || (cost == best_cost && u.bits[a] < u.bits[best])) {
        best_cost = cost;
        best = a;
      }
    }
    out[i] = best;
  }
  return out;
}

}  // namespace

double ProxyError(const plan::UnitTable& t, const std::vector<int>& actions) {
  const double N = static_cast<double>(t.TotalWeights());
  double e = 0;
  for (size_t i = 0; i < t.units.size() && i < actions.size(); ++i) {
    e += static_cast<double>(t.units[i].n()) / N * t.units[i].error[actions[i]];
  }
  return e;
}

std::vector<int> CheapestActions(const plan::UnitTable& t) {
  std::vector<int> a(t.units.size());
  for (size_t i = 0; i < t.units.size(); ++i) a[i] = CheapestAction(t.units[i]);
  return a;
}

double MinEffectiveBits(const plan::UnitTable& t) { return t.EffectiveBits(CheapestActions(t)); }

plan::Plan UniformPlan(const plan::UnitTable& t, plan::Action action) {
  std::vector<int> a(t.units.size(), plan::ActionIndex(action));
  const double bits = t.EffectiveBits(a);
  return plan::Plan::Make(t, std::move(a), "uniform", bits);
}

absl::StatusOr<plan::Plan> GreedyPlan(const plan::UnitTable& t, double target_bits) {
  if (absl::Status st = CheckFeasible(t, target_bits); !st.ok()) return st;
  std::vector<int> a = CheapestActions(t);
  GreedyFill(t, target_bits * static_cast<double>(t.TotalWeights()), &a);
  return plan::Plan::Make(t, std::move(a), "greedy", target_bits);
}

absl::StatusOr<plan::Plan> LagrangePlan(const plan::UnitTable& t, double target_bits) {
  if (absl::Status st = CheckFeasible(t, target_bits); !st.ok()) return st;
  const double budget = target_bits * static_cast<double>(t.TotalWeights());
  std::vector<int> best = LagrangeChoice(t, 0.0);
  if (TotalBits(t, best) > budget) {
    // Bits are non-increasing in mu: find a feasible hi, then bisect [lo, hi].
    double lo = 0.0, hi = 1e-6;
    while (TotalBits(t, LagrangeChoice(t, hi)) > budget && hi < 1e30) hi *= 2;
    best = LagrangeChoice(t, hi);
    if (TotalBits(t, best) > budget) {  // mu large enough: every unit at its cheapest action
      best = CheapestActions(t);
    }
    for (int it = 0; it < 200 && hi - lo > 1e-15 * hi; ++it) {
      const double mid = 0.5 * (lo + hi);
      std::vector<int> c = LagrangeChoice(t, mid);
      if (TotalBits(t, c) <= budget) {
        hi = mid;
        best = std::move(c);
      } else {
        lo = mid;
      }
    }
  }
  GreedyFill(t, budget, &best);
  return plan::Plan::Make(t, std::move(best), "lagrange", target_bits);
}

absl::StatusOr<plan::Plan> RandomPlan(const plan::UnitTable& t, double target_bits, uint64_t seed) {
  if (absl::Status st = CheckFeasible(t, target_bits); !st.ok()) return st;
  const double budget = target_bits * static_cast<double>(t.TotalWeights());
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick_action(0, plan::kNumActions - 1);
  std::vector<int> a(t.units.size());
  for (int& x : a) x = pick_action(rng);
  double total = TotalBits(t, a);
  std::vector<size_t> above;  // units above their cheapest action
  for (size_t i = 0; i < a.size(); ++i) {
    if (t.units[i].bits[a[i]] > t.units[i].bits[CheapestAction(t.units[i])]) above.push_back(i);
  }
  while (total > budget && !above.empty()) {
    const size_t k = std::uniform_int_distribution<size_t>(0, above.size() - 1)(rng);
    const size_t i = above[k];
    const plan::Unit& u = t.units[i];
    std::vector<int> cheaper;
    for (int b = 0; b < plan::kNumActions; ++b) {
      if (u.bits[b] < u.bits[a[i]]) cheaper.push_back(b);
    }
    const int b = cheaper[std::uniform_int_distribution<size_t>(0, cheaper.size() - 1)(rng)];
    total += u.bits[b] - u.bits[a[i]];
    a[i] = b;
    if (u.bits[b] <= u.bits[CheapestAction(u)]) {
      above[k] = above.back();
      above.pop_back();
    }
  }
  return plan::Plan::Make(t, std::move(a), "random", target_bits);
}

absl::StatusOr<std::vector<std::pair<std::string, plan::Plan>>> UniformAnchors(
    const plan::UnitTable& table) {
  std::vector<std::pair<std::string, plan::Plan>> out;
  for (plan::Action a : kAnchorActions) {
    const std::string name = absl::StrCat("uniform-", std::string(plan::ActionName(a)));
    plan::Plan uniform = UniformPlan(table, a);
    WQ_ASSIGN_OR_RETURN(plan::Plan lagrange,
                        LagrangePlan(table, table.EffectiveBits(uniform.actions)));
    out.emplace_back(name, std::move(uniform));
    out.emplace_back(absl::StrCat("lagrange@", name), std::move(lagrange));
  }
  return out;
}

}  // namespace windquant::search
