#include "common/rl/transition_codec.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/rl/plan_validation.h"
#include "common/rl/state_features.h"

namespace windquant::rl {

void EncodeEpisode(const Episode& e, const quant::UnitTable& table, v1::TransitionBatch* out) {
  out->set_actor_id(e.actor_id);
  out->set_episode_id(e.episode_id);
  out->set_policy_version(e.policy_version);
  out->set_state_dim(kStateDim);
  out->set_num_actions(quant::kNumActions);
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
}

absl::StatusOr<Episode> DecodeEpisode(const v1::TransitionBatch& b, const quant::UnitTable& table) {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (b.state_dim() != kStateDim) {
    return bad(
        absl::StrCat("state_dim: ", b.state_dim(), ", the state has ", kStateDim, " features"));
  }
  if (b.num_actions() != quant::kNumActions) {
    return bad(absl::StrCat("num_actions: ", b.num_actions(), ", expected ", quant::kNumActions));
  }
  const size_t steps = table.units.size();
  if (static_cast<size_t>(b.actions_size()) != steps) {
    return bad(absl::StrCat("actions: ", b.actions_size(), " steps, the unit table has ", steps,
                            " units"));
  }
  if (static_cast<size_t>(b.states_size()) != steps * kStateDim) {
    return bad(absl::StrCat("states: ", b.states_size(),
                            " numbers, expected steps * state_dim = ", steps * kStateDim));
  }
  if (b.masks().size() != steps * quant::kNumActions) {
    return bad(
        absl::StrCat("masks: ", b.masks().size(), " bytes, expected ", steps * quant::kNumActions));
  }
  for (const auto* f : {&b.rewards(), &b.log_probs(), &b.values()}) {
    if (static_cast<size_t>(f->size()) != steps) {
      const char* name = f == &b.rewards()     ? "rewards"
                         : f == &b.log_probs() ? "log_probs"
                                               : "values";
      return bad(absl::StrCat(name, ": ", f->size(), " entries, expected ", steps));
    }
  }
  WQ_RETURN_IF_ERROR(ValidatePlan(b.plan(), table, PlanScope::kRun));
  Episode e;
  e.actor_id = b.actor_id();
  e.episode_id = b.episode_id();
  e.policy_version = b.policy_version();
  e.steps.resize(steps);
  for (size_t t = 0; t < steps; ++t) {
    Transition& tr = e.steps[t];
    tr.state.assign(b.states().begin() + t * kStateDim, b.states().begin() + (t + 1) * kStateDim);
    for (size_t i = 0; i < tr.state.size(); ++i) {
      if (!std::isfinite(tr.state[i])) {
        return bad(absl::StrCat("states[", t * kStateDim + i, "]: not finite"));
      }
    }
    tr.mask.assign(b.masks().begin() + t * quant::kNumActions,
                   b.masks().begin() + (t + 1) * quant::kNumActions);
    const uint32_t a = b.actions(t);
    if (a >= static_cast<uint32_t>(quant::kNumActions)) {
      return bad(absl::StrCat("actions[", t, "]: ", a, " is not an action index"));
    }
    if (!tr.mask[a]) return bad(absl::StrCat("actions[", t, "]: action ", a, " is masked"));
    if (b.plan().actions(t) != a) {
      return bad(absl::StrCat("plan.actions[", t, "]: differs from the transitions' action"));
    }
    if (!std::isfinite(b.rewards(t)) || !std::isfinite(b.log_probs(t)) ||
        !std::isfinite(b.values(t))) {
      return bad(absl::StrCat("rewards/log_probs/values[", t, "]: not finite"));
    }
    tr.action = a;
    tr.reward = b.rewards(t);
    tr.log_prob = b.log_probs(t);
    tr.value = b.values(t);
    tr.done = t + 1 == steps;
    tr.policy_version = b.policy_version();
    tr.episode_id = static_cast<int64_t>(b.episode_id());
    tr.step = static_cast<int64_t>(t);
  }
  e.plan = quant::Plan::FromProto(b.plan());
  return e;
}

}  // namespace windquant::rl
