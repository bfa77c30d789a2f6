#include "learner/final_rows.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/rl/candidate_plan.h"

namespace windquant::learner {
namespace {

using nlohmann::json;

// Bits over the target allowed for sums taken in another order.
constexpr double kTargetRelativeSlack = 1e-9;

json Num(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

// The held-out numbers of every row, or none (then the note says why).
void MeasureHeldOut(const PlanMeasurer& measure, FinalRows* out) {
  for (FinalRow& row : out->rows) {
    absl::StatusOr<TextMeasurement> h = measure(row.actions, PlanText::kHeldOut);
    if (!h.ok()) {
      out->heldout_note = absl::StrCat("no held-out numbers: ", h.status().message());
      for (FinalRow& r : out->rows) {
        r.heldout_ppl = 0;
        r.heldout_tokens = 0;
      }
      return;
    }
    row.heldout_ppl = h->perplexity;
    row.heldout_tokens = h->tokens;
  }
}

size_t PickReturned(const std::vector<FinalRow>& rows, double target_bits, double max_ppl_increase,
                    double fp_selection_ppl) {
  auto better = [&](const FinalRow& a, const FinalRow& b) {
    if (max_ppl_increase <= 0) return a.selection_ppl < b.selection_ppl;
    return rl::QualityTargetBetter(a.bits, a.selection_ppl / fp_selection_ppl - 1.0, b.bits,
                                   b.selection_ppl / fp_selection_ppl - 1.0, max_ppl_increase);
  };
  size_t best = 0;
  bool found = false;
  for (size_t i = 0; i < rows.size(); ++i) {
    const FinalRow& r = rows[i];
    if (!std::isfinite(r.selection_ppl) || r.bits > target_bits * (1.0 + kTargetRelativeSlack)) {
      continue;
    }
    if (!found || better(r, rows[best])) best = i;
    found = true;
  }
  return best;
}

// whole_ppl is null: the evaluator measures the two texts apart (no whole text).
json RowJson(const FinalRow& r) {
  return {{"name", r.name},
          {"bits", r.bits},
          {"selection_ppl", Num(r.selection_ppl)},
          {"whole_ppl", nullptr},
          {"heldout_ppl", r.heldout_tokens > 0 ? Num(r.heldout_ppl) : json(nullptr)}};
}

}  // namespace

std::string PlanOrigin(const std::string& learner_source) {
  if (learner_source == "rl-greedy") return "greedy-of-policy";
  return learner_source.empty() ? "rl" : learner_source;
}

absl::StatusOr<FinalRows> MeasureFinalRows(const rl::RunResult& result,
                                           const plan::UnitTable& table, double target_bits,
                                           std::vector<FinalSearch> searches,
                                           std::vector<FinalBisection> bisections,
                                           const std::string& searches_note,
                                           const PlanMeasurer& measure, double max_ppl_increase) {
  if (result.best.actions.empty()) {
    return absl::FailedPreconditionError("finish: the run has no feasible plan");
  }
  FinalRows out;
  out.rl_evaluations = result.real_evaluations;
  out.searches_note = searches_note;
  out.rows.push_back({"rl", result.best.actions});
  for (const FinalSearch& s : searches) out.rows.push_back({s.name, s.result.actions});
  for (const FinalBisection& b : bisections) out.rows.push_back({b.name, b.result.actions});
  out.searches = std::move(searches);
  out.bisections = std::move(bisections);
  const rl::PlanEvaluation& e = result.best.evaluation;
  const double fp_selection_ppl = e.eval_ppl / (1.0 + e.relative_ppl_increase);
  // As the run, the searches and the bisections measured them (the same evaluator and slice).
  auto measured_before = [&](size_t i) {
    if (i == 0) return e.eval_ppl;
    if (i <= out.searches.size()) return out.searches[i - 1].result.selection_ppl;
    return fp_selection_ppl *
           (1.0 + out.bisections[i - 1 - out.searches.size()].result.degradation);
  };
  std::string failed;  // the first failed measurement
  for (size_t i = 0; i < out.rows.size(); ++i) {
    FinalRow& row = out.rows[i];
    row.bits = table.EffectiveBits(row.actions);
    row.selection_ppl = measured_before(i);
    if (!measure || !failed.empty()) continue;
    // Identical plans were measured before (the run, the searches): the evaluator's cache.
    absl::StatusOr<TextMeasurement> s = measure(row.actions, PlanText::kSelection);
    if (!s.ok()) {
      failed =
          absl::StrCat("the ", row.name, " plan on the selection slice: ", s.status().message());
      for (size_t k = 0; k < i; ++k) out.rows[k].selection_ppl = measured_before(k);
      continue;
    }
    row.selection_ppl = s->perplexity;
  }
  if (!measure) {
    out.heldout_note = "no held-out numbers: no evaluator to measure them";
  } else if (!failed.empty()) {
    out.heldout_note = absl::StrCat("no held-out numbers: ", failed);
  } else {
    MeasureHeldOut(measure, &out);
  }
  out.returned = PickReturned(out.rows, target_bits, max_ppl_increase, fp_selection_ppl);
  out.origin = out.returned == 0 ? PlanOrigin(result.best.source) : out.rows[out.returned].name;
  return out;
}

void AddFinalRowsJson(const FinalRows& f, const std::string& rl_source,
                      const EvaluationCosts& costs, json* report) {
  json& j = *report;
  json plans = json::array();
  for (const FinalRow& r : f.rows) plans.push_back(RowJson(r));
  plans[0]["origin"] = PlanOrigin(rl_source);
  j["plans"] = plans;
  const FinalRow& returned = f.rows[f.returned];
  j["returned_plan_origin"] = f.origin;
  j["returned"] = RowJson(returned);
  j["returned"].erase("name");
  j["returned"]["plan"] = returned.name;
  j["returned"]["origin"] = f.origin;
  j["rl_real_evaluations"] = f.rl_evaluations;  // the whole run's, resumes included
  j["rl_cost"] =
      search::EvaluationCostJson(f.rl_evaluations, costs.rl_tokens, std::max(1, costs.rl_screen));
  j["heldout_tokens"] = f.rows[0].heldout_tokens;
  if (!f.heldout_note.empty()) j["heldout_note"] = f.heldout_note;
  if (!f.searches_note.empty()) j["searches_note"] = f.searches_note;
  for (const FinalSearch& q : f.searches) {
    j[search::SearchRowKey(q.name)] =
        search::SearchRowJson(q.result, f.rl_evaluations, q.seed, costs.search_tokens);
  }
  for (const FinalBisection& b : f.bisections) {
    j[search::SearchRowKey(b.name)] =
        search::BisectionRowJson(b.result, f.rl_evaluations, costs.search_tokens);
  }
}

absl::StatusOr<json> MeasureAnchors(const std::vector<FinalRow>& anchors,
                                    const plan::UnitTable& table, const PlanMeasurer& measure) {
  std::vector<FinalRow> rows = anchors;
  for (FinalRow& r : rows) {
    r.bits = table.EffectiveBits(r.actions);
    WQ_ASSIGN_OR_RETURN(const TextMeasurement s, measure(r.actions, PlanText::kSelection));
    WQ_ASSIGN_OR_RETURN(const TextMeasurement h, measure(r.actions, PlanText::kHeldOut));
    r.selection_ppl = s.perplexity;
    r.heldout_ppl = h.perplexity;
    r.heldout_tokens = h.tokens;
  }
  json out = json::array();
  for (size_t i = 0; i + 1 < rows.size(); i += 2) {
    const FinalRow &u = rows[i], &l = rows[i + 1];
    out.push_back({{"uniform", RowJson(u)},
                   {"lagrange", RowJson(l)},
                   {"lagrange_over_uniform",
                    u.heldout_ppl > 0 ? Num(l.heldout_ppl / u.heldout_ppl) : json(nullptr)}});
  }
  return out;
}

}  // namespace windquant::learner
