#include "job/quantize_job.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"
#include "common/base/output_dir.h"
#include "common/base/status_macros.h"
#include "common/base/text_range.h"
#include "common/config/run_digest.h"
#include "common/export/exporter.h"
#include "common/plan/plan_io.h"
#include "common/quant/quantization_session.h"
#include "common/rl/run_checkpoint.h"
#include "common/search/baselines.h"
#include "job/baseline_plans.h"
#include "job/in_process_job.h"
#include "job/learner_options.h"
#include "job/open_session.h"
#include "job/quantize_report.h"
#include "learner/run_publisher.h"

namespace windquant::job {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Training: the learner, evaluator and actor services of the distributed job
// (DESIGN.md section 5), here in this process with in-process channels.
// The actors use the session's weights (one copy in the process) and, when
// the session has no fits yet, hand theirs over in `actor_fits`.
absl::StatusOr<rl::RunResult> Train(const config::RunConfig& cfg, const QuantizeOptions& options,
                                    const quant::QuantizationSession& session,
                                    const std::string& checkpoint_dir, const base::LogSink& log,
                                    learner::RunPublisher* publisher, ActorFits* actor_fits) {
  InProcessJobOptions jo;
  jo.log = log;
  jo.publisher = publisher;
  jo.stop_after_updates = options.stop_after_updates;
  jo.expected_table = session.fitted() ? &session.table() : nullptr;
  jo.expected_fingerprint = session.table_fingerprint();
  jo.shared_weights = &session.model().weights();
  jo.actor_fits = session.fitted() ? nullptr : actor_fits;
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

// Where and how the final rows are measured, from the run config.
struct RowSettings {
  double target = 0;            // the rows' bits (CompareAtBits)
  double cap = 0;               // the final curriculum target
  double max_ppl_increase = 0;  // > 0: the quality-target mode's epsilon
  uint64_t seed = 0;            // training.seed
  int screen = 0;               // the screened rows' (ScreenedSearchScreen)
};

// A search row at `target` with the RL run's count of real evaluations, each
// on the selection slice: "search" (screen 0, restarts) or "screened-search".
absl::StatusOr<SearchResult> Search(const plan::UnitTable& table, double target, uint64_t seed,
                                    int64_t evaluations, int screen,
                                    rl::LocalPlanEvaluator& evaluator,
                                    const EvaluationSlices& slices, const base::LogSink& log) {
  return RunProductSearch(
      table, target, seed, evaluations, screen,
      [&](const std::vector<int>& actions) -> absl::StatusOr<double> {
        WQ_ASSIGN_OR_RETURN(model::PerplexityResult r,
                            evaluator.Measure(actions, slices.selection));
        return r.perplexity;
      },
      log, "quantize");
}

// The quality-target mode's bisections over bits to epsilon under `cap`
// (bisection_baseline.h), each with the RL run's count of real evaluations on
// the selection slice; their plans become rows of out->plans. The Lagrangian
// one is RL's start, measured before training (StartBisection).
absl::Status Bisections(const plan::UnitTable& table, const RowSettings& at,
                        rl::LocalPlanEvaluator& evaluator, const EvaluationSlices& slices,
                        const base::LogSink& log, QuantizeResult* out) {
  const PlanMeasure on_selection = [&](const std::vector<int>& actions) -> absl::StatusOr<double> {
    WQ_ASSIGN_OR_RETURN(model::PerplexityResult r, evaluator.Measure(actions, slices.selection));
    return r.perplexity;
  };
  const double fp = evaluator.fp_eval_ppl();  // the selection slice's, as RL's d
  out->lagrange_bisect = out->rl_start;       // RL's start (StartBisection) is this row
  WQ_ASSIGN_OR_RETURN(out->screened_bisect,
                      ScreenedBisect(table, at.cap, at.max_ppl_increase, out->rl_evaluations, fp,
                                     at.seed, at.screen, on_selection, log));
  out->bisected = true;
  out->plans.push_back({"lagrange-bisect", out->lagrange_bisect.actions});
  out->plans.push_back({"screened-bisect", out->screened_bisect.actions});
  return absl::OkStatus();
}

// The RL plan, then (when asked) every baseline at the target, all measured.
// In the quality-target mode `target` is the RL plan's bits (CompareAtBits)
// and the returned plan follows the mode's rule (PickReturned).
absl::Status MeasureAll(const plan::UnitTable& table, const rl::RunResult& tr,
                        const QuantizeOptions& options, const RowSettings& at,
                        rl::LocalPlanEvaluator& evaluator, const EvaluationSlices& slices,
                        const base::LogSink& log, QuantizeResult* out) {
  out->plans.push_back({"rl", tr.best.actions});
  if (options.baselines) {
    WQ_ASSIGN_OR_RETURN(auto baselines, BaselinesAt(table, at.target, at.seed));
    for (auto& [name, plan] : baselines) out->plans.push_back({name, std::move(plan.actions)});
    WQ_ASSIGN_OR_RETURN(out->search, Search(table, at.target, at.seed, out->rl_evaluations, 0,
                                            evaluator, slices, log));
    out->plans.push_back({"search", out->search.actions});
    WQ_ASSIGN_OR_RETURN(out->screened_search, Search(table, at.target, at.seed, out->rl_evaluations,
                                                     at.screen, evaluator, slices, log));
    out->plans.push_back({"screened-search", out->screened_search.actions});
    if (at.max_ppl_increase > 0) {
      WQ_RETURN_IF_ERROR(Bisections(table, at, evaluator, slices, log, out));
    }
    WQ_ASSIGN_OR_RETURN(auto anchors, search::UniformAnchors(table));
    for (auto& [name, plan] : anchors) out->anchors.push_back({name, std::move(plan.actions)});
  }
  out->fp.name = "fp";
  out->fp.bits = 16;
  WQ_RETURN_IF_ERROR(MeasurePlan(evaluator, slices, out->have_heldout, &out->fp));
  for (auto* rows : {&out->plans, &out->anchors}) {
    for (MeasuredPlan& m : *rows) {
      m.bits = table.EffectiveBits(m.actions);
      WQ_RETURN_IF_ERROR(MeasurePlan(evaluator, slices, out->have_heldout, &m));
    }
  }
  // The returned plan: the RL run's unless a search measured lower on the selection slice
  // (in the quality-target mode: the mode's order, the bisections too, under the cap).
  const int returned = PickReturned(
      out->plans, {"rl", "search", "screened-search", "lagrange-bisect", "screened-bisect"}, at.cap,
      at.max_ppl_increase, out->fp.selection_ppl);
  if (returned > 0) {
    out->returned = out->plans[returned].name;
    out->origin = out->returned;
  }
  return absl::OkStatus();
}

// The bits the final rows are measured at: the final target in the
// fixed-budget mode; in the quality-target mode the RL plan's own bits, so
// that the baselines and the searches (which spend the bits they are given)
// are compared with it at the same bits. The mode's own comparison, the
// bisections of bits to epsilon (Bisections), is measured beside these rows.
double CompareAtBits(const config::RunConfig& cfg, const rl::RunResult& tr,
                     const base::LogSink& log) {
  const double cap = cfg.curriculum.target_bits.back();
  const double eps = cfg.lagrange.max_ppl_increase();
  if (eps <= 0) return cap;
  const rl::PlanEvaluation& e = tr.best.evaluation;
  log(absl::StrFormat(
      "quantize: quality target %g: RL's plan has %.4f bits (cap %g) and d %.4f on the selection "
      "slice%s; the baselines and searches are measured at its bits",
      eps, e.effective_bits, cap, e.relative_ppl_increase,
      e.relative_ppl_increase <= eps ? ""
                                     : " (NO measured plan was within epsilon: this is the "
                                       "least degraded one)"));
  return e.effective_bits;
}

// plan.json / plan.bin and (when asked) the quantized and fake-quant
// checkpoints; returns the fake-quant directory ("" when not exported).
absl::StatusOr<std::string> WriteArtifacts(const quant::QuantizationSession& session,
                                           const config::RunConfig& cfg, const rl::RunResult& tr,
                                           const QuantizeResult& out, double target,
                                           bool export_model) {
  plan::Plan plan = ReturnedPlan(session.table(), tr, target);
  if (out.returned != "rl") {  // a search's plan
    for (const MeasuredPlan& m : out.plans) {
      if (m.name == out.returned)
        plan = plan::Plan::Make(session.table(), m.actions, m.name, target);
    }
  }
  WQ_RETURN_IF_ERROR(plan::WritePlanFiles(plan, session.table(), cfg.output.dir));
  if (!export_model) return std::string();
  const exporter::ExportInputs in = exporter::SessionExportInputs(session, plan);
  const std::filesystem::path d(cfg.output.dir);
  // Each checkpoint folder is replaced whole (a rerun's), never half-written.
  WQ_RETURN_IF_ERROR(base::WriteDirAtomic(
      (d / "quantized").string(), true,
      [&](const std::string& t) { return exporter::WriteQuantizedCheckpoint(in, t); }));
  WQ_RETURN_IF_ERROR(base::WriteDirAtomic(
      (d / "fake_quant").string(), true,
      [&](const std::string& t) { return exporter::WriteFakeQuantCheckpoint(in, t); }));
  return (d / "fake_quant").string();
}

// Gives the session the fits the actors built (the same calibration, so the
// same fits); fits here only when that is not possible.
absl::Status TakeActorFits(quant::QuantizationSession& session, const ActorFits& actor_fits,
                           const base::LogSink& log) {
  if (session.fitted()) return absl::OkStatus();
  absl::StatusOr<std::pair<quant::StageFits, quant::ActivationStats>> merged =
      MergeActorFits(actor_fits);
  if (merged.ok()) {
    absl::Status s = session.AdoptFits(std::move(merged->first), std::move(merged->second));
    if (s.ok()) {
      log(absl::StrFormat("quantize: unit table of %d units from the actors",
                          session.table().units.size()));
      return s;
    }
    merged = s;
  }
  log(absl::StrCat("quantize: fitting the unit table here (", merged.status().message(), ")"));
  return session.Fit();
}

// The loss slice (start of the calibration range), the selection slice and
// the held-out text (the session's eval ids), each from its own text role.
absl::StatusOr<EvaluationSlices> Slices(const config::RunConfig& cfg,
                                        const quant::QuantizationSession& session) {
  const base::TextEncoder encode = [&tok = session.tokenizer()](std::string_view text) {
    return tok.Encode(text, /*add_bos=*/false);
  };
  WQ_ASSIGN_OR_RETURN(
      std::vector<int32_t> calibration,
      base::ReadTextRange(config::CalibrationRange(cfg.calibration), "calibration", encode));
  WQ_ASSIGN_OR_RETURN(std::vector<int32_t> selection,
                      base::ReadWindows(cfg.evaluation.selection, "evaluation.selection", encode,
                                        cfg.evaluation.context - 1));
  return SliceEvaluationText(cfg.evaluation, std::move(calibration), std::move(selection),
                             session.eval_ids());
}

// The plan evaluator of the final rows (and of RL's start) over the session's fits.
absl::StatusOr<std::unique_ptr<rl::LocalPlanEvaluator>> MakeEvaluator(
    const config::RunConfig& cfg, const quant::QuantizationSession& session,
    const EvaluationSlices& slices) {
  rl::LocalEvaluatorOptions lo;
  lo.context = cfg.evaluation.context;
  lo.batch = cfg.evaluation.batch;
  return rl::LocalPlanEvaluator::Create(&session.model(), &session.fits(), &session.table(),
                                        slices.calibration, slices.selection, lo);
}

// The quality-target mode's start (learner/run_start.h, docs/lagrange.md): the
// Lagrangian bisection to epsilon under the cap, measured on the selection
// slice before training. When it found a plan within epsilon, its probe's bits
// become RL's cap in `rl_cfg` (every curriculum target above them comes down to
// them), so the warm start clones that very plan and the policy starts where d
// is near epsilon instead of at the user's cap, where λ's price of d - epsilon
// has something to trade. The result is also the report's "lagrange-bisect" row.
// (The distributed learner does the same through the evaluator: learner_options.h.)
absl::StatusOr<BisectionResult> StartBisection(const config::RunConfig& cfg,
                                               const quant::QuantizationSession& session,
                                               const EvaluationSlices& slices,
                                               const base::LogSink& log,
                                               config::RunConfig* rl_cfg) {
  WQ_ASSIGN_OR_RETURN(auto evaluator, MakeEvaluator(cfg, session, slices));
  const PlanMeasure on_selection = [&](const std::vector<int>& actions) -> absl::StatusOr<double> {
    WQ_ASSIGN_OR_RETURN(model::PerplexityResult r, evaluator->Measure(actions, slices.selection));
    return r.perplexity;
  };
  const double cap = cfg.curriculum.target_bits.back();
  WQ_ASSIGN_OR_RETURN(
      BisectionResult r,
      LagrangeBisect(session.table(), cap, cfg.lagrange.max_ppl_increase(), kStartBisectEvaluations,
                     evaluator->fp_eval_ppl(), on_selection, log));
  if (!r.within_epsilon) {
    log(absl::StrFormat("quantize: RL starts at the cap %g (no Lagrangian plan within epsilon)",
                        cap));
    return r;
  }
  const double start_cap = RunStartOf(r, cap).cap_bits;
  for (double& t : rl_cfg->curriculum.target_bits) t = std::min(t, start_cap);
  log(absl::StrFormat(
      "quantize: RL starts from the Lagrangian bisection's plan: %.4f bits (d %.4f), its cap "
      "%.4f bits (the run's %g)",
      r.bits, r.degradation, r.target_bits, cap));
  return r;
}

// The run in the store (output.store): a new one, or with --resume the one
// found again (its checkpoint restored when output.dir has none).
absl::StatusOr<std::unique_ptr<learner::RunPublisher>> OpenStore(const config::RunConfig& cfg,
                                                                 const QuantizeOptions& options,
                                                                 const base::LogSink& log) {
  if (cfg.output.store.empty()) return nullptr;
  learner::RunPublisherOptions po = RunPublisherOptionsFrom(cfg);
  po.s3 = options.s3;
  po.fresh = !options.resume;
  po.log = log;
  return learner::RunPublisher::Open(std::move(po));
}

// The result as the run's "final" plan; waits (bounded) for the store.
absl::Status PushResult(const config::RunConfig& cfg, const QuantizeOptions& options,
                        const QuantizeResult& out, learner::RunPublisher& publisher, bool exported,
                        const base::LogSink& log) {
  std::vector<std::string> entries = {"plan.json", "plan.bin", "report.json", "report.html"};
  if (exported) {
    entries.push_back("quantized");
    entries.push_back("fake_quant");
  }
  const MeasuredPlan* returned = &out.plans.front();
  for (const MeasuredPlan& m : out.plans) {
    if (m.name == out.returned) returned = &m;
  }
  const double ppl = out.have_heldout ? returned->heldout_ppl : returned->whole_ppl;
  publisher.PublishFinal(
      cfg.output.dir, entries,
      {{"effective_bits", absl::StrFormat("%.6f", returned->bits)},
       {"perplexity", absl::StrFormat("%.6f", ppl)},
       {"perplexity_on", out.have_heldout ? "held-out text" : "whole text"},
       {"source", out.origin},
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

// The report of a measured run (it borrows all of these), times and export aside.
QuantizeReport MakeReport(const config::RunConfig& cfg, const plan::UnitTable& table,
                          const rl::RunResult& tr, const EvaluationSlices& slices,
                          const QuantizeResult& out, bool baselines) {
  QuantizeReport report;
  report.config = &cfg;
  report.table = &table;
  report.training = &tr;
  report.slices = &slices;
  report.fingerprint = config::RunFingerprint(table.fingerprint, cfg);
  report.target_bits = cfg.curriculum.target_bits.back();
  report.fp = out.fp;
  report.plans = out.plans;
  report.anchors = out.anchors;
  report.have_heldout = out.have_heldout;
  report.winner = out.winner;
  report.origin = out.origin;
  report.returned = out.returned;
  report.rl_evaluations = out.rl_evaluations;
  if (baselines) {
    report.search = &out.search;
    report.screened_search = &out.screened_search;
  }
  if (cfg.lagrange.quality_target()) report.rl_start = &out.rl_start;
  if (out.bisected) {
    report.lagrange_bisect = &out.lagrange_bisect;
    report.screened_bisect = &out.screened_bisect;
  }
  return report;
}

}  // namespace

absl::StatusOr<QuantizeResult> RunQuantizeJob(const config::RunConfig& cfg,
                                              const QuantizeOptions& options) {
  const auto t0 = options.start;
  const base::LogSink log = options.log ? options.log : [](const std::string&) {};
  WQ_ASSIGN_OR_RETURN(auto session, OpenSession(cfg, options.use_cache, /*load_eval_text=*/true,
                                                /*fit=*/false));
  log(absl::StrFormat("quantize: model loaded, unit table %s (%.1f s)",
                      session->from_cache() ? "from cache" : "to be fitted by the actors",
                      Since(t0)));
  QuantizeResult out;
  out.checkpoint_dir = (std::filesystem::path(cfg.output.dir) / "checkpoint").string();
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<learner::RunPublisher> publisher,
                      OpenStore(cfg, options, log));
  if (publisher != nullptr) out.store_run = publisher->Describe();
  // Read once (token ids, small): RL's start and the final rows measure on them.
  WQ_ASSIGN_OR_RETURN(const EvaluationSlices slices, Slices(cfg, *session));
  config::RunConfig rl_cfg = cfg;
  if (cfg.lagrange.quality_target()) {
    if (!session->fitted()) WQ_RETURN_IF_ERROR(session->Fit());
    WQ_ASSIGN_OR_RETURN(out.rl_start, StartBisection(cfg, *session, slices, log, &rl_cfg));
  }
  ActorFits actor_fits;
  const auto train_start = std::chrono::steady_clock::now();
  WQ_ASSIGN_OR_RETURN(rl::RunResult tr, Train(rl_cfg, options, *session, out.checkpoint_dir, log,
                                              publisher.get(), &actor_fits));
  out.updates = tr.updates;
  out.lambda = tr.lambda;
  out.origin = ReturnedPlanOrigin(tr.best.source);
  // Cache misses before a --resume too, and RL's start in this process.
  out.rl_evaluations = tr.real_evaluations + out.rl_start.evaluations;
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
  const double train_s = Since(train_start);
  WQ_RETURN_IF_ERROR(TakeActorFits(*session, actor_fits, log));
  actor_fits = ActorFits();  // the actors' copies of the fits go
  const plan::UnitTable& table = session->table();
  const double prepare_s = Since(t0) - train_s;
  WQ_ASSIGN_OR_RETURN(auto evaluator, MakeEvaluator(cfg, *session, slices));
  log(absl::StrFormat("quantize: FP PPL %.4f on the selection slice (%d tokens)",
                      evaluator->fp_eval_ppl(), slices.selection.size()));
  RowSettings at;
  at.cap = cfg.curriculum.target_bits.back();
  at.max_ppl_increase = cfg.lagrange.max_ppl_increase();
  at.target = CompareAtBits(cfg, tr, log);
  at.seed = cfg.training.seed;
  at.screen = ScreenedSearchScreen(cfg.training.screen_samples);
  out.have_heldout = HasHeldOut(slices, cfg.evaluation.context);
  WQ_RETURN_IF_ERROR(MeasureAll(table, tr, options, at, *evaluator, slices, log, &out));
  out.winner = PickWinner(out.plans, at.target, out.have_heldout);

  QuantizeReport report = MakeReport(cfg, table, tr, slices, out, options.baselines);
  report.compared_at_bits = at.target;
  report.commit = options.build_commit;
  const bool export_model = options.export_model && cfg.output.export_model;
  WQ_ASSIGN_OR_RETURN(report.exported,
                      WriteArtifacts(*session, cfg, tr, out, at.cap, export_model));
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
