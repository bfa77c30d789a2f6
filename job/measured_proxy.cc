#include "job/measured_proxy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/progress.h"
#include "common/base/status_macros.h"
#include "common/search/baselines.h"

namespace windquant::job {
namespace {

// The units of each linear (layer, matrix), in table order.
std::vector<std::vector<size_t>> Groups(const plan::UnitTable& table) {
  std::map<std::pair<int32_t, int32_t>, size_t> index;
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < table.units.size(); ++i) {
    const plan::Unit& u = table.units[i];
    const auto [it, added] = index.try_emplace({u.layer, u.matrix}, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  return groups;
}

// The uniform plan with the most bits within the target, else the cheapest action everywhere.
std::vector<int> FirstAnchor(const plan::UnitTable& table, double target_bits) {
  for (int a = 0; a < plan::kNumActions; ++a) {
    std::vector<int> uniform(table.units.size(), a);
    if (table.EffectiveBits(uniform) <= target_bits) return uniform;
  }
  return search::CheapestActions(table);
}

using Deltas = std::array<double, plan::kNumActions>;

// delta made non-increasing in the group's bits and 0 at its most expensive action.
Deltas Monotone(const plan::UnitTable& table, const std::vector<size_t>& group, Deltas delta) {
  std::array<double, plan::kNumActions> bits{};
  for (size_t i : group) {
    for (int a = 0; a < plan::kNumActions; ++a) bits[a] += table.units[i].bits[a];
  }
  std::array<int, plan::kNumActions> order{};
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return bits[x] > bits[y]; });
  double least = delta[order[0]];
  for (int a : order) least = delta[a] = std::max(delta[a], least);
  const double zero = delta[order[0]];
  for (double& d : delta) d -= zero;
  return delta;
}

// Writes a group's deltas into `out`'s errors of its units, in the shares of their
// errors in `rounding_table` (the input table).
void SplitOverUnits(const plan::UnitTable& rounding_table, const std::vector<size_t>& group,
                    const Deltas& delta, plan::UnitTable* out) {
  const double total_weights = static_cast<double>(rounding_table.TotalWeights());
  for (int a = 0; a < plan::kNumActions; ++a) {
    double rounding = 0, weights = 0;
    for (size_t i : group) {
      const plan::Unit& u = rounding_table.units[i];
      rounding += static_cast<double>(u.n()) * u.error[a];
      weights += static_cast<double>(u.n());
    }
    for (size_t i : group) {
      const plan::Unit& u = rounding_table.units[i];
      const double n = static_cast<double>(u.n());
      const double share = rounding > 0 ? n * u.error[a] / rounding : n / weights;
      out->units[i].error[a] = share * delta[a] * total_weights / n;
    }
  }
}

}  // namespace

int64_t MeasuredProxyEvaluations(const plan::UnitTable& table, int rounds) {
  const auto groups = static_cast<int64_t>(Groups(table).size());
  // The first anchor is uniform: one action per linear needs no probe.
  return rounds < 1 ? 0 : rounds * (1 + groups * plan::kNumActions) - groups + 1;
}

absl::StatusOr<MeasuredProxyResult> MeasureProxy(const plan::UnitTable& table,
                                                 const MeasuredProxyOptions& options,
                                                 const PlanMeasure& measure) {
  if (options.rounds < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--rounds: must be >= 1, got ", options.rounds));
  }
  if (options.target_bits < search::MinEffectiveBits(table)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--bits: %.4f is below the cheapest plan's %.4f effective bits",
                        options.target_bits, search::MinEffectiveBits(table)));
  }
  const std::vector<std::vector<size_t>> groups = Groups(table);
  MeasuredProxyResult r;
  r.table = table;
  r.groups = static_cast<int64_t>(groups.size());
  base::Progress progress("measured proxy",
                          static_cast<double>(MeasuredProxyEvaluations(table, options.rounds)),
                          "plans");
  int round = 0;
  auto nll = [&](const std::vector<int>& actions) -> absl::StatusOr<double> {
    WQ_ASSIGN_OR_RETURN(const double ppl, measure(actions));
    if (!std::isfinite(ppl) || ppl <= 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("measured proxy, round %d: perplexity %g", round + 1, ppl));
    }
    progress.Update(static_cast<double>(++r.evaluations));
    return std::log(ppl);
  };
  std::vector<int> anchor = FirstAnchor(table, options.target_bits);
  double base = 0;  // ln P of the anchor
  bool settled = false;
  auto keep_best = [&r](const std::vector<int>& actions, double ln_ppl) {
    if (r.actions.empty() || ln_ppl < std::log(r.selection_ppl)) {
      r.actions = actions;
      r.selection_ppl = std::exp(ln_ppl);
    }
  };
  for (; round < options.rounds && !settled; ++round) {
    WQ_ASSIGN_OR_RETURN(base, nll(anchor));
    r.anchor_ppl.push_back(std::exp(base));
    keep_best(anchor, base);
    for (const std::vector<size_t>& group : groups) {
      Deltas delta{};
      for (int a = 0; a < plan::kNumActions; ++a) {
        std::vector<int> probe = anchor;
        for (size_t i : group) probe[i] = a;
        if (probe == anchor) continue;
        WQ_ASSIGN_OR_RETURN(const double probed, nll(probe));
        delta[a] = probed - base;
      }
      SplitOverUnits(table, group, Monotone(table, group, delta), &r.table);
    }
    WQ_ASSIGN_OR_RETURN(const plan::Plan next, search::LagrangePlan(r.table, options.target_bits));
    settled = next.actions == anchor;
    anchor = next.actions;
  }
  if (!settled) {
    WQ_ASSIGN_OR_RETURN(base, nll(anchor));
    keep_best(anchor, base);
  }
  progress.Finish(absl::StrFormat(
      "%d rounds, anchors %s, plan %.4f", static_cast<int>(r.anchor_ppl.size()),
      absl::StrJoin(r.anchor_ppl, " -> ",
                    [](std::string* out, double p) { absl::StrAppendFormat(out, "%.4f", p); }),
      r.selection_ppl));
  return r;
}

}  // namespace windquant::job
