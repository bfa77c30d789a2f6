// `windquant baseline`: builds a baseline plan (uniform, greedy, Lagrangian, random)
// from the run's unit table, writes plan.json + plan.bin, and reports its effective
// bits and measured perplexity (DESIGN.md section 3).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/config/run_config.h"
#include "common/quant/baselines.h"
#include "common/quant/plan_io.h"
#include "common/quant/quantization_session.h"
#include "job/baseline_plans.h"
#include "job/open_session.h"
#include "nlohmann/json.hpp"

namespace windquant::cli {
namespace {

constexpr char kUsage[] =
    "usage: windquant baseline --config FILE --method uniform|greedy|lagrange|random\n"
    "                          [--bits B] [--action A] [--seed N] [--out DIR] [--json]\n\n"
    "Runs the quantization session of FILE (calibration + unit table, or the unit-table\n"
    "cache quant.cache_dir), builds a baseline plan and measures its perplexity on\n"
    "evaluation.text (the first evaluation.final_eval_tokens ids; 0 = the whole text).\n\n"
    "flags:\n"
    "  --config FILE      run config (YAML), required\n"
    "  --set K=V          config override (repeatable)\n"
    "  --method M         uniform | greedy | lagrange | random (required)\n"
    "  --bits B           effective-bit budget (greedy, lagrange, random)\n"
    "  --action A         uniform action: 16 8 4 3 2 1.58 1 (uniform only)\n"
    "  --seed N           random plan seed (0)\n"
    "  --out DIR          write DIR/plan.json and DIR/plan.bin (a new or empty DIR)\n"
    "  --force            replace an existing non-empty DIR whole\n"
    "  --max-tokens N     evaluation ids to use (default evaluation.final_eval_tokens)\n"
    "  --fp               also measure the full-precision model\n"
    "  --no-eval          skip the perplexity measurement\n"
    "  --no-cache         ignore and do not write the unit-table cache\n"
    "  --json             print one JSON object instead of text\n";

// The text form of `j` (the --json object).
void PrintText(const nlohmann::json& j, const quant::PlanTotals& totals, size_t units,
               const std::string& out) {
  std::string count_text;
  for (int a = 0; a < quant::kNumActions; ++a) {
    absl::StrAppend(&count_text, " ", std::string(quant::ActionName(quant::kAllActions[a])), ":",
                    totals.action_counts[a]);
  }
  std::printf("plan %s\n", j.at("plan_id").get<std::string>().c_str());
  std::printf(
      "effective bits %.4f (quantized linears), %.4f (whole model incl. FP16 embeddings/norms)\n",
      totals.effective_bits, totals.whole_model_bits);
  std::printf("units %zu, actions%s\n", units, count_text.c_str());
  std::printf("proxy error %.6g\n", j.at("proxy_error").get<double>());
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
  const std::string out = args.Get("out");
  WQ_ASSIGN_OR_RETURN(int64_t max_tokens, args.GetInt("max-tokens", -1));
  const bool with_fp = args.Has("fp"), no_eval = args.Has("no-eval"),
             no_cache = args.Has("no-cache");
  const bool json = args.Has("json"), force = args.Has("force");
  WQ_RETURN_IF_ERROR(args.Finish());
  if (config_path.empty()) return absl::InvalidArgumentError("--config is required (see --help)");
  if (!out.empty()) WQ_RETURN_IF_ERROR(base::CheckOutputDir(out, force));
  job::BaselineSpec spec;
  spec.method = method;
  spec.bits = bits;
  spec.seed = static_cast<uint64_t>(seed);
  WQ_RETURN_IF_ERROR(job::ValidateBaselineSpec(spec));
  if (method == "uniform") {
    if (action_text.empty())
      return absl::InvalidArgumentError("--action is required for --method uniform");
    absl::StatusOr<quant::Action> a = quant::ParseAction(action_text);
    if (!a.ok())
      return absl::InvalidArgumentError(absl::StrCat("--action: ", a.status().message()));
    spec.action = *a;
  }

  WQ_ASSIGN_OR_RETURN(config::RunConfig cfg, config::LoadRunConfig(config_path, sets));
  if (max_tokens < 0) max_tokens = cfg.evaluation.final_eval_tokens;
  WQ_ASSIGN_OR_RETURN(auto session, job::OpenSession(cfg, !no_cache, /*load_eval_text=*/!no_eval));
  const quant::UnitTable& table = session->table();
  WQ_ASSIGN_OR_RETURN(const quant::Plan plan, job::BaselinePlan(table, spec));
  const quant::PlanTotals totals = plan.Totals(table);
  if (!out.empty()) {
    // plan.json and plan.bin appear together or not at all.
    WQ_RETURN_IF_ERROR(base::WriteDirAtomic(out, force, [&](const std::string& tmp) {
      return quant::WritePlanFiles(plan, table, tmp);
    }));
  }

  nlohmann::json j = {{"plan_id", plan.plan_id},
                      {"method", method},
                      {"target_bits", plan.target_bits},
                      {"effective_bits", totals.effective_bits},
                      {"whole_model_bits", totals.whole_model_bits},
                      {"proxy_error", quant::ProxyError(table, plan.actions)},
                      {"units", table.units.size()},
                      {"unit_table_from_cache", session->from_cache()},
                      {"fingerprint", session->fingerprint()}};
  nlohmann::json counts = nlohmann::json::object();
  for (int a = 0; a < quant::kNumActions; ++a) {
    counts[std::string(quant::ActionName(quant::kAllActions[a]))] = totals.action_counts[a];
  }
  j["action_counts"] = counts;
  if (!out.empty()) j["out"] = out;
  if (!no_eval) {
    WQ_ASSIGN_OR_RETURN(model::PerplexityResult r, session->Perplexity(plan.actions, max_tokens));
    j["perplexity"] = r.perplexity;
    j["eval_tokens"] = r.tokens;
    j["context"] = r.context;
    if (with_fp) {
      WQ_ASSIGN_OR_RETURN(model::PerplexityResult fp, session->Perplexity({}, max_tokens));
      j["fp_perplexity"] = fp.perplexity;
    }
  }
  if (json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    PrintText(j, totals, table.units.size(), out);
  }
  return absl::OkStatus();
}

}  // namespace

WQ_REGISTER_COMMAND(baseline, "baseline",
                    "build a baseline plan (uniform/greedy/lagrange/random) and measure it", kUsage,
                    RunBaseline);

}  // namespace windquant::cli
