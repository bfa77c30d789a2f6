#include "common/rl/plan_validation.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/plan/action.h"

namespace windquant::rl {

absl::Status ValidatePlan(const v1::Plan& plan, const plan::UnitTable& table, PlanScope scope) {
  const bool run = scope == PlanScope::kRun;
  if (plan.model_fingerprint() != table.fingerprint) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan.model_fingerprint: ", absl::CHexEscape(plan.model_fingerprint().substr(0, 12)),
        " is not ", run ? "the run's model " : "this stage's model ",
        table.fingerprint.substr(0, 12)));
  }
  const size_t entries = static_cast<size_t>(plan.actions_size());
  if (run && entries != table.units.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan.actions: ", entries, " entries, the unit table has ", table.units.size(), " units"));
  }
  const size_t needed = table.units.empty() ? 0 : table.units.back().id + 1;
  if (!run && entries < needed) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan.actions: ", entries, " entries, this stage's units need ", needed));
  }
  for (int i = 0; i < plan.actions_size(); ++i) {
    if (plan.actions(i) >= static_cast<uint32_t>(plan::kNumActions)) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.actions[", i, "]: ", plan.actions(i), " is not an action index"));
    }
  }
  return absl::OkStatus();
}

}  // namespace windquant::rl
