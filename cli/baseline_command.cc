// `windquant baseline`: builds a baseline plan (uniform, greedy, Lagrangian, random,
// or search: the best of N plans measured on the selection slice) from the run's
// unit table, writes plan.json + plan.bin, and reports its effective bits and
// measured perplexity (DESIGN.md section 3).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "common/base/location_check.h"
#include "common/base/output_dir.h"
#include "common/base/status_macros.h"
#include "common/config/run_config.h"
#include "common/plan/plan_io.h"
#include "common/quant/quantization_session.h"
#include "common/search/baselines.h"
#include "job/baseline_plans.h"
#include "job/baseline_run.h"
#include "job/open_session.h"
#include "job/search_baseline.h"
#include "job/unit_table_files.h"
#include "nlohmann/json.hpp"

namespace windquant::cli {
namespace {

constexpr char kUsage[] =
    "usage: windquant baseline --config FILE\n"
    "                          --method uniform|greedy|lagrange|random|search|measured\n"
    "                          [--bits B] [--action A] [--seed N] [--evals N]\n"
    "                          [--restart-after R] [--screen K] [--rounds R]\n"
    "                          [--out DIR] [--json]\n\n"
    "Runs the quantization session of FILE (calibration + unit table, or the unit-table\n"
    "cache quant.cache_dir), builds a baseline plan and measures its perplexity on\n"
    "the held-out text (evaluation.heldout: its file and token range).\n"
    "search: a (1+1) local search from the Lagrangian plan that measures N distinct\n"
    "plans (--evals, the start plan included) on the selection slice\n"
    "(evaluation.selection), each within --bits by construction, and returns the best;\n"
    "after R measured proposals in a row without improvement it restarts from the best\n"
    "plan with 8 units moved; with --screen K each measured plan is the best of K\n"
    "proposals by the reward model RL screens with, fitted on the plans measured so far.\n"
    "`quantize` runs both (R 16, K 32) with the RL run's count of real plan evaluations.\n"
    "measured: the Lagrangian plan on a measured proxy: each round measures, on the\n"
    "selection slice, every linear at every action with the rest of the plan at an\n"
    "anchor (uniform first, then the last round's plan), and the unit table's errors\n"
    "become those changes of the loss (1 + 6 x linears plans per round; with --out the\n"
    "table is written to DIR/measured_table.pb, for `windquant table dump`).\n\n"
    "flags:\n"
    "  --config FILE      run config (YAML), required\n"
    "  --set K=V          config override (repeatable)\n"
    "  --method M         uniform | greedy | lagrange | random | search | measured\n"
    "                     (required)\n"
    "  --bits B           effective-bit budget (every method but uniform)\n"
    "  --action A         uniform action: 16 8 4 3 2 1.58 1 (uniform only)\n"
    "  --seed N           random plan / search seed (0)\n"
    "  --evals N          search: plans measured on the selection slice (required)\n"
    "  --restart-after R  search: restart after R stale proposals (16; 0: never)\n"
    "  --screen K         search: screen K proposals per measured plan (0: none)\n"
    "  --rounds R         measured: rounds of measurements (2)\n"
    "  --out DIR          write DIR/plan.json and DIR/plan.bin (a new or empty DIR)\n"
    "  --force            replace an existing non-empty DIR whole\n"
    "  --max-tokens N     first N held-out ids only (default 0: all of evaluation.heldout)\n"
    "  --fp               also measure the full-precision model\n"
    "  --no-eval          skip the perplexity measurement\n"
    "  --no-cache         ignore and do not write the unit-table cache\n"
    "  --json             print one JSON object instead of text\n";

// The text form of `j` (the --json object).
void PrintText(const nlohmann::json& j, const plan::PlanTotals& totals, size_t units,
               const std::string& out) {
  std::string count_text;
  for (int a = 0; a < plan::kNumActions; ++a) {
    absl::StrAppend(&count_text, " ", std::string(plan::ActionName(plan::kAllActions[a])), ":",
                    totals.action_counts[a]);
  }
  std::printf("plan %s\n", j.at("plan_id").get<std::string>().c_str());
  std::printf(
      "effective bits %.4f (quantized linears), %.4f (whole model incl. FP16 embeddings/norms)\n",
      totals.effective_bits, totals.whole_model_bits);
  std::printf("units %zu, actions%s\n", units, count_text.c_str());
  std::printf("proxy error %.6g\n", j.at("proxy_error").get<double>());
  if (j.contains("search")) {
    const nlohmann::json& q = j.at("search");
    std::printf(
        "search: %lld plans measured on the selection slice, %lld accepted, %lld restarts; "
        "selection perplexity %.4f (Lagrangian start) -> %.4f\n",
        static_cast<long long>(q.at("evaluations").get<int64_t>()),
        static_cast<long long>(q.at("accepted").get<int64_t>()),
        static_cast<long long>(q.at("restarts").get<int64_t>()),
        q.at("start_selection_ppl").get<double>(), q.at("selection_ppl").get<double>());
  }
  if (j.contains("measured_proxy")) {
    const nlohmann::json& q = j.at("measured_proxy");
    std::printf(
        "measured proxy: %lld plans measured on the selection slice over %lld rounds (%lld "
        "linears); selection perplexity of the plan %.4f\n",
        static_cast<long long>(q.at("evaluations").get<int64_t>()),
        static_cast<long long>(q.at("rounds").get<int64_t>()),
        static_cast<long long>(q.at("linears").get<int64_t>()),
        q.at("selection_ppl").get<double>());
  }
  if (j.contains("perplexity")) {
    std::printf("perplexity %.4f on %lld tokens (context %lld)\n", j.at("perplexity").get<double>(),
                static_cast<long long>(j.at("eval_tokens").get<int64_t>()),
                static_cast<long long>(j.at("context").get<int64_t>()));
    if (j.contains("fp_perplexity"))
      std::printf("fp perplexity %.4f\n", j.at("fp_perplexity").get<double>());
  }
  if (!out.empty()) std::printf("wrote %s/plan.json, %s/plan.bin\n", out.c_str(), out.c_str());
}

absl::Status RunBaseline(Args& args) {
  const std::string config_path = args.Get("config");
  const std::vector<std::string> sets = args.GetAll("set");
  const std::string method = args.Get("method");
  WQ_ASSIGN_OR_RETURN(const double bits, args.GetDouble("bits", 0.0));
  const std::string action_text = args.Get("action");
  WQ_ASSIGN_OR_RETURN(const int64_t seed, args.GetInt("seed", 0));
  WQ_ASSIGN_OR_RETURN(const int64_t evals, args.GetInt("evals", 0));
  WQ_ASSIGN_OR_RETURN(const int64_t restart_after,
                      args.GetInt("restart-after", job::kSearchRestartAfter));
  WQ_ASSIGN_OR_RETURN(const int64_t screen, args.GetInt("screen", 0));
  WQ_ASSIGN_OR_RETURN(const int64_t rounds, args.GetInt("rounds", 2));
  const std::string out = args.Get("out");
  WQ_ASSIGN_OR_RETURN(const int64_t max_tokens, args.GetInt("max-tokens", 0));
  const bool with_fp = args.Has("fp"), no_eval = args.Has("no-eval"),
             no_cache = args.Has("no-cache");
  const bool json = args.Has("json"), force = args.Has("force");
  WQ_RETURN_IF_ERROR(args.Finish());
  if (config_path.empty()) return absl::InvalidArgumentError("--config is required (see --help)");
  if (!out.empty()) {
    WQ_RETURN_IF_ERROR(base::CheckOutputParent(out, "--out"));
    WQ_RETURN_IF_ERROR(base::CheckOutputDir(out, force));
  }
  job::BaselineSpec spec;
  spec.method = method;
  spec.bits = bits;
  spec.seed = static_cast<uint64_t>(seed);
  spec.evals = evals;
  spec.restart_after = restart_after;
  spec.screen = static_cast<int>(std::clamp<int64_t>(screen, -1, 1 << 20));
  spec.rounds = static_cast<int>(std::clamp<int64_t>(rounds, -(1 << 20), 1 << 20));
  WQ_RETURN_IF_ERROR(job::ValidateBaselineSpec(spec));
  if (method == "uniform") {
    if (action_text.empty())
      return absl::InvalidArgumentError("--action is required for --method uniform");
    absl::StatusOr<plan::Action> a = plan::ParseAction(action_text);
    if (!a.ok())
      return absl::InvalidArgumentError(absl::StrCat("--action: ", a.status().message()));
    spec.action = *a;
  }

  WQ_ASSIGN_OR_RETURN(config::RunConfig cfg, config::LoadRunConfig(config_path, sets));
  WQ_RETURN_IF_ERROR(base::CheckInputDir(cfg.model.dir, "model.dir"));
  WQ_ASSIGN_OR_RETURN(auto session, job::OpenSession(cfg, !no_cache, /*load_eval_text=*/!no_eval));
  const plan::UnitTable& table = session->table();
  nlohmann::json search_json, measured_json;
  plan::UnitTable measured_table;
  absl::StatusOr<plan::Plan> built =
      method == "search"
          ? job::SearchSessionPlan(*session, cfg.evaluation.selection, spec, &search_json)
      : method == "measured" ? job::MeasuredSessionPlan(*session, cfg.evaluation.selection, spec,
                                                        &measured_json, &measured_table)
                             : job::BaselinePlan(table, spec);
  if (!built.ok()) return built.status();
  const plan::Plan plan = *std::move(built);
  if (!out.empty()) {
    // The files appear together or not at all.
    WQ_RETURN_IF_ERROR(base::WriteDirAtomic(out, force, [&](const std::string& tmp) {
      WQ_RETURN_IF_ERROR(plan::WritePlanFiles(plan, table, tmp));
      if (measured_json.is_null()) return absl::OkStatus();
      return job::WriteUnitTableFile(measured_table, tmp + "/measured_table.pb");
    }));
  }
  WQ_ASSIGN_OR_RETURN(nlohmann::json j, job::DescribeBaseline(*session, plan, method,
                                                              {!no_eval, with_fp, max_tokens}));
  if (!out.empty()) j["out"] = out;
  if (!search_json.is_null()) j["search"] = search_json;
  if (!measured_json.is_null()) j["measured_proxy"] = measured_json;
  if (json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    PrintText(j, plan.Totals(table), table.units.size(), out);
  }
  return absl::OkStatus();
}

}  // namespace

WQ_REGISTER_COMMAND(baseline, "baseline",
                    "build a baseline plan (uniform/greedy/lagrange/random) and measure it", kUsage,
                    RunBaseline);

}  // namespace windquant::cli
