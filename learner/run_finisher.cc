#include "learner/run_finisher.h"

#include <ATen/ATen.h>

#include <cmath>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/config/text_range.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_model.h"
#include "common/model/perplexity.h"
#include "common/model/tokenizer.h"
#include "common/quant/exporter.h"
#include "common/quant/plan_io.h"
#include "common/quant/quantization_session.h"
#include "common/report/html_report.h"
#include "common/report/report_data.h"
#include "common/rl/run_checkpoint.h"

namespace windquant::learner {
namespace {

namespace fs = std::filesystem;

struct ExportedPerplexity {
  std::string model;  // the directory measured, relative to the final dir
  double perplexity = 0, fp_perplexity = 0;
  int64_t tokens = 0;
};

// The perplexity of the checkpoint in `model_dir` on the evaluation text, as
// `windquant eval --model` measures it (job/text_perplexity.cc).
absl::StatusOr<model::PerplexityResult> CheckpointPerplexity(const config::RunConfig& c,
                                                             const std::string& model_dir) {
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<model::Tokenizer> tokenizer,
                      model::Tokenizer::FromFile(model_dir + "/tokenizer.json"));
  const config::TextEncoder encode = [&tok = *tokenizer](std::string_view text) {
    return tok.Encode(text, /*add_bos=*/false);
  };
  WQ_ASSIGN_OR_RETURN(const std::vector<int32_t> ids,
                      config::ReadTextRange(c.evaluation.heldout, "evaluation.heldout", encode));
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<model::Checkpoint> checkpoint,
                      model::Checkpoint::Open(model_dir));
  WQ_ASSIGN_OR_RETURN(model::LlamaWeights weights, checkpoint->LoadWeights(model::LoadRequest{}));
  std::unique_ptr<model::LlamaModel> llama;
  try {
    llama = std::make_unique<model::LlamaModel>(std::move(weights),
                                                at::hasCUDA() ? at::Device(at::kCUDA) : at::kCPU);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(model_dir, ": cannot build the model: ", e.what()));
  }
  model::PerplexityOptions options;
  options.context = c.evaluation.context;
  options.batch_size = c.evaluation.batch;
  return model::ComputePerplexity(*llama, ids, options);
}

// quantized/ and fake_quant/ from the run config's session; the fake-quant
// model's perplexity.
absl::StatusOr<ExportedPerplexity> Export(const config::RunConfig& c, const quant::Plan& plan,
                                          const quant::UnitTable& table, const fs::path& dir,
                                          const base::LogSink& log) {
  // The config's session (as job::SessionOptionsFrom maps it).
  quant::SessionOptions so;
  so.model_dir = c.model.dir;
  so.device = c.model.device;
  so.calibration = c.calibration;
  so.units = c.quant;
  so.cache_dir = c.quant.cache_dir;
  so.heldout = c.evaluation.heldout;
  so.context = c.evaluation.context;
  so.batch = c.evaluation.batch;
  so.log = log;
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<quant::QuantizationSession> session,
                      quant::QuantizationSession::Create(so));
  if (session->table().fingerprint != table.fingerprint) {
    return absl::FailedPreconditionError(
        absl::StrCat("export: the run's unit table (fingerprint ", table.fingerprint.substr(0, 12),
                     ") is not the config's (", session->table().fingerprint.substr(0, 12), ")"));
  }
  const quant::ExportInputs in = session->ExportInputsFor(plan);
  WQ_RETURN_IF_ERROR(quant::WriteQuantizedCheckpoint(in, (dir / "quantized").string()));
  WQ_RETURN_IF_ERROR(quant::WriteFakeQuantCheckpoint(in, (dir / "fake_quant").string()));
  ExportedPerplexity out;
  out.model = "fake_quant";
  WQ_ASSIGN_OR_RETURN(model::PerplexityResult q,
                      CheckpointPerplexity(c, (dir / "fake_quant").string()));
  out.perplexity = q.perplexity;
  out.tokens = q.tokens;
  WQ_ASSIGN_OR_RETURN(model::PerplexityResult fp, CheckpointPerplexity(c, c.model.dir));
  out.fp_perplexity = fp.perplexity;
  return out;
}

report::ReportData MakeReport(const config::RunConfig& c, const rl::RunResult& r,
                              const quant::UnitTable& table, const std::string& run_id) {
  const double nan = std::nan("");
  auto finite = [nan](double x) { return std::isfinite(x) ? x : nan; };
  report::ReportData d;
  const fs::path model_dir = fs::path(c.model.dir).lexically_normal();
  d.model_name = model_dir.has_filename() ? model_dir.filename().string()
                                          : model_dir.parent_path().filename().string();
  d.fingerprint = rl::RunFingerprint(table, c);
  const rl::PlanEvaluation& e = r.best.evaluation;
  d.fp_perplexity = finite(e.eval_ppl / (1.0 + e.relative_ppl_increase));
  d.target_bits = c.curriculum.target_bits.back();
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
      run_id, c.evaluation.selection.text));
  d.notes.push_back(
      absl::StrFormat("Best plan from %s at update %d; %d updates, lambda %.4f%s.", r.best.source,
                      r.best.update, r.updates, r.lambda,
                      r.resumed_from_update >= 0
                          ? absl::StrFormat("; resumed from update %d", r.resumed_from_update)
                          : ""));
  return d;
}

}  // namespace

absl::StatusOr<FinalArtifacts> WriteFinalArtifacts(
    const config::RunConfig& c, const rl::RunResult& r, const quant::UnitTable& table,
    const std::string& run_id, const std::string& dir_name, const base::LogSink& log) {
  if (r.best.actions.empty()) {
    return absl::FailedPreconditionError("finish: the run has no feasible plan");
  }
  const fs::path dir(dir_name);
  const double target = c.curriculum.target_bits.back();
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
                  {"update", absl::StrCat(r.best.update)},
                  {"target_bits", absl::StrFormat("%g", target)}};

  const report::ReportData data = MakeReport(c, r, table, run_id);
  WQ_RETURN_IF_ERROR(report::ValidateReportData(data));
  nlohmann::json j = nlohmann::json::parse(report::ToJson(data));
  j["run_id"] = run_id;
  j["plan_id"] = plan.plan_id;
  if (c.output.export_model) {
    try {
      WQ_ASSIGN_OR_RETURN(ExportedPerplexity x, Export(c, plan, table, dir, log));
      j["exported"] = {{"model", x.model},
                       {"text", c.evaluation.heldout.text},
                       {"context", c.evaluation.context},
                       {"batch", c.evaluation.batch},
                       {"token_range", c.evaluation.heldout.tokens},
                       {"tokens", x.tokens},
                       {"perplexity", x.perplexity},
                       {"fp_perplexity", x.fp_perplexity}};
      out.entries.push_back("quantized");
      out.entries.push_back("fake_quant");
      out.metadata["exported_perplexity"] = absl::StrFormat("%.6f", x.perplexity);
      if (log) {
        log(absl::StrFormat("finish: exported %s (PPL %.4f on %s, FP %.4f)", dir_name, x.perplexity,
                            c.evaluation.heldout.text, x.fp_perplexity));
      }
    } catch (const c10::Error& err) {
      return absl::InternalError(absl::StrCat("finish: export: ", err.what_without_backtrace()));
    }
  }
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((dir / "report.json").string(), j.dump(2) + "\n"));
  WQ_RETURN_IF_ERROR(report::WriteHtmlReport(data, (dir / "report.html").string()));
  return out;
}

}  // namespace windquant::learner
