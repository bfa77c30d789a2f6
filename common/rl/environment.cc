#include "common/rl/environment.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/plan/action.h"
#include "common/search/baselines.h"

namespace windquant::rl {
namespace {

// Relative slack on the budget test so that a plan that fills the budget
// exactly is not rejected by rounding in the running sums.
constexpr double kBudgetRelativeSlack = 1e-12;
constexpr int kSkipAction = 0;  // plan::Action::k16

}  // namespace

EnvOptions MakeEnvOptions(const EnvironmentOptions& env, double target_bits) {
  EnvOptions o;
  o.target_bits = target_bits;
  o.budget_mode = env.budget_mode == "soft"     ? BudgetMode::kSoft
                  : env.budget_mode == "repair" ? BudgetMode::kRepair
                                                : BudgetMode::kHard;
  o.repair_order =
      env.repair_order == "walk" ? search::RepairOrder::kWalk : search::RepairOrder::kProxy;
  o.step_saving_weight = env.step_saving_weight;
  o.skip_penalty = env.skip_penalty;
  return o;
}

absl::StatusOr<std::shared_ptr<const UnitCosts>> UnitCosts::Create(const plan::UnitTable& table) {
  if (table.units.empty()) return absl::InvalidArgumentError("unit table: no units");
  auto c = std::shared_ptr<UnitCosts>(new UnitCosts());
  c->table_ = table;
  const int64_t n = c->num_units();
  c->min_bits_.resize(n);
  c->cheapest_.resize(n);
  c->suffix_weights_.assign(n + 1, 0.0);
  c->suffix_min_bits_.assign(n + 1, 0.0);
  for (int64_t u = 0; u < n; ++u) {
    const plan::Unit& unit = table.units[u];
    if (unit.n() <= 0)
      return absl::InvalidArgumentError(absl::StrCat("unit table: unit ", u, " is empty"));
    int best = 0;
    for (int a = 0; a < plan::kNumActions; ++a) {
      if (!std::isfinite(unit.bits[a]) || unit.bits[a] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("unit table: unit ", u, " bits[", a,
                                                       "] is not a finite non-negative number"));
      }
      if (unit.bits[a] < unit.bits[best]) best = a;
    }
    c->cheapest_[u] = best;
    c->min_bits_[u] = unit.bits[best];
  }
  for (int64_t u = n - 1; u >= 0; --u) {
    c->suffix_weights_[u] = c->suffix_weights_[u + 1] + static_cast<double>(table.units[u].n());
    c->suffix_min_bits_[u] = c->suffix_min_bits_[u + 1] + c->min_bits_[u];
  }
  c->total_weights_ = c->suffix_weights_[0];
  return std::shared_ptr<const UnitCosts>(std::move(c));
}

Environment::Environment(std::shared_ptr<const UnitCosts> costs, const EnvOptions& options)
    : costs_(std::move(costs)),
      options_(options),
      budget_bits_(options.target_bits * costs_->total_weights()) {
  Reset();
}

void Environment::Reset() {
  step_ = 0;
  spent_bits_ = 0;
  actions_.clear();
  actions_.reserve(costs_->num_units());
}

EpisodeContext Environment::Context() const {
  EpisodeContext c;
  c.step = step_;
  c.num_units = costs_->num_units();
  c.bits_left = budget_bits_ - spent_bits_;
  c.weights_left = costs_->suffix_weights(step_);
  c.min_bits_left = costs_->suffix_min_bits(step_);
  c.previous_action = actions_.empty() ? 0 : actions_.back();
  return c;
}

void Environment::State(float* out) const {
  ComputeState(costs_->table().units[step_], Context(), out);
}

void Environment::Mask(uint8_t* out) const {
  if (options_.budget_mode != BudgetMode::kHard) {
    std::fill(out, out + plan::kNumActions, uint8_t{1});
    return;
  }
  const double limit = budget_bits_ * (1.0 + kBudgetRelativeSlack) - spent_bits_ -
                       costs_->suffix_min_bits(step_ + 1);
  bool any = false;
  for (int a = 0; a < plan::kNumActions; ++a) {
    out[a] = costs_->bits(step_, a) <= limit ? 1 : 0;
    any = any || out[a];
  }
  if (!any) out[costs_->cheapest_action(step_)] = 1;
}

absl::StatusOr<float> Environment::Step(int action) {
  if (done()) return absl::InvalidArgumentError("environment: episode already finished");
  if (action < 0 || action >= plan::kNumActions) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment: action ", action, " out of range"));
  }
  uint8_t mask[plan::kNumActions];
  Mask(mask);
  if (!mask[action]) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment: action ", action, " is masked at step ", step_));
  }
  const plan::Unit& unit = costs_->table().units[step_];
  const double n = static_cast<double>(unit.n());
  const double weights_left = costs_->suffix_weights(step_);
  const double running_target = (budget_bits_ - spent_bits_) / weights_left;
  const double bits = costs_->bits(step_, action);
  double reward =
      options_.step_saving_weight * (n / costs_->total_weights()) * (running_target - bits / n);
  if (action == kSkipAction) reward -= options_.skip_penalty;
  spent_bits_ += bits;
  actions_.push_back(action);
  ++step_;
  return static_cast<float>(reward);
}

BatchedEnvironment::BatchedEnvironment(std::shared_ptr<const UnitCosts> costs,
                                       const EnvOptions& options, int num_envs)
    : costs_(costs) {
  envs_.reserve(num_envs);
  for (int i = 0; i < num_envs; ++i) envs_.emplace_back(costs, options);
}

absl::StatusOr<Rollout> BatchedEnvironment::Run(const Policy& policy, at::Generator& generator,
                                                bool deterministic, int64_t first_episode_id) {
  const int64_t n = num_envs();
  if (n == 0) return Rollout{};
  for (auto& e : envs_) e.Reset();
  Rollout out;
  out.episodes.assign(n, {});
  out.step_return.assign(n, 0.0);
  at::Tensor states = at::empty({n, kStateDim}, at::kFloat);
  at::Tensor masks_u8 = at::empty({n, plan::kNumActions}, at::kByte);
  float* s = states.data_ptr<float>();
  uint8_t* m = masks_u8.data_ptr<uint8_t>();
  int64_t t = 0;
  while (!envs_.front().done()) {
    for (int64_t i = 0; i < n; ++i) {
      envs_[i].State(s + i * kStateDim);
      envs_[i].Mask(m + i * plan::kNumActions);
    }
    ActResult act;
    try {
      absl::StatusOr<ActResult> r =
          policy.Act(states, masks_u8.to(at::kBool), generator, deterministic);
      if (!r.ok()) return r.status();
      act = *std::move(r);
    } catch (const c10::Error& e) {
      return absl::InternalError(
          absl::StrCat("rollout: torch error: ", e.what_without_backtrace()));
    }
    const int64_t* a = act.actions.data_ptr<int64_t>();
    const float* lp = act.log_probs.data_ptr<float>();
    const float* v = act.values.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
      Transition tr;
      tr.state.assign(s + i * kStateDim, s + (i + 1) * kStateDim);
      tr.mask.assign(m + i * plan::kNumActions, m + (i + 1) * plan::kNumActions);
      tr.action = a[i];
      tr.log_prob = lp[i];
      tr.value = v[i];
      tr.policy_version = policy.version();
      tr.episode_id = first_episode_id + i;
      tr.step = t;
      absl::StatusOr<float> r = envs_[i].Step(static_cast<int>(a[i]));
      if (!r.ok()) return r.status();
      tr.reward = *r;
      tr.done = envs_[i].done();
      out.step_return[i] += *r;
      out.episodes[i].push_back(std::move(tr));
    }
    ++t;
  }
  const EnvOptions& o = envs_.front().options();
  const plan::UnitTable& table = costs_->table();
  for (int64_t i = 0; i < n; ++i) {
    if (o.budget_mode == BudgetMode::kRepair) {
      out.plans.push_back(
          search::RepairToBudget(table, envs_[i].actions(), o.target_bits, o.repair_order));
      out.effective_bits.push_back(table.EffectiveBits(out.plans.back()));
    } else {
      out.plans.push_back(envs_[i].actions());
      out.effective_bits.push_back(envs_[i].EffectiveBits());
    }
  }
  return out;
}

double ChosenBits(const plan::UnitTable& table, const std::vector<Transition>& steps) {
  if (steps.size() != table.units.size()) return NAN;
  double bits = 0;
  for (size_t t = 0; t < steps.size(); ++t) {
    const int64_t a = steps[t].action;
    if (a < 0 || a >= plan::kNumActions) return NAN;
    bits += table.units[t].bits[a];
  }
  return bits / static_cast<double>(table.TotalWeights());
}

absl::StatusOr<std::vector<Transition>> ReplayPlan(std::shared_ptr<const UnitCosts> costs,
                                                   const EnvOptions& options,
                                                   const std::vector<int>& plan) {
  if (static_cast<int64_t>(plan.size()) != costs->num_units()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan: ", plan.size(), " actions for ", costs->num_units(), " units"));
  }
  Environment env(std::move(costs), options);
  std::vector<Transition> out;
  out.reserve(plan.size());
  for (size_t t = 0; t < plan.size(); ++t) {
    Transition tr;
    tr.state.resize(kStateDim);
    tr.mask.resize(plan::kNumActions);
    env.State(tr.state.data());
    env.Mask(tr.mask.data());
    tr.action = plan[t];
    tr.step = static_cast<int64_t>(t);
    absl::StatusOr<float> r = env.Step(plan[t]);
    if (!r.ok()) return r.status();
    tr.reward = *r;
    tr.done = env.done();
    out.push_back(std::move(tr));
  }
  return out;
}

PlanEvaluation ChargedEvaluation(const EnvironmentOptions& env, const plan::UnitTable& table,
                                 const std::vector<Transition>& steps, PlanEvaluation measured) {
  if (env.budget_mode == "repair") {
    const double chosen = ChosenBits(table, steps);
    if (std::isfinite(chosen)) measured.effective_bits = chosen;
  }
  return measured;
}

}  // namespace windquant::rl
