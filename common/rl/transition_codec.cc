#include "common/rl/transition_codec.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/rl/plan_validation.h"
#include "common/rl/state_features.h"
#include "common/search/baselines.h"

namespace windquant::rl {

void EncodeEpisode(const Episode& e, const plan::UnitTable& table, v1::TransitionBatch* out) {
  out->set_actor_id(e.actor_id);
  out->set_episode_id(e.episode_id);
  out->set_policy_version(e.policy_version);
  out->set_state_dim(kStateDim);
  out->set_num_actions(plan::kNumActions);
  std::string masks;
  for (const Transition& t : e.steps) {
    for (float x : t.state) out->add_states(x);
    for (uint8_t m : t.mask) masks.push_back(m ? 1 : 0);
    out->add_actions(static_cast<uint32_t>(t.action));
    out->add_rewards(t.reward);
    out->add_log_probs(t.log_prob);
    out->add_values(t.value);
  }
  out->set_masks(masks);
  e.plan.ToProto(table, out->mutable_plan());
  if (e.screened_out) {
    out->set_screened_out(true);
    out->set_predicted_log_ppl(e.predicted_log_ppl);
  }
}

namespace {

absl::Status Bad(const std::string& message) { return absl::InvalidArgumentError(message); }

// The batch has `steps` transitions of the state and action shape of this build.
absl::Status CheckShape(const v1::TransitionBatch& b, size_t steps) {
  if (b.state_dim() != kStateDim) {
    return Bad(
        absl::StrCat("state_dim: ", b.state_dim(), ", the state has ", kStateDim, " features"));
  }
  if (b.num_actions() != plan::kNumActions) {
    return Bad(absl::StrCat("num_actions: ", b.num_actions(), ", expected ", plan::kNumActions));
  }
  if (static_cast<size_t>(b.actions_size()) != steps) {
    return Bad(absl::StrCat("actions: ", b.actions_size(), " steps, the unit table has ", steps,
                            " units"));
  }
  if (static_cast<size_t>(b.states_size()) != steps * kStateDim) {
    return Bad(absl::StrCat("states: ", b.states_size(),
                            " numbers, expected steps * state_dim = ", steps * kStateDim));
  }
  if (b.masks().size() != steps * plan::kNumActions) {
    return Bad(
        absl::StrCat("masks: ", b.masks().size(), " bytes, expected ", steps * plan::kNumActions));
  }
  for (const auto& [name, size] : {std::pair<const char*, int>{"rewards", b.rewards_size()},
                                   {"log_probs", b.log_probs_size()},
                                   {"values", b.values_size()}}) {
    if (static_cast<size_t>(size) != steps) {
      return Bad(absl::StrCat(name, ": ", size, " entries, expected ", steps));
    }
  }
  return absl::OkStatus();
}

// Step `t` of a batch whose shape CheckShape accepted.
absl::Status DecodeStep(const v1::TransitionBatch& b, size_t t, size_t steps, Transition* out) {
  out->state.assign(b.states().begin() + t * kStateDim, b.states().begin() + (t + 1) * kStateDim);
  for (size_t i = 0; i < out->state.size(); ++i) {
    if (!std::isfinite(out->state[i])) {
      return Bad(absl::StrCat("states[", t * kStateDim + i, "]: not finite"));
    }
  }
  out->mask.assign(b.masks().begin() + t * plan::kNumActions,
                   b.masks().begin() + (t + 1) * plan::kNumActions);
  const uint32_t a = b.actions(t);
  if (a >= static_cast<uint32_t>(plan::kNumActions)) {
    return Bad(absl::StrCat("actions[", t, "]: ", a, " is not an action index"));
  }
  if (!out->mask[a]) return Bad(absl::StrCat("actions[", t, "]: action ", a, " is masked"));
  for (const auto& [name, x] : {std::pair<const char*, float>{"rewards", b.rewards(t)},
                                {"log_probs", b.log_probs(t)},
                                {"values", b.values(t)}}) {
    if (!std::isfinite(x)) return Bad(absl::StrCat(name, "[", t, "]: not finite"));
  }
  out->action = a;
  out->reward = b.rewards(t);
  out->log_prob = b.log_probs(t);
  out->value = b.values(t);
  out->done = t + 1 == steps;
  out->policy_version = b.policy_version();
  out->episode_id = static_cast<int64_t>(b.episode_id());
  out->step = static_cast<int64_t>(t);
  return absl::OkStatus();
}

// The plan is the steps' actions, or (the repair budget mode) their repair
// to the plan's target (search::RepairToBudget, in either order).
absl::Status CheckPlanOfSteps(const Episode& e, const plan::UnitTable& table) {
  std::vector<int> chosen(e.steps.size());
  for (size_t t = 0; t < chosen.size(); ++t) chosen[t] = static_cast<int>(e.steps[t].action);
  if (e.plan.actions == chosen) return absl::OkStatus();
  // The walk order first: it costs a fraction of the proxy's heap (rl_bench).
  for (search::RepairOrder order : {search::RepairOrder::kWalk, search::RepairOrder::kProxy}) {
    if (e.plan.actions == search::RepairToBudget(table, chosen, e.plan.target_bits, order)) {
      return absl::OkStatus();
    }
  }
  size_t t = 0;
  while (e.plan.actions[t] == chosen[t]) ++t;
  return Bad(absl::StrCat("plan.actions[", t,
                          "]: differs from the transitions' action, and the plan is not their "
                          "repair to its target"));
}

}  // namespace

absl::StatusOr<Episode> DecodeEpisode(const v1::TransitionBatch& b, const plan::UnitTable& table) {
  const size_t steps = table.units.size();
  WQ_RETURN_IF_ERROR(CheckShape(b, steps));
  WQ_RETURN_IF_ERROR(ValidatePlan(b.plan(), table, PlanScope::kRun));
  Episode e;
  e.actor_id = b.actor_id();
  e.episode_id = b.episode_id();
  e.policy_version = b.policy_version();
  e.steps.resize(steps);
  for (size_t t = 0; t < steps; ++t) WQ_RETURN_IF_ERROR(DecodeStep(b, t, steps, &e.steps[t]));
  e.plan = plan::Plan::FromProto(b.plan());
  WQ_RETURN_IF_ERROR(CheckPlanOfSteps(e, table));
  if (b.screened_out()) {
    if (!std::isfinite(b.predicted_log_ppl())) return Bad("predicted_log_ppl: not finite");
    e.screened_out = true;
    e.predicted_log_ppl = b.predicted_log_ppl();
  }
  return e;
}

}  // namespace windquant::rl
