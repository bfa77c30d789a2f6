#include "job/baseline_run.h"

#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"
#include "common/base/text_range.h"
#include "common/search/baselines.h"
#include "job/measured_proxy.h"
#include "job/search_baseline.h"

namespace windquant::job {

namespace {

absl::StatusOr<std::vector<int32_t>> SelectionIds(const quant::QuantizationSession& session,
                                                  const base::TextRange& selection_range) {
  return base::ReadWindows(
      selection_range, "evaluation.selection",
      [&tok = session.tokenizer()](std::string_view text) {
        return tok.Encode(text, /*add_bos=*/false);
      },
      session.options().context - 1);
}

// A plan's perplexity on `ids` (which must outlive it).
PlanMeasure PerplexityOn(const quant::QuantizationSession& session,
                         const std::vector<int32_t>& ids) {
  return [&session, &ids](const std::vector<int>& actions) -> absl::StatusOr<double> {
    WQ_ASSIGN_OR_RETURN(model::PerplexityResult r, session.Perplexity(actions, ids, 0));
    return r.perplexity;
  };
}

}  // namespace

absl::StatusOr<plan::Plan> SearchSessionPlan(const quant::QuantizationSession& session,
                                             const base::TextRange& selection_range,
                                             const BaselineSpec& spec, nlohmann::json* info) {
  WQ_ASSIGN_OR_RETURN(const std::vector<int32_t> selection, SelectionIds(session, selection_range));
  SearchOptions so;
  so.target_bits = spec.bits;
  so.evaluations = spec.evals;
  so.seed = spec.seed;
  so.restart_after = spec.restart_after;
  so.screen = spec.screen;
  const char* name = ProductSearchName(spec.screen);
  WQ_ASSIGN_OR_RETURN(const SearchResult r, SearchWithProgress(session.table(), so, name,
                                                               PerplexityOn(session, selection)));
  *info = {{"evaluations", r.evaluations},
           {"accepted", r.accepted},
           {"restarts", r.restarts},
           {"restart_after", spec.restart_after},
           {"screen", spec.screen},
           {"screened", r.screened},
           {"start_selection_ppl", r.start_ppl},
           {"selection_ppl", r.selection_ppl},
           {"selection_tokens", selection.size()},
           {"seed", spec.seed}};
  return session.MakePlan(r.actions, name, spec.bits);
}

absl::StatusOr<plan::Plan> MeasuredSessionPlan(const quant::QuantizationSession& session,
                                               const base::TextRange& selection_range,
                                               const BaselineSpec& spec, nlohmann::json* info,
                                               plan::UnitTable* measured_table) {
  WQ_ASSIGN_OR_RETURN(const std::vector<int32_t> selection, SelectionIds(session, selection_range));
  MeasuredProxyOptions options;
  options.target_bits = spec.bits;
  options.rounds = spec.rounds;
  WQ_ASSIGN_OR_RETURN(MeasuredProxyResult r,
                      MeasureProxy(session.table(), options, PerplexityOn(session, selection)));
  *info = {{"evaluations", r.evaluations},
           {"rounds", r.anchor_ppl.size()},
           {"max_rounds", spec.rounds},
           {"linears", r.groups},
           {"anchor_selection_ppl", r.anchor_ppl},
           {"selection_ppl", r.selection_ppl},
           {"selection_tokens", selection.size()}};
  *measured_table = std::move(r.table);
  return session.MakePlan(std::move(r.actions), "measured", spec.bits);
}

absl::StatusOr<nlohmann::json> DescribeBaseline(const quant::QuantizationSession& session,
                                                const plan::Plan& plan, const std::string& method,
                                                const DescribeOptions& options) {
  const plan::UnitTable& table = session.table();
  const plan::PlanTotals totals = plan.Totals(table);
  nlohmann::json j = {{"plan_id", plan.plan_id},
                      {"method", method},
                      {"target_bits", plan.target_bits},
                      {"effective_bits", totals.effective_bits},
                      {"whole_model_bits", totals.whole_model_bits},
                      {"proxy_error", search::ProxyError(table, plan.actions)},
                      {"units", table.units.size()},
                      {"unit_table_from_cache", session.from_cache()},
                      {"fingerprint", session.fingerprint()}};
  nlohmann::json counts = nlohmann::json::object();
  for (int a = 0; a < plan::kNumActions; ++a) {
    counts[std::string(plan::ActionName(plan::kAllActions[a]))] = totals.action_counts[a];
  }
  j["action_counts"] = counts;
  if (!options.measure) return j;
  WQ_ASSIGN_OR_RETURN(model::PerplexityResult r,
                      session.Perplexity(plan.actions, options.max_tokens));
  j["perplexity"] = r.perplexity;
  j["eval_tokens"] = r.tokens;
  j["context"] = r.context;
  if (options.with_fp) {
    WQ_ASSIGN_OR_RETURN(model::PerplexityResult fp, session.Perplexity({}, options.max_tokens));
    j["fp_perplexity"] = fp.perplexity;
  }
  return j;
}

}  // namespace windquant::job
