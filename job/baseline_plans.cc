#include "job/baseline_plans.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/search/baselines.h"
#include "job/plan_measurement.h"

namespace windquant::job {

absl::Status ValidateBaselineSpec(const BaselineSpec& spec) {
  const std::string& m = spec.method;
  if (m != "uniform" && m != "greedy" && m != "lagrange" && m != "random" && m != "search" &&
      m != "measured") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--method: expected uniform|greedy|lagrange|random|search|measured, got \"", m, "\""));
  }
  if (m != "uniform" && !(spec.bits > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--bits is required (> 0) for --method ", m));
  }
  if (m == "search" && spec.evals < 1) {
    return absl::InvalidArgumentError(
        "--evals N is required (>= 1: plans measured on the selection slice) for --method search");
  }
  if (m == "search" && spec.restart_after < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--restart-after: must be >= 0 (0: never), got ", spec.restart_after));
  }
  if (m == "search" && spec.screen < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--screen: must be >= 0 (0 or 1: no screening), got ", spec.screen));
  }
  if (m == "measured" && spec.rounds < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--rounds: must be >= 1, got ", spec.rounds));
  }
  // The range of curriculum.target_bits in the run config.
  if (m != "uniform" && !(spec.bits >= 1.0 && spec.bits <= 16.0)) {
    return absl::InvalidArgumentError(absl::StrCat("--bits: must be in [1, 16], got ", spec.bits));
  }
  return absl::OkStatus();
}

absl::StatusOr<plan::Plan> BaselinePlan(const plan::UnitTable& table, const BaselineSpec& spec) {
  WQ_RETURN_IF_ERROR(ValidateBaselineSpec(spec));
  if (spec.method == "uniform") {
    plan::Plan plan = search::UniformPlan(table, spec.action);
    plan.plan_id = absl::StrCat("uniform-", std::string(plan::ActionName(spec.action)),
                                plan.plan_id.substr(plan.plan_id.rfind('-')));
    return plan;
  }
  if (spec.method == "greedy") return search::GreedyPlan(table, spec.bits);
  if (spec.method == "lagrange") return search::LagrangePlan(table, spec.bits);
  if (spec.method == "search" || spec.method == "measured") {
    return absl::InvalidArgumentError(
        absl::StrCat("--method ", spec.method,
                     " measures plans: job::SearchPlan / job::MeasureProxy builds it"));
  }
  return search::RandomPlan(table, spec.bits, spec.seed);
}

absl::StatusOr<std::vector<std::pair<std::string, plan::Plan>>> BaselinesAt(
    const plan::UnitTable& table, double target_bits, uint64_t seed) {
  std::vector<std::pair<std::string, plan::Plan>> out;
  // The uniform actions bracketing the target: the most bits within it and the fewest
  // above it (the plainest anchor at its own bits, e.g. uniform 2-bit at ~2.35 bits).
  const plan::Plan* within = nullptr;
  const plan::Plan* above = nullptr;
  std::vector<plan::Plan> uniform;
  for (plan::Action a : plan::kAllActions) uniform.push_back(search::UniformPlan(table, a));
  for (const plan::Plan& u : uniform) {
    const double bits = table.EffectiveBits(u.actions);
    if (bits <= target_bits + kSameBitsTolerance) {
      if (within == nullptr || bits > table.EffectiveBits(within->actions)) within = &u;
    } else if (above == nullptr || bits < table.EffectiveBits(above->actions)) {
      above = &u;
    }
  }
  for (const plan::Plan* u : {within, above}) {
    if (u == nullptr) continue;
    const plan::Action a = plan::ActionFromIndex(u->actions[0]).value();
    out.emplace_back(absl::StrCat("uniform-", std::string(plan::ActionName(a))), *u);
  }
  WQ_ASSIGN_OR_RETURN(plan::Plan greedy, search::GreedyPlan(table, target_bits));
  out.emplace_back("greedy", std::move(greedy));
  WQ_ASSIGN_OR_RETURN(plan::Plan lagrange, search::LagrangePlan(table, target_bits));
  out.emplace_back("lagrange", std::move(lagrange));
  WQ_ASSIGN_OR_RETURN(plan::Plan random, search::RandomPlan(table, target_bits, seed));
  out.emplace_back("random", std::move(random));
  return out;
}

}  // namespace windquant::job
