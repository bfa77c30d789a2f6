#include "learner/run_finisher.h"

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/config/run_digest.h"
#include "common/quant/plan_io.h"
#include "common/report/html_report.h"
#include "common/report/report_data.h"
#include "common/rl/run_checkpoint.h"

namespace windquant::learner {
namespace {

namespace fs = std::filesystem;

report::ReportData MakeReport(const FinishOptions& c, const rl::RunResult& r,
                              const quant::UnitTable& table, const std::string& run_id) {
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
    const quant::Unit& u = table.units[i];
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
  return d;
}

}  // namespace

absl::StatusOr<FinalArtifacts> WriteFinalArtifacts(const rl::RunResult& r,
                                                   const quant::UnitTable& table,
                                                   const std::string& run_id,
                                                   const std::string& dir_name,
                                                   const FinishOptions& options) {
  const FinishOptions& c = options;
  const base::LogSink& log = options.log;
  if (r.best.actions.empty()) {
    return absl::FailedPreconditionError("finish: the run has no feasible plan");
  }
  const fs::path dir(dir_name);
  const double target = c.target_bits;
  quant::Plan plan = quant::Plan::Make(table, r.best.actions, r.best.source, target);
  plan.policy_version = r.best.policy_version;
  WQ_RETURN_IF_ERROR(quant::WritePlanFiles(plan, table, dir.string()));
  FinalArtifacts out;
  out.entries = {"plan.json", "plan.bin", "report.json", "report.html"};
  const rl::PlanEvaluation& e = r.best.evaluation;
  out.metadata = {{"effective_bits", absl::StrFormat("%.6f", e.effective_bits)},
                  {"perplexity", absl::StrFormat("%.6f", e.eval_ppl)},
                  {"perplexity_on", "evaluation slice"},
                  {"plan_id", plan.plan_id},
                  {"source", r.best.source},
                  {"rl_real_evaluations", absl::StrCat(r.real_evaluations)},
                  {"update", absl::StrCat(r.best.update)},
                  {"target_bits", absl::StrFormat("%g", target)}};

  const report::ReportData data = MakeReport(c, r, table, run_id);
  WQ_RETURN_IF_ERROR(report::ValidateReportData(data));
  nlohmann::json j = nlohmann::json::parse(report::ToJson(data));
  j["run_id"] = run_id;
  j["plan_id"] = plan.plan_id;
  j["returned_plan_origin"] = r.best.source;
  j["rl_real_evaluations"] = r.real_evaluations;  // the whole run's, resumes included
  if (c.export_model) {
    if (options.actors.empty()) {
      return absl::FailedPreconditionError(
          "finish: output.export is on but the learner has no channels to the actors");
    }
    WQ_ASSIGN_OR_RETURN(
        const ExportSummary x,
        AssembleExport(options.export_options, options.actors, table, plan, dir.string()));
    // What was measured: the evaluator's perplexity of this plan as the actors apply it
    // (the weights the quantized checkpoint decodes to; fake_quant rounds them to F16),
    // not a reload of the exported model by the learner.
    j["exported"] = {{"model", "fake_quant"},
                     {"quantized", "quantized"},
                     {"perplexity", e.eval_ppl},
                     {"measured_by", "evaluator"},
                     {"measured_on", "evaluation.selection"},
                     {"text", c.selection.text},
                     {"token_range", c.selection.tokens},
                     {"context", c.context},
                     {"batch", c.batch},
                     {"quantized_bytes", x.quantized_bytes},
                     {"fake_quant_bytes", x.fake_quant_bytes},
                     {"bytes_pulled_from_actors", x.pulled_bytes},
                     {"export_seconds", x.seconds}};
    out.entries.push_back("quantized");
    out.entries.push_back("fake_quant");
    out.metadata["exported_perplexity"] = absl::StrFormat("%.6f", e.eval_ppl);
    if (log) {
      log(absl::StrFormat(
          "finish: exported %s from %d stages in %.1f s (%d bytes pulled; evaluator's PPL %.4f "
          "on %s)",
          dir_name, options.actors.size(), x.seconds, x.pulled_bytes, e.eval_ppl,
          c.selection.text));
    }
  }
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((dir / "report.json").string(), j.dump(2) + "\n"));
  WQ_RETURN_IF_ERROR(report::WriteHtmlReport(data, (dir / "report.html").string()));
  return out;
}

}  // namespace windquant::learner
