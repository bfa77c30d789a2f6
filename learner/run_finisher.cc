#include "learner/run_finisher.h"

#include <cmath>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/config/run_digest.h"
#include "common/plan/plan_io.h"
#include "common/report/html_report.h"
#include "common/report/report_data.h"
#include "common/rl/run_checkpoint.h"
#include "common/search/bisection_result.h"
#include "common/search/search_result.h"
#include "learner/run_records.h"

namespace windquant::learner {
namespace {

namespace fs = std::filesystem;

report::ReportData MakeReport(const FinishOptions& c, const rl::RunResult& r,
                              const plan::UnitTable& table, const std::string& run_id,
                              const FinalRows& rows) {
  const double nan = std::nan("");
  auto finite = [nan](double x) { return std::isfinite(x) ? x : nan; };
  report::ReportData d;
  const fs::path model_dir = fs::path(c.model_dir).lexically_normal();
  d.model_name = model_dir.has_filename() ? model_dir.filename().string()
                                          : model_dir.parent_path().filename().string();
  d.fingerprint = config::RunFingerprint(table.fingerprint, c.run_defining_text);
  const rl::PlanEvaluation& e = r.best.evaluation;
  d.fp_perplexity = finite(e.eval_ppl / (1.0 + e.relative_ppl_increase));
  d.target_bits = c.target_bits;
  for (size_t i = 0; i < table.units.size(); ++i) {
    const plan::Unit& u = table.units[i];
    d.units.push_back(
        {u.layer, u.matrix, u.n(), u.bits[r.best.actions[i]] / static_cast<double>(u.n())});
  }
  d.points.push_back({report::kRlLabel, e.effective_bits, finite(e.eval_ppl)});
  d.winner = report::kRlLabel;
  if (!r.reference.actions.empty()) {
    const rl::PlanEvaluation& ref = r.reference.evaluation;
    d.points.push_back({"lagrange", ref.effective_bits, finite(ref.eval_ppl)});
    if (ref.eval_ppl < e.eval_ppl && ref.effective_bits <= d.target_bits + 1e-9) {
      d.winner = "lagrange";
    }
  }
  for (size_t i = 1; i < rows.rows.size(); ++i) {  // the searches, on the same slice
    d.points.push_back({rows.rows[i].name, rows.rows[i].bits, finite(rows.rows[i].selection_ppl)});
  }
  for (const rl::UpdateRecord& u : r.curve) {
    report::TrainingRow row;
    row.update = u.update;
    row.mean_reward = u.mean_reward;
    row.best_perplexity = u.best_ppl > 0 ? u.best_ppl : nan;
    row.bits = u.mean_bits;
    row.lambda = u.lambda;
    row.target_bits = u.target_bits;
    row.mean_perplexity = u.mean_ppl;
    d.curve.push_back(row);
  }
  d.wall_time_s = r.seconds;
  d.notes.push_back(absl::StrFormat(
      "Distributed run %s: perplexities are the evaluator's, on the selection slice of %s "
      "(evaluation.selection); FP from the best plan's relative increase.",
      run_id, c.selection.text));
  d.notes.push_back(
      absl::StrFormat("Best plan from %s at update %d; %d updates, lambda %.4f%s.", r.best.source,
                      r.best.update, r.updates, r.lambda,
                      r.resumed_from_update >= 0
                          ? absl::StrFormat("; resumed from update %d", r.resumed_from_update)
                          : ""));
  d.notes.push_back(absl::StrFormat(
      "Returned plan: %s (%s of RL, the searches and the bisections). The "
      "searches: (1+1) local search from the Lagrangian plan with restarts, and the same "
      "search screened by the reward model RL uses, each given the RL run's %d real plan "
      "evaluations, measured by the evaluator on the selection slice.%s%s",
      rows.origin,
      c.max_ppl_increase > 0 ? "the fewest bits within epsilon on the selection slice"
                             : "the lowest selection perplexity",
      rows.rl_evaluations,
      rows.searches_note.empty() ? "" : absl::StrCat(" ", rows.searches_note, "."),
      rows.heldout_note.empty() ? "" : absl::StrCat(" ", rows.heldout_note, ".")));
  return d;
}

// The quality-target mode's parts of the report (as `windquant quantize`
// writes them, job/quantize_report.cc): epsilon, every measured plan's d on
// the selection slice (plans.jsonl) and the final rows, and report.json's
// "quality_target". FP's held-out perplexity is not measured here, so the
// held-out degradation is null and the note says so.
void AddQualityTarget(const FinishOptions& c, const rl::RunResult& r, const FinalRows& rows,
                      report::ReportData* d, nlohmann::json* j) {
  const double eps = c.max_ppl_increase;
  const double fp = d->fp_perplexity;
  auto degradation = [fp](double ppl) {
    const double x = ppl / fp - 1.0;
    return fp > 0 && std::isfinite(x) ? x : std::nan("");
  };
  d->max_ppl_increase = eps;
  for (const RunRecords::RecordedPlan& p : RunRecords(c.records_dir).RecordedPlans()) {
    d->measured.push_back({p.effective_bits, degradation(p.perplexity), ""});
  }
  for (size_t i = 0; i < rows.rows.size(); ++i) {
    const FinalRow& row = rows.rows[i];
    d->measured.push_back({row.bits, degradation(row.selection_ppl),
                           i == rows.returned ? row.name + " (returned)" : row.name});
  }
  const FinalRow& returned = rows.rows[rows.returned];
  const double sel = degradation(returned.selection_ppl);
  nlohmann::json lambdas = nlohmann::json::array();
  for (const rl::UpdateRecord& u : r.curve) lambdas.push_back(u.lambda);
  nlohmann::json q = {
      {"max_ppl_increase", eps},
      {"cap_bits", c.target_bits},
      {"compared_at_bits", r.best.evaluation.effective_bits},
      {"returned",
       {{"plan", returned.name},
        {"bits", returned.bits},
        {"selection_degradation", std::isfinite(sel) ? nlohmann::json(sel) : nlohmann::json()},
        {"heldout_degradation", nullptr}}},
      {"within_epsilon", std::isfinite(sel) && sel <= eps},
      {"heldout_note", "the distributed evaluator does not measure FP on the held-out text"},
      {"lambda_per_update", lambdas},
      {"lambda_final", r.lambda}};
  if (c.start.has_value()) q["rl_start"] = RunStartJson(*c.start);
  // Every row that chose its plan on the selection slice, with its real evaluations
  // (quantize's quality_target.methods; rows: RL, the searches, the bisections).
  std::vector<int64_t> evaluations = {rows.rl_evaluations};
  for (const FinalSearch& s : rows.searches) evaluations.push_back(s.result.evaluations);
  for (const FinalBisection& b : rows.bisections) evaluations.push_back(b.result.evaluations);
  q["methods"] = nlohmann::json::array();
  for (size_t i = 0; i < rows.rows.size() && i < evaluations.size(); ++i) {
    const double dm = degradation(rows.rows[i].selection_ppl);
    q["methods"].push_back(
        {{"plan", rows.rows[i].name},
         {"bits", rows.rows[i].bits},
         {"evaluations", evaluations[i]},
         {"selection_degradation", std::isfinite(dm) ? nlohmann::json(dm) : nlohmann::json()},
         {"heldout_degradation", nullptr}});
  }
  for (const FinalBisection& b : rows.bisections) {
    d->notes.push_back(search::BisectionNote(b.name, b.result, c.target_bits, rows.rl_evaluations));
  }
  if (!(std::isfinite(sel) && sel <= eps)) {
    q["note"] =
        "no measured plan was within epsilon on the selection slice: the returned plan is the "
        "least degraded one measured";
    d->notes.push_back(
        absl::StrCat("NO measured plan was within epsilon on the selection "
                     "slice: the returned plan (",
                     returned.name, ") is the least degraded one measured."));
  }
  (*j)["quality_target"] = q;
}

// The store manifest's metadata: the returned plan (its origin as "source"
// and "returned_plan_origin"), its perplexity on the held-out text when
// measured (else the selection slice), and the evaluation counts.
std::map<std::string, std::string> ManifestMetadata(const rl::RunResult& r, const FinalRows& rows,
                                                    const plan::Plan& plan, double target) {
  const FinalRow& returned = rows.rows[rows.returned];
  const bool heldout = returned.heldout_tokens > 0;
  std::map<std::string, std::string> m = {
      {"effective_bits", absl::StrFormat("%.6f", returned.bits)},
      {"perplexity",
       absl::StrFormat("%.6f", heldout ? returned.heldout_ppl : returned.selection_ppl)},
      {"perplexity_on", heldout ? "held-out text" : "evaluation slice"},
      {"selection_perplexity", absl::StrFormat("%.6f", returned.selection_ppl)},
      {"plan_id", plan.plan_id},
      {"source", rows.origin},
      {"returned_plan_origin", rows.origin},
      {"rl_real_evaluations", absl::StrCat(r.real_evaluations)},
      {"update", absl::StrCat(r.best.update)},
      {"target_bits", absl::StrFormat("%g", target)}};
  for (const FinalSearch& s : rows.searches) {
    m[absl::StrCat(search::SearchRowKey(s.name), "_evaluations")] =
        absl::StrCat(s.result.evaluations);
  }
  for (const FinalBisection& b : rows.bisections) {
    m[absl::StrCat(search::SearchRowKey(b.name), "_evaluations")] =
        absl::StrCat(b.result.evaluations);
  }
  return m;
}

// report.json's uniform anchors, measured through the evaluator (MeasureAnchors);
// when they cannot be, a note says why.
void AddUniformAnchors(const FinishOptions& c, const plan::UnitTable& table, nlohmann::json* j) {
  if (!c.measure || c.anchors.empty()) return;
  absl::StatusOr<nlohmann::json> anchors = MeasureAnchors(c.anchors, table, c.measure);
  if (anchors.ok()) {
    (*j)["uniform_anchors"] = *std::move(anchors);
    (*j)["uniform_anchors_note"] = kAnchorsNote;
    return;
  }
  const std::string note =
      absl::StrCat("uniform anchors not measured: ", anchors.status().message());
  (*j)["uniform_anchors_note"] = note;
  if (c.log) c.log(absl::StrCat("finish: ", note));
}

}  // namespace

absl::StatusOr<FinalArtifacts> WriteFinalArtifacts(const rl::RunResult& r,
                                                   const plan::UnitTable& table,
                                                   const std::string& run_id,
                                                   const std::string& dir_name,
                                                   const FinishOptions& options) {
  const FinishOptions& c = options;
  const base::LogSink& log = options.log;
  const fs::path dir(dir_name);
  const double target = c.target_bits;
  WQ_ASSIGN_OR_RETURN(const FinalRows rows,
                      MeasureFinalRows(r, table, target, c.searches, c.bisections, c.searches_note,
                                       c.measure, c.max_ppl_increase));
  const FinalRow& returned = rows.rows[rows.returned];
  plan::Plan plan = plan::Plan::Make(table, returned.actions, rows.origin, target);
  if (rows.returned == 0) plan.policy_version = r.best.policy_version;
  WQ_RETURN_IF_ERROR(plan::WritePlanFiles(plan, table, dir.string()));
  FinalArtifacts out;
  out.entries = {"plan.json", "plan.bin", "report.json", "report.html"};
  out.metadata = ManifestMetadata(r, rows, plan, target);

  report::ReportData data = MakeReport(c, r, table, run_id, rows);
  nlohmann::json quality_target;
  if (c.max_ppl_increase > 0) AddQualityTarget(c, r, rows, &data, &quality_target);
  WQ_RETURN_IF_ERROR(report::ValidateReportData(data));
  nlohmann::json j = nlohmann::json::parse(report::ToJson(data));
  j["run_id"] = run_id;
  j["plan_id"] = plan.plan_id;
  j["commit"] = c.commit.empty() ? "unknown" : c.commit;
  j["config_digest"] = c.config_digest;
  AddFinalRowsJson(rows, r.best.source, c.costs, &j);
  if (quality_target.is_object()) j.update(quality_target);
  AddUniformAnchors(c, table, &j);
  if (c.export_model) {
    if (options.actors.empty()) {
      return absl::FailedPreconditionError(
          "finish: output.export is on but the learner has no channels to the actors");
    }
    WQ_ASSIGN_OR_RETURN(
        const ExportSummary x,
        AssembleExport(options.export_options, options.actors, table, plan, dir.string()));
    // What was measured: the evaluator's perplexity of the plan as the actors apply it
    // (the weights the quantized checkpoint decodes to; fake_quant rounds them to F16),
    // not a reload of the exported model by the learner.
    j["exported"] = {{"model", "fake_quant"},
                     {"quantized", "quantized"},
                     {"perplexity", returned.selection_ppl},
                     {"measured_by", "evaluator"},
                     {"measured_on", "evaluation.selection"},
                     {"text", c.selection.text},
                     {"token_range", c.selection.tokens},
                     {"windows", c.selection.windows},
                     {"context", c.context},
                     {"batch", c.batch},
                     {"quantized_bytes", x.quantized_bytes},
                     {"fake_quant_bytes", x.fake_quant_bytes},
                     {"bytes_pulled_from_actors", x.pulled_bytes},
                     {"export_seconds", x.seconds}};
    out.entries.push_back("quantized");
    out.entries.push_back("fake_quant");
    out.metadata["exported_perplexity"] = absl::StrFormat("%.6f", returned.selection_ppl);
    if (log) {
      log(absl::StrFormat(
          "finish: exported %s from %d stages in %.1f s (%d bytes pulled; evaluator's PPL %.4f "
          "on %s)",
          dir_name, options.actors.size(), x.seconds, x.pulled_bytes, returned.selection_ppl,
          c.selection.text));
    }
  }
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((dir / "report.json").string(), j.dump(2) + "\n"));
  WQ_RETURN_IF_ERROR(report::WriteHtmlReport(data, (dir / "report.html").string()));
  return out;
}

}  // namespace windquant::learner
