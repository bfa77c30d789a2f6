// `windquant quantize`: the whole WINDQuant job in one process (job::RunQuantizeJob:
// calibration and unit table, training by the learner, evaluator and actor
// services over in-process channels, the best feasible plan, every baseline at
// the same target, report and export). Parses the flags, runs the job, prints
// the table of measured plans.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/command.h"
#include "common/base/build_commit.h"
#include "common/base/location_check.h"
#include "common/base/status_macros.h"
#include "common/config/run_config.h"
#include "common/config/this_machine.h"
#include "common/model/torch_threads.h"
#include "common/store/s3_environment.h"
#include "job/quantize_job.h"

namespace windquant::cli {
namespace {

constexpr char kUsage[] =
    "usage: windquant quantize --config FILE [--set key=value ...] [--resume] [flags]\n\n"
    "Runs the whole WINDQuant job in one process: calibration and unit table (cached in\n"
    "quant.cache_dir), PPO training over the curriculum.target_bits stages (warm start from\n"
    "the Lagrangian baseline when training.warm_start = lagrange) by the same learner,\n"
    "evaluator and service.stages x service.replicas actor services as the distributed job\n"
    "(deploy/local), connected by in-process gRPC channels, then measures the best\n"
    "feasible plan and every baseline (the uniform plans just within and just above the\n"
    "target, greedy, lagrange, random, and the searches with RL's count of real\n"
    "evaluations, the screened one screening training.screen_samples proposals per\n"
    "evaluation as RL's actors do) at the final target on the evaluation text, the uniform\n"
    "4/3/2-bit plans at their own bits beside the Lagrangian plan at the same bits, and\n"
    "writes to output.dir:\n"
    "  plan.json, plan.bin     the best feasible RL plan (plan_io.h)\n"
    "  report.json             FP / RL / baseline perplexities and bits, winner, wall time,\n"
    "                          what each method's evaluations read (rl_cost, cost), the\n"
    "                          uniform anchors (uniform_anchors),\n"
    "                          lambda, curriculum history, training curve per update, and\n"
    "                          the HTML report's data (common/report/report_data.h), the\n"
    "                          binary's commit and the config's digest without its seeds\n"
    "  report.html             self-contained report (inline SVG: bits heat map over layers\n"
    "                          x matrix types, perplexity vs effective bits for RL and every\n"
    "                          baseline, training curves); `windquant report --in\n"
    "                          report.json` renders the same page again\n"
    "  checkpoint/run.ckpt     the training checkpoint (every training.checkpoint_every_updates)\n"
    "  plans.jsonl, unit_table.pb, status.txt, evaluator-queue/\n"
    "                          the services' run state (every evaluated plan, the merged\n"
    "                          table, the learner's status; cleared unless --resume)\n"
    "  quantized/, fake_quant/ the exported model (unless --no-export or output.export: false)\n\n"
    "With output.store (file:///dir, a path or s3://bucket[/prefix]; S3 credentials from\n"
    "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION) the run also goes\n"
    "to the artifact store as runs/<run id>/: checkpoints and every new best plan while it\n"
    "trains, then plans/final (the files above); `windquant plans list --store URI` shows\n"
    "it. Without --resume that is a new run; --resume continues the newest run of this\n"
    "config (from the store's checkpoint when output.dir has none).\n\n"
    "Plans are selected on evaluation.selection; final numbers are given on\n"
    "evaluation.heldout, text that neither calibration nor selection read.\n\n"
    "flags:\n"
    "  --config FILE            run config (YAML; see configs/)\n"
    "  --set key=value          override a config key (repeatable)\n"
    "  --resume                 continue from output.dir/checkpoint (refused if the model,\n"
    "                           data or config changed)\n"
    "  --no-export              skip writing quantized/ and fake_quant/\n"
    "  --no-cache               do not read or write the unit-table and fit caches\n"
    "  --no-baselines           measure only FP and the RL plan at the end\n"
    "  --max-ppl-increase E     quality-target mode: the fewest bits whose selection-slice\n"
    "                           perplexity is within (1 + E) x FP's (E = 0.02: 2 %);\n"
    "                           curriculum.target_bits becomes a cap and lambda prices the\n"
    "                           degradation (= --set lagrange.prices=target --set\n"
    "                           lagrange.epsilon=E; docs/lagrange.md); RL starts from the\n"
    "                           Lagrangian bisection of the bits to E (row lagrange-bisect);\n"
    "                           with baselines, row screened-bisect bisects with the\n"
    "                           screened search and RL's count of real evaluations\n"
    "  --stop-after-updates N   stop (checkpoint first) after N updates in this process,\n"
    "                           without the final evaluation (for time-boxed runs and tests)\n";

// The quality-target mode's line: the returned plan's bits and degradation.
void PrintQualityTarget(const job::QuantizeResult& r, double max_ppl_increase) {
  for (const job::MeasuredPlan& m : r.plans) {
    if (m.name != r.returned) continue;
    const double selection = m.selection_ppl / r.fp.selection_ppl - 1.0;
    std::printf(
        "quality target %g: returned %s at %.4f bits, relative PPL increase %.4f on the "
        "selection slice (%s), %.4f held-out\n",
        max_ppl_increase, m.name.c_str(), m.bits, selection,
        selection <= max_ppl_increase ? "within" : "NOT within: the least degraded plan measured",
        r.have_heldout ? m.heldout_ppl / r.fp.heldout_ppl - 1.0 : std::nan(""));
  }
}

void PrintResult(const job::QuantizeResult& r, const std::string& output_dir) {
  std::printf("%-14s %8s %14s %12s %12s\n", "plan", "bits", "selection PPL", "whole PPL",
              "held-out PPL");
  std::printf("%-14s %8s %14.4f %12.4f %12.4f\n", "fp", "16", r.fp.selection_ppl, r.fp.whole_ppl,
              r.fp.heldout_ppl);
  for (const job::MeasuredPlan& m : r.plans) {
    std::printf("%-14s %8.4f %14.4f %12.4f %12.4f\n", m.name.c_str(), m.bits, m.selection_ppl,
                m.whole_ppl, m.heldout_ppl);
  }
  std::printf(
      "winner: %s (%s); lambda %.4f; %lld updates; %.1f s; wrote %s/plan.json, plan.bin, "
      "report.json, "
      "report.html\n",
      r.winner.c_str(), r.have_heldout ? "held-out PPL" : "whole PPL", r.lambda,
      static_cast<long long>(r.updates), r.seconds, output_dir.c_str());
}

absl::Status RunQuantize(Args& args) {
  job::QuantizeOptions options;  // its start: now, before the config is loaded
  const std::string config_path = args.Get("config");
  std::vector<std::string> sets = args.GetAll("set");
  const bool quality_target = args.Has("max-ppl-increase");
  WQ_ASSIGN_OR_RETURN(const double max_ppl_increase, args.GetDouble("max-ppl-increase", 0));
  options.resume = args.Has("resume");
  options.export_model = !args.Has("no-export");
  options.use_cache = !args.Has("no-cache");
  options.baselines = !args.Has("no-baselines");
  options.build_commit = base::BuildCommit();
  WQ_ASSIGN_OR_RETURN(options.stop_after_updates, args.GetInt("stop-after-updates", 0));
  WQ_RETURN_IF_ERROR(args.Finish());
  if (config_path.empty()) return absl::InvalidArgumentError("--config is required (see --help)");
  if (options.stop_after_updates < 0) {
    return absl::InvalidArgumentError("--stop-after-updates: must be >= 0");
  }
  if (quality_target) {
    if (!(max_ppl_increase > 0 && max_ppl_increase <= 100)) {
      return absl::InvalidArgumentError(
          "--max-ppl-increase: must be in (0, 100] (a relative perplexity increase: 0.02 = 2 %)");
    }
    sets.push_back("lagrange.prices=target");
    sets.push_back(absl::StrCat("lagrange.epsilon=", args.Get("max-ppl-increase")));
  }
  WQ_ASSIGN_OR_RETURN(const config::RunConfig cfg, config::LoadRunConfig(config_path, sets));
  WQ_RETURN_IF_ERROR(config::CheckThisMachine(cfg.model));  // before any work
  WQ_RETURN_IF_ERROR(base::CheckInputDir(cfg.model.dir, "model.dir"));
  WQ_RETURN_IF_ERROR(base::CheckOutputParent(cfg.output.dir, "output.dir"));
  model::SetTorchThreads(cfg.model.threads);  // 0: torch's default
  options.s3 = store::S3OptionsFromEnvironment();
  options.log = [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };
  WQ_ASSIGN_OR_RETURN(const job::QuantizeResult result, job::RunQuantizeJob(cfg, options));
  if (result.stopped_early) {
    std::printf("stopped after update %lld (checkpoint in %s); rerun with --resume to continue\n",
                static_cast<long long>(result.updates), result.checkpoint_dir.c_str());
    return absl::OkStatus();
  }
  PrintResult(result, cfg.output.dir);
  if (cfg.lagrange.quality_target()) PrintQualityTarget(result, cfg.lagrange.epsilon);
  if (!result.store_run.empty()) std::printf("pushed to %splans/final\n", result.store_run.c_str());
  return absl::OkStatus();
}

}  // namespace

WQ_REGISTER_COMMAND(quantize, "quantize",
                    "train the RL policy and write the best feasible plan, report and model",
                    kUsage, RunQuantize);

}  // namespace windquant::cli
