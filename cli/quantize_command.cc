// `windquant quantize`: the whole WINDQuant job in one process (DESIGN.md
// sections 4-5): calibration and unit table (QuantizationSession, cached, for
// the final measurements and the export), training by the learner, evaluator
// and actor services wired with in-process gRPC channels
// (learner::RunInProcessJob: PPO with the curriculum, warm start and
// checkpoints), then the best feasible plan, every baseline at the same
// target, the final perplexities and the artifacts in output.dir.
#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "cli/open_session.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/config/run_config.h"
#include "common/quant/baselines.h"
#include "common/quant/exporter.h"
#include "common/quant/plan_io.h"
#include "common/quant/quantization_session.h"
#include "common/report/html_report.h"
#include "common/report/report_data.h"
#include "common/rl/episode_evaluator.h"
#include "common/rl/run_checkpoint.h"
#include "common/rl/training.h"
#include "learner/in_process_job.h"

namespace windquant::cli {
namespace {

using nlohmann::json;

constexpr char kUsage[] =
    "usage: windquant quantize --config FILE [--set key=value ...] [--resume] [flags]\n\n"
    "Runs the whole WINDQuant job in one process: calibration and unit table (cached in\n"
    "quant.cache_dir), PPO training over the curriculum.target_bits stages (warm start from\n"
    "the Lagrangian baseline when training.warm_start = lagrange) by the same learner,\n"
    "evaluator and service.stages x service.replicas actor services as the distributed job\n"
    "(deploy/local), connected by in-process gRPC channels, then measures the best\n"
    "feasible plan and every baseline (uniform nearest, greedy, lagrange, random) at the\n"
    "final target on the evaluation text, and writes to output.dir:\n"
    "  plan.json, plan.bin     the best feasible RL plan (plan_io.h)\n"
    "  report.json             FP / RL / baseline perplexities and bits, winner, wall time,\n"
    "                          lambda, curriculum history, training curve per update, and\n"
    "                          the HTML report's data (common/report/report_data.h)\n"
    "  report.html             self-contained report (inline SVG: bits heat map over layers\n"
    "                          x matrix types, perplexity vs effective bits for RL and every\n"
    "                          baseline, training curves); `windquant report --in\n"
    "                          report.json` renders the same page again\n"
    "  checkpoint/run.ckpt     the training checkpoint (every training.checkpoint_every_updates)\n"
    "  plans.jsonl, unit_table.pb, status.txt, evaluator-queue/\n"
    "                          the services' run state (every evaluated plan, the merged\n"
    "                          table, the learner's status; cleared unless --resume)\n"
    "  quantized/, fake_quant/ the exported model (unless --no-export)\n\n"
    "Plans are selected on the first evaluation.eval_slice_tokens ids of evaluation.text;\n"
    "final numbers are given on the whole text and on the part after that slice (held out).\n\n"
    "flags:\n"
    "  --config FILE            run config (YAML; see configs/)\n"
    "  --set key=value          override a config key (repeatable)\n"
    "  --resume                 continue from output.dir/checkpoint (refused if the model,\n"
    "                           data or config changed)\n"
    "  --no-export              skip writing quantized/ and fake_quant/\n"
    "  --no-cache               do not read or write the unit-table and fit caches\n"
    "  --no-baselines           measure only FP and the RL plan at the end\n"
    "  --stop-after-updates N   stop (checkpoint first) after N updates in this process,\n"
    "                           without the final evaluation (for time-boxed runs and tests)\n";

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

json Num(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

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

struct Measured {
  std::string name;
  std::vector<int> actions;
  double bits = 0;
  double selection_ppl = 0, whole_ppl = 0, heldout_ppl = 0;
};

// The HTML report's data (common/report): the RL plan per unit, every measured plan
// at its effective bits, the training curve. Perplexities are the winner metric's
// (held-out part, or the whole text when there is none).
report::ReportData MakeReportData(const config::RunConfig& cfg, const quant::UnitTable& table,
                                  const rl::RunResult& tr, const Measured& fp,
                                  const std::vector<Measured>& plans, bool have_heldout,
                                  const std::string& fingerprint, const std::string& winner,
                                  double target, double wall_s, int64_t selection_tokens,
                                  int64_t heldout_tokens) {
  auto metric = [have_heldout](const Measured& m) {  // non-finite (overflow) = unknown
    const double ppl = have_heldout ? m.heldout_ppl : m.whole_ppl;
    return std::isfinite(ppl) ? ppl : std::nan("");
  };
  report::ReportData d;
  const std::filesystem::path model_dir = std::filesystem::path(cfg.model.dir).lexically_normal();
  d.model_name = model_dir.has_filename() ? model_dir.filename().string()
                                          : model_dir.parent_path().filename().string();
  d.fingerprint = fingerprint;
  d.fp_perplexity = metric(fp);
  d.target_bits = target;
  d.winner = winner;
  d.wall_time_s = wall_s;
  const std::vector<int>& rl = plans.front().actions;
  for (size_t i = 0; i < table.units.size(); ++i) {
    const quant::Unit& u = table.units[i];
    d.units.push_back({u.layer, u.matrix, u.n(), u.bits[rl[i]] / static_cast<double>(u.n())});
  }
  for (const Measured& m : plans) d.points.push_back({m.name, m.bits, metric(m)});
  const double nan = std::nan("");
  for (const rl::UpdateRecord& r : tr.curve) {
    report::TrainingRow row;
    row.update = r.update;
    row.mean_reward = r.mean_reward;
    row.best_perplexity = r.best_ppl > 0 ? r.best_ppl : nan;  // 0: no feasible plan yet
    row.bits = r.mean_bits;
    row.lambda = r.lambda;
    row.target_bits = r.target_bits;
    row.mean_perplexity = r.mean_ppl;
    d.curve.push_back(row);
  }
  d.notes.push_back(
      have_heldout
          ? absl::StrFormat(
                "Perplexities in the summary and the chart: the %d held-out tokens of %s "
                "after the %d-token selection slice (report.json has all slices).",
                heldout_tokens, cfg.evaluation.text, selection_tokens)
          : absl::StrFormat(
                "Perplexities in the summary and the chart: the whole %d tokens used of %s "
                "(no held-out part).",
                selection_tokens + heldout_tokens, cfg.evaluation.text));
  d.notes.push_back(
      "Training curves: perplexity and bits on the selection slice; the best plan is the "
      "lowest selection-slice perplexity within the final target.");
  d.notes.push_back(absl::StrFormat(
      "RL plan from %s at update %d; %d updates, %d plan evaluations, lambda %.4f%s.",
      tr.best.source, tr.best.update, tr.updates, tr.evaluations, tr.lambda,
      tr.resumed_from_update >= 0
          ? absl::StrFormat("; resumed from update %d", tr.resumed_from_update)
          : ""));
  d.notes.push_back(absl::StrCat("Config ", cfg.source,
                                 "; baselines (uniform nearest, greedy, lagrange, random) "
                                 "use the same unit table and operators."));
  return d;
}

absl::Status RunQuantize(Args& args) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string config_path = args.Get("config");
  const std::vector<std::string> sets = args.GetAll("set");
  const bool resume = args.Has("resume"), no_export = args.Has("no-export"),
             no_cache = args.Has("no-cache");
  const bool no_baselines = args.Has("no-baselines");
  WQ_ASSIGN_OR_RETURN(const int64_t stop_after, args.GetInt("stop-after-updates", 0));
  WQ_RETURN_IF_ERROR(args.Finish());
  if (config_path.empty()) return absl::InvalidArgumentError("--config is required (see --help)");
  if (stop_after < 0) return absl::InvalidArgumentError("--stop-after-updates: must be >= 0");
  WQ_ASSIGN_OR_RETURN(config::RunConfig cfg, config::LoadRunConfig(config_path, sets));
  if (cfg.model.threads > 0)
    at::set_num_threads(cfg.model.threads);  // 0: torch's default (all cores)
  auto log = [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };

  WQ_ASSIGN_OR_RETURN(auto session, OpenSession(cfg, !no_cache, /*load_eval_text=*/true));
  const quant::UnitTable& table = session->table();
  const double prepare_s = Since(t0);
  log(absl::StrFormat("quantize: %d units, %d quantized weights, unit table %s (%.1f s)",
                      table.units.size(), table.TotalWeights(),
                      session->from_cache() ? "from cache" : "built", prepare_s));

  // Slices: the loss term on the calibration text, selection on the start of
  // the evaluation text, held-out numbers on the rest.
  WQ_ASSIGN_OR_RETURN(const std::string calib_text, base::ReadFile(cfg.calibration.text));
  std::vector<int32_t> calib_ids = session->tokenizer().Encode(calib_text, false);
  if (static_cast<int64_t>(calib_ids.size()) > cfg.evaluation.calib_slice_tokens) {
    calib_ids.resize(cfg.evaluation.calib_slice_tokens);
  }
  // The selection slice is rounded down to whole perplexity windows (context - 1
  // ids each), so that its windows followed by the held-out part's are exactly
  // the windows of the whole text: whole NLL = token-weighted sum of the two.
  const std::vector<int32_t>& all_eval = session->eval_ids();
  const int64_t window = cfg.evaluation.context - 1;
  int64_t end = static_cast<int64_t>(all_eval.size());
  if (cfg.evaluation.final_eval_tokens > 0) end = std::min(end, cfg.evaluation.final_eval_tokens);
  const int64_t slice = std::min<int64_t>(cfg.evaluation.eval_slice_tokens, end) / window * window;
  if (slice < window) {
    return absl::InvalidArgumentError(
        "evaluation.eval_slice_tokens: shorter than one window of evaluation.context");
  }
  std::vector<int32_t> eval_slice(all_eval.begin(), all_eval.begin() + slice);
  std::vector<int32_t> heldout(all_eval.begin() + slice, all_eval.begin() + end);
  model::LlamaModel eval_model(CloneWeights(session->model().weights()), session->model().device());
  rl::LocalEvaluatorOptions lo;
  lo.context = cfg.evaluation.context;
  lo.batch = cfg.evaluation.batch;
  WQ_ASSIGN_OR_RETURN(auto evaluator,
                      rl::LocalPlanEvaluator::Create(&eval_model, &session->fits(), &table,
                                                     calib_ids, eval_slice, lo));
  log(absl::StrFormat("quantize: FP PPL %.4f on the selection slice (%d tokens)",
                      evaluator->fp_eval_ppl(), eval_slice.size()));

  // Training: the learner, evaluator and actor services of the distributed
  // job (DESIGN.md section 5), here in this process with in-process channels.
  const std::string fingerprint = rl::RunFingerprint(table, cfg);
  const std::string checkpoint_dir =
      (std::filesystem::path(cfg.output.dir) / "checkpoint").string();
  learner::InProcessJobOptions jo;
  jo.log = log;
  jo.stop_after_updates = stop_after;
  jo.expected_table = &table;
  if (resume) {
    // A fresh incarnation: episode ids of the run before the restart stay unique.
    jo.incarnation_seed = std::random_device{}();
    if (!base::PathExists(rl::RunCheckpointPath(checkpoint_dir))) {
      log(absl::StrCat("quantize: --resume: no checkpoint in ", checkpoint_dir,
                       "; starting fresh"));
    }
  } else {
    jo.incarnation_seed = cfg.training.seed;
    if (base::PathExists(rl::RunCheckpointPath(checkpoint_dir))) {
      log(absl::StrCat("quantize: ", rl::RunCheckpointPath(checkpoint_dir),
                       " exists and will be overwritten (use --resume to continue it)"));
    }
    WQ_RETURN_IF_ERROR(learner::ClearJobState(cfg));
  }
  config::RunConfig job_config = cfg;
  if (no_cache) job_config.quant.cache_dir.clear();  // the actors' fit caches too
  WQ_ASSIGN_OR_RETURN(rl::RunResult tr, learner::RunInProcessJob(job_config, jo));
  if (tr.stopped_early) {
    std::printf("stopped after update %lld (checkpoint in %s); rerun with --resume to continue\n",
                static_cast<long long>(tr.updates), checkpoint_dir.c_str());
    return absl::OkStatus();
  }
  if (tr.best.actions.empty()) {
    return absl::FailedPreconditionError(
        "quantize: no feasible plan was found at the final target");
  }
  const double train_s = Since(t0) - prepare_s;
  const double target = cfg.curriculum.target_bits.back();

  // Final measurements: RL plan, FP, baselines at the final target.
  std::vector<Measured> plans;
  plans.push_back({"rl", tr.best.actions});
  if (!no_baselines) {
    double best_gap = 1e300;
    quant::Plan nearest;
    for (quant::Action a : quant::kAllActions) {
      quant::Plan u = quant::UniformPlan(table, a);
      const double gap = std::abs(table.EffectiveBits(u.actions) - target);
      if (gap < best_gap) best_gap = gap, nearest = u;
    }
    plans.push_back(
        {absl::StrCat("uniform-", std::string(quant::ActionName(
                                      quant::ActionFromIndex(nearest.actions[0]).value()))),
         nearest.actions});
    WQ_ASSIGN_OR_RETURN(quant::Plan greedy, quant::GreedyPlan(table, target));
    plans.push_back({"greedy", greedy.actions});
    WQ_ASSIGN_OR_RETURN(quant::Plan lagrange, quant::LagrangePlan(table, target));
    plans.push_back({"lagrange", lagrange.actions});
    WQ_ASSIGN_OR_RETURN(quant::Plan random, quant::RandomPlan(table, target, cfg.training.seed));
    plans.push_back({"random", random.actions});
  }
  const bool have_heldout = static_cast<int64_t>(heldout.size()) >= cfg.evaluation.context;
  // PPL of a plan on the slice, held-out part and whole text (slice + held-out windows).
  auto measure = [&](const std::vector<int>& actions, Measured* m) -> absl::Status {
    WQ_ASSIGN_OR_RETURN(model::PerplexityResult s, evaluator->Measure(actions, eval_slice));
    m->selection_ppl = s.perplexity;
    double nll = s.total_nll, tokens = static_cast<double>(s.tokens);
    if (have_heldout) {
      WQ_ASSIGN_OR_RETURN(model::PerplexityResult h, evaluator->Measure(actions, heldout));
      m->heldout_ppl = h.perplexity;
      nll += h.total_nll;
      tokens += static_cast<double>(h.tokens);
    }
    m->whole_ppl = std::exp(nll / tokens);
    return absl::OkStatus();
  };
  Measured fp;
  fp.name = "fp";
  fp.bits = 16;
  WQ_RETURN_IF_ERROR(measure({}, &fp));
  for (Measured& m : plans) {
    m.bits = table.EffectiveBits(m.actions);
    WQ_RETURN_IF_ERROR(measure(m.actions, &m));
  }
  // Winner: lowest held-out PPL (whole text when there is no held-out part)
  // among plans within 0.01 bits above the target; ties go to the baseline.
  constexpr double kSameBitsTolerance = 0.01;
  std::string winner;
  double winner_ppl = 1e300;
  // Baselines first, so that a tie (e.g. RL returning the Lagrangian plan) is not an RL win.
  for (auto it = plans.rbegin(); it != plans.rend(); ++it) {
    const Measured& m = *it;
    const double ppl = have_heldout ? m.heldout_ppl : m.whole_ppl;
    if (m.bits <= target + kSameBitsTolerance && ppl < winner_ppl)
      winner_ppl = ppl, winner = m.name;
  }

  // Artifacts.
  quant::Plan plan = session->MakePlan(tr.best.actions, "rl", target);
  plan.policy_version = tr.best.policy_version;
  WQ_RETURN_IF_ERROR(quant::WritePlanFiles(plan, table, cfg.output.dir));
  std::string exported;
  if (!no_export) {
    quant::ExportInputs in;
    in.weights = &session->model().weights();
    in.stats = &session->activation_stats();
    in.table = &table;
    in.fits = &session->fits();
    in.plan = &plan;
    in.quantizer.salient_fraction = cfg.quant.salient_fraction;
    in.model_dir = cfg.model.dir;
    const std::filesystem::path d(cfg.output.dir);
    WQ_RETURN_IF_ERROR(quant::WriteQuantizedCheckpoint(in, (d / "quantized").string()));
    WQ_RETURN_IF_ERROR(quant::WriteFakeQuantCheckpoint(in, (d / "fake_quant").string()));
    exported = (d / "fake_quant").string();
  }

  json report;
  report["config"] = cfg.source;
  report["fingerprint"] = fingerprint;
  report["target_bits"] = target;
  report["bits_note"] =
      "effective bits of the quantized decoder linears; embeddings, norms and lm_head stay FP16";
  report["tokens"] = {{"selection", eval_slice.size()},
                      {"heldout", heldout.size()},
                      {"whole", eval_slice.size() + heldout.size()},
                      {"calibration_slice", calib_ids.size()}};
  report["fp"] = {{"whole_ppl", Num(fp.whole_ppl)},
                  {"heldout_ppl", Num(fp.heldout_ppl)},
                  {"selection_ppl", Num(fp.selection_ppl)}};
  json ps = json::array();
  for (const Measured& m : plans) {
    ps.push_back({{"name", m.name},
                  {"bits", m.bits},
                  {"selection_ppl", Num(m.selection_ppl)},
                  {"whole_ppl", Num(m.whole_ppl)},
                  {"heldout_ppl", Num(m.heldout_ppl)}});
  }
  report["plans"] = ps;
  report["winner"] = winner;
  report["winner_metric"] = have_heldout ? "heldout_ppl" : "whole_ppl";
  report["rl"] = {{"source", tr.best.source},
                  {"update", tr.best.update},
                  {"bits", plans[0].bits},
                  {"selection_ppl", Num(plans[0].selection_ppl)},
                  {"whole_ppl", Num(plans[0].whole_ppl)},
                  {"heldout_ppl", Num(plans[0].heldout_ppl)}};
  report["lambda"] = tr.lambda;
  report["updates"] = tr.updates;
  report["resumed_from_update"] = tr.resumed_from_update;
  report["plan_evaluations"] = tr.evaluations;
  report["cache_hits"] = tr.cache_hits;
  const double total_s = Since(t0);
  report["wall_time_s"] = {{"prepare", prepare_s}, {"train", train_s}, {"total", total_s}};
  json stages = json::array();
  for (const auto& s : tr.stages) {
    stages.push_back({{"stage", s.stage},
                      {"target_bits", s.target_bits},
                      {"update", s.update},
                      {"reason", s.reason}});
  }
  report["curriculum"] = {{"target_bits", cfg.curriculum.target_bits}, {"history", stages}};
  json curve = json::array();
  for (const auto& r : tr.curve) {
    curve.push_back({{"update", r.update},
                     {"stage", r.stage},
                     {"target_bits", r.target_bits},
                     {"mean_reward", Num(r.mean_reward)},
                     {"mean_ppl", Num(r.mean_ppl)},
                     {"mean_bits", Num(r.mean_bits)},
                     {"best_ppl", Num(r.best_ppl)},
                     {"best_bits", Num(r.best_bits)},
                     {"lambda", r.lambda},
                     {"entropy", Num(r.entropy)},
                     {"evaluations", r.evaluations},
                     {"seconds", r.seconds}});
  }
  report["training_curve"] = curve;
  if (!exported.empty()) report["exported"] = exported;
  // The HTML report's keys (common/report/report_data.h) beside ours, so that
  // `windquant report --in report.json` renders report.html again. Shared keys
  // (fingerprint, target_bits, winner, wall_time_s) already hold the same values.
  const report::ReportData html_data =
      MakeReportData(cfg, table, tr, fp, plans, have_heldout, fingerprint, winner, target, total_s,
                     static_cast<int64_t>(eval_slice.size()), static_cast<int64_t>(heldout.size()));
  WQ_RETURN_IF_ERROR(report::ValidateReportData(html_data));
  const json html_json = json::parse(report::ToJson(html_data));
  for (const char* key : {"model_name", "fp_perplexity", "notes", "units", "points", "curve"}) {
    report[key] = html_json.at(key);
  }
  const std::filesystem::path out_dir(cfg.output.dir);
  const std::string report_path = (out_dir / "report.json").string();
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic(report_path, report.dump(2) + "\n"));
  WQ_RETURN_IF_ERROR(report::WriteHtmlReport(html_data, (out_dir / "report.html").string()));

  std::printf("%-14s %8s %14s %12s %12s\n", "plan", "bits", "selection PPL", "whole PPL",
              "held-out PPL");
  std::printf("%-14s %8s %14.4f %12.4f %12.4f\n", "fp", "16", fp.selection_ppl, fp.whole_ppl,
              fp.heldout_ppl);
  for (const Measured& m : plans) {
    std::printf("%-14s %8.4f %14.4f %12.4f %12.4f\n", m.name.c_str(), m.bits, m.selection_ppl,
                m.whole_ppl, m.heldout_ppl);
  }
  std::printf(
      "winner: %s (%s); lambda %.4f; %lld updates; %.1f s; wrote %s/plan.json, plan.bin, "
      "report.json, "
      "report.html\n",
      winner.c_str(), have_heldout ? "held-out PPL" : "whole PPL", tr.lambda,
      static_cast<long long>(tr.updates), Since(t0), cfg.output.dir.c_str());
  return absl::OkStatus();
}

}  // namespace

WQ_REGISTER_COMMAND(quantize, "quantize",
                    "train the RL policy and write the best feasible plan, report and model",
                    kUsage, RunQuantize);

}  // namespace windquant::cli
