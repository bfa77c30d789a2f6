#include "job/quantize_job.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"
#include "common/base/output_dir.h"
#include "common/base/progress.h"
#include "common/base/status_macros.h"
#include "common/config/text_range.h"
#include "common/quant/exporter.h"
#include "common/quant/plan_io.h"
#include "common/quant/quantization_session.h"
#include "common/rl/run_checkpoint.h"
#include "job/baseline_plans.h"
#include "job/in_process_job.h"
#include "job/open_session.h"
#include "job/quantize_report.h"
#include "learner/run_publisher.h"

namespace windquant::job {
namespace {

using Log = std::function<void(const std::string&)>;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A deep copy of the FP weights (the evaluator overwrites its model's linears).
model::LlamaWeights CloneWeights(const model::LlamaWeights& w) {
  model::LlamaWeights c = w;
  for (auto& layer : c.layers) {
    for (auto& t : layer.linear) t = t.clone();
  }
  const bool tied =
      w.lm_head.defined() && w.embed_tokens.defined() && w.lm_head.is_same(w.embed_tokens);
  if (c.embed_tokens.defined()) c.embed_tokens = c.embed_tokens.clone();
  if (tied) {
    c.lm_head = c.embed_tokens;
  } else if (c.lm_head.defined()) {
    c.lm_head = c.lm_head.clone();
  }
  return c;
}

// Training: the learner, evaluator and actor services of the distributed job
// (DESIGN.md section 5), here in this process with in-process channels.
absl::StatusOr<rl::RunResult> Train(const config::RunConfig& cfg, const QuantizeOptions& options,
                                    const quant::UnitTable& table,
                                    const std::string& checkpoint_dir, const Log& log,
                                    learner::RunPublisher* publisher) {
  InProcessJobOptions jo;
  jo.log = log;
  jo.publisher = publisher;
  jo.stop_after_updates = options.stop_after_updates;
  jo.expected_table = &table;
  const std::string checkpoint = rl::RunCheckpointPath(checkpoint_dir);
  if (options.resume) {
    // A fresh incarnation: episode ids of the run before the restart stay unique.
    jo.incarnation_seed = std::random_device{}();
    if (!base::PathExists(checkpoint)) {
      log(absl::StrCat("quantize: --resume: no checkpoint in ", checkpoint_dir,
                       "; starting fresh"));
    }
  } else {
    jo.incarnation_seed = cfg.training.seed;
    if (base::PathExists(checkpoint)) {
      log(absl::StrCat("quantize: ", checkpoint,
                       " exists and will be overwritten (use --resume to continue it)"));
    }
    WQ_RETURN_IF_ERROR(ClearJobState(cfg));
  }
  config::RunConfig job_config = cfg;
  if (!options.use_cache) job_config.quant.cache_dir.clear();  // the actors' fit caches too
  return RunInProcessJob(job_config, jo);
}

// The search baseline at `target` with the RL run's count of real
// evaluations, each on the selection slice.
absl::StatusOr<SearchResult> Search(const quant::UnitTable& table, double target, uint64_t seed,
                                    int64_t evaluations, rl::LocalPlanEvaluator& evaluator,
                                    const EvaluationSlices& slices, const Log& log) {
  SearchOptions so;
  so.target_bits = target;
  so.evaluations = std::max<int64_t>(1, evaluations);
  so.seed = seed;
  base::Progress progress("search", static_cast<double>(so.evaluations), "plans");
  int64_t measured = 0;
  PlanMeasure measure = [&](const std::vector<int>& actions) -> absl::StatusOr<double> {
    WQ_ASSIGN_OR_RETURN(model::PerplexityResult r, evaluator.Measure(actions, slices.selection));
    progress.Update(static_cast<double>(++measured));
    return r.perplexity;
  };
  WQ_ASSIGN_OR_RETURN(SearchResult r, SearchPlan(table, so, measure));
  progress.Finish(absl::StrFormat("best %.4f (start %.4f)", r.selection_ppl, r.start_ppl));
  log(absl::StrFormat(
      "quantize: search baseline: %d plans measured (RL: %d), %d accepted, selection PPL "
      "%.4f -> %.4f",
      r.evaluations, evaluations, r.accepted, r.start_ppl, r.selection_ppl));
  return r;
}

// The RL plan, then (when asked) every baseline at the target, all measured.
absl::Status MeasureAll(const quant::UnitTable& table, const rl::RunResult& tr,
                        const QuantizeOptions& options, double target, uint64_t seed,
                        rl::LocalPlanEvaluator& evaluator, const EvaluationSlices& slices,
                        const Log& log, QuantizeResult* out) {
  out->plans.push_back({"rl", tr.best.actions});
  if (options.baselines) {
    WQ_ASSIGN_OR_RETURN(auto baselines, BaselinesAt(table, target, seed));
    for (auto& [name, plan] : baselines) out->plans.push_back({name, std::move(plan.actions)});
    WQ_ASSIGN_OR_RETURN(out->search,
                        Search(table, target, seed, out->rl_evaluations, evaluator, slices, log));
    out->plans.push_back({"search", out->search.actions});
  }
  out->fp.name = "fp";
  out->fp.bits = 16;
  WQ_RETURN_IF_ERROR(MeasurePlan(evaluator, slices, out->have_heldout, &out->fp));
  for (MeasuredPlan& m : out->plans) {
    m.bits = table.EffectiveBits(m.actions);
    WQ_RETURN_IF_ERROR(MeasurePlan(evaluator, slices, out->have_heldout, &m));
  }
  return absl::OkStatus();
}

// plan.json / plan.bin and (when asked) the quantized and fake-quant
// checkpoints; returns the fake-quant directory ("" when not exported).
absl::StatusOr<std::string> WriteArtifacts(const quant::QuantizationSession& session,
                                           const config::RunConfig& cfg, const rl::RunResult& tr,
                                           double target, bool export_model) {
  quant::Plan plan = ReturnedPlan(session.table(), tr, target);
  WQ_RETURN_IF_ERROR(quant::WritePlanFiles(plan, session.table(), cfg.output.dir));
  if (!export_model) return std::string();
  quant::ExportInputs in;
  in.weights = &session.model().weights();
  in.stats = &session.activation_stats();
  in.table = &session.table();
  in.fits = &session.fits();
  in.plan = &plan;
  in.quantizer.salient_fraction = cfg.quant.salient_fraction;
  in.model_dir = cfg.model.dir;
  const std::filesystem::path d(cfg.output.dir);
  // Each checkpoint folder is replaced whole (a rerun's), never half-written.
  WQ_RETURN_IF_ERROR(base::WriteDirAtomic(
      (d / "quantized").string(), true,
      [&](const std::string& t) { return quant::WriteQuantizedCheckpoint(in, t); }));
  WQ_RETURN_IF_ERROR(base::WriteDirAtomic(
      (d / "fake_quant").string(), true,
      [&](const std::string& t) { return quant::WriteFakeQuantCheckpoint(in, t); }));
  return (d / "fake_quant").string();
}

// The loss slice (start of the calibration range), the selection slice and
// the held-out text (the session's eval ids), each from its own text role.
absl::StatusOr<EvaluationSlices> Slices(const config::RunConfig& cfg,
                                        const quant::QuantizationSession& session) {
  const config::TextEncoder encode = [&tok = session.tokenizer()](std::string_view text) {
    return tok.Encode(text, /*add_bos=*/false);
  };
  WQ_ASSIGN_OR_RETURN(
      std::vector<int32_t> calibration,
      config::ReadTextRange(config::CalibrationRange(cfg.calibration), "calibration", encode));
  WQ_ASSIGN_OR_RETURN(
      std::vector<int32_t> selection,
      config::ReadTextRange(cfg.evaluation.selection, "evaluation.selection", encode));
  return SliceEvaluationText(cfg.evaluation, std::move(calibration), std::move(selection),
                             session.eval_ids());
}

// The run in the store (output.store): a new one, or with --resume the one
// found again (its checkpoint restored when output.dir has none).
absl::StatusOr<std::unique_ptr<learner::RunPublisher>> OpenStore(const config::RunConfig& cfg,
                                                                 const QuantizeOptions& options,
                                                                 const Log& log) {
  if (cfg.output.store.empty()) return nullptr;
  learner::RunPublisherOptions po;
  po.s3 = options.s3;
  po.fresh = !options.resume;
  po.log = log;
  return learner::RunPublisher::Open(cfg, po);
}

// The result as the run's "final" plan; waits (bounded) for the store.
absl::Status PushResult(const config::RunConfig& cfg, const QuantizeOptions& options,
                        const QuantizeResult& out, learner::RunPublisher& publisher, bool exported,
                        const Log& log) {
  std::vector<std::string> entries = {"plan.json", "plan.bin", "report.json", "report.html"};
  if (exported) {
    entries.push_back("quantized");
    entries.push_back("fake_quant");
  }
  const MeasuredPlan& rl = out.plans.front();
  const double ppl = out.have_heldout ? rl.heldout_ppl : rl.whole_ppl;
  publisher.PublishFinal(
      cfg.output.dir, entries,
      {{"effective_bits", absl::StrFormat("%.6f", rl.bits)},
       {"perplexity", absl::StrFormat("%.6f", ppl)},
       {"perplexity_on", out.have_heldout ? "held-out text" : "whole text"},
       {"source", "rl"},
       {"winner", out.winner},
       {"target_bits", absl::StrFormat("%g", cfg.curriculum.target_bits.back())}});
  if (!publisher.Flush(options.store_timeout)) {
    return absl::UnavailableError(
        absl::StrCat("quantize: the result is in ", cfg.output.dir, " but ", publisher.Describe(),
                     " did not take it within ", absl::FormatDuration(options.store_timeout),
                     " (see the store lines above); push it with `windquant plans push`"));
  }
  log(absl::StrCat("quantize: result pushed to ", publisher.Describe(), "plans/final"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<QuantizeResult> RunQuantizeJob(const config::RunConfig& cfg,
                                              const QuantizeOptions& options) {
  const auto t0 = options.start;
  const Log log = options.log ? options.log : [](const std::string&) {};
  WQ_ASSIGN_OR_RETURN(auto session, OpenSession(cfg, options.use_cache, /*load_eval_text=*/true));
  const quant::UnitTable& table = session->table();
  const double prepare_s = Since(t0);
  log(absl::StrFormat("quantize: %d units, %d quantized weights, unit table %s (%.1f s)",
                      table.units.size(), table.TotalWeights(),
                      session->from_cache() ? "from cache" : "built", prepare_s));
  WQ_ASSIGN_OR_RETURN(const EvaluationSlices slices, Slices(cfg, *session));
  model::LlamaModel eval_model(CloneWeights(session->model().weights()), session->model().device());
  rl::LocalEvaluatorOptions lo;
  lo.context = cfg.evaluation.context;
  lo.batch = cfg.evaluation.batch;
  WQ_ASSIGN_OR_RETURN(auto evaluator,
                      rl::LocalPlanEvaluator::Create(&eval_model, &session->fits(), &table,
                                                     slices.calibration, slices.selection, lo));
  log(absl::StrFormat("quantize: FP PPL %.4f on the selection slice (%d tokens)",
                      evaluator->fp_eval_ppl(), slices.selection.size()));

  QuantizeResult out;
  out.checkpoint_dir = (std::filesystem::path(cfg.output.dir) / "checkpoint").string();
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<learner::RunPublisher> publisher,
                      OpenStore(cfg, options, log));
  if (publisher != nullptr) out.store_run = publisher->Describe();
  WQ_ASSIGN_OR_RETURN(rl::RunResult tr,
                      Train(cfg, options, table, out.checkpoint_dir, log, publisher.get()));
  out.updates = tr.updates;
  out.lambda = tr.lambda;
  out.origin = ReturnedPlanOrigin(tr.best.source);
  out.rl_evaluations = tr.evaluations - tr.cache_hits;
  if (tr.stopped_early) {
    out.stopped_early = true;
    if (publisher != nullptr && !publisher->Flush(options.store_timeout)) {
      log(absl::StrCat("quantize: the checkpoint did not reach ", publisher->Describe(),
                       " in time; it is in ", out.checkpoint_dir));
    }
    return out;
  }
  if (tr.best.actions.empty()) {
    return absl::FailedPreconditionError(
        "quantize: no feasible plan was found at the final target");
  }
  const double train_s = Since(t0) - prepare_s;
  const double target = cfg.curriculum.target_bits.back();
  out.have_heldout = HasHeldOut(slices, cfg.evaluation.context);
  WQ_RETURN_IF_ERROR(
      MeasureAll(table, tr, options, target, cfg.training.seed, *evaluator, slices, log, &out));
  out.winner = PickWinner(out.plans, target, out.have_heldout);

  QuantizeReport report;
  const bool export_model = options.export_model && cfg.output.export_model;
  WQ_ASSIGN_OR_RETURN(report.exported, WriteArtifacts(*session, cfg, tr, target, export_model));
  report.config = &cfg;
  report.table = &table;
  report.training = &tr;
  report.slices = &slices;
  report.fingerprint = rl::RunFingerprint(table, cfg);
  report.target_bits = target;
  report.fp = out.fp;
  report.plans = out.plans;
  report.have_heldout = out.have_heldout;
  report.winner = out.winner;
  report.origin = out.origin;
  report.rl_evaluations = out.rl_evaluations;
  if (options.baselines) report.search = &out.search;
  report.prepare_s = prepare_s;
  report.train_s = train_s;
  report.total_s = Since(t0);
  WQ_RETURN_IF_ERROR(WriteQuantizeReport(report));
  if (publisher != nullptr) {
    WQ_RETURN_IF_ERROR(PushResult(cfg, options, out, *publisher, export_model, log));
  }
  out.seconds = Since(t0);
  return out;
}

}  // namespace windquant::job
