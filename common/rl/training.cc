#include "common/rl/training.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/rl/environment.h"
#include "common/rl/lagrange.h"
#include "common/rl/policy.h"
#include "common/rl/ppo.h"

namespace windquant::rl {
namespace {

constexpr double kWarmStartLearningRate = 1e-3;
// Plans may sit exactly on the budget; the sums behind EffectiveBits round.
constexpr double kFeasibleBitsSlack = 1e-9;

}  // namespace

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

absl::StatusOr<double> BehaviourClone(Policy& policy, const std::vector<Transition>& transitions,
                                      int steps, double lr, double target_prob) {
  if (transitions.empty()) return absl::InvalidArgumentError("behaviour cloning: no transitions");
  const int64_t n = static_cast<int64_t>(transitions.size());
  const int64_t s = policy.options().state_dim, a = policy.options().num_actions;
  try {
    at::Tensor states = at::empty({n, s}, at::kFloat);
    at::Tensor masks = at::empty({n, a}, at::kByte);
    at::Tensor actions = at::empty({n}, at::kLong);
    for (int64_t i = 0; i < n; ++i) {
      const Transition& t = transitions[i];
      if (static_cast<int64_t>(t.state.size()) != s || static_cast<int64_t>(t.mask.size()) != a) {
        return absl::InvalidArgumentError(
            absl::StrCat("behaviour cloning: transition ", i, " has a wrong shape"));
      }
      std::copy(t.state.begin(), t.state.end(), states.data_ptr<float>() + i * s);
      std::copy(t.mask.begin(), t.mask.end(), masks.data_ptr<uint8_t>() + i * a);
      actions.data_ptr<int64_t>()[i] = t.action;
    }
    const at::Tensor bool_masks = masks.to(at::kBool);
    std::vector<at::Tensor> params = policy.Parameters();
    std::vector<at::Tensor> m1, m2;
    for (const auto& p : params) {
      m1.push_back(at::zeros_like(p));
      m2.push_back(at::zeros_like(p));
    }
    constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
    double mean_prob = 0;
    for (int step = 0; step <= steps; ++step) {
      WQ_ASSIGN_OR_RETURN(EvaluateResult r, policy.Evaluate(states, bool_masks, actions));
      mean_prob = r.log_probs.detach().exp().mean().item<double>();
      if (step == steps || mean_prob >= target_prob) break;
      for (auto& p : params) {
        if (p.grad().defined()) p.mutable_grad().zero_();
      }
      at::Tensor loss = -r.log_probs.mean();
      loss.backward();
      at::NoGradGuard no_grad;
      const double c1 = 1.0 - std::pow(kBeta1, step + 1), c2 = 1.0 - std::pow(kBeta2, step + 1);
      for (size_t k = 0; k < params.size(); ++k) {
        const at::Tensor g = params[k].grad();
        if (!g.defined()) continue;
        m1[k].mul_(kBeta1).add_(g, 1.0 - kBeta1);
        m2[k].mul_(kBeta2).addcmul_(g, g, 1.0 - kBeta2);
        params[k].sub_((m1[k] / c1) / ((m2[k] / c2).sqrt() + kEps) * lr);
      }
    }
    for (auto& p : params) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
    return mean_prob;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("behaviour cloning: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<double> WarmStartOnPlan(Policy& policy, std::shared_ptr<const UnitCosts> costs,
                                       const config::RunConfig& config, double target_bits,
                                       const std::vector<int>& plan, double target_prob) {
  WQ_ASSIGN_OR_RETURN(std::vector<Transition> demo,
                      ReplayPlan(std::move(costs), MakeEnvOptions(config.env, target_bits), plan));
  return BehaviourClone(policy, demo, config.training.warm_start_steps, kWarmStartLearningRate,
                        target_prob);
}

absl::StatusOr<std::vector<int>> PolicyGreedyPlan(const Policy& policy,
                                                  std::shared_ptr<const UnitCosts> costs,
                                                  const config::RunConfig& config,
                                                  double target_bits) {
  BatchedEnvironment env(std::move(costs), MakeEnvOptions(config.env, target_bits), 1);
  // Deterministic: the generator is not drawn from.
  at::Generator gen = MakeGenerator(0);
  WQ_ASSIGN_OR_RETURN(Rollout r, env.Run(policy, gen, /*deterministic=*/true, -1));
  return std::move(r.plans[0]);
}

bool ConsiderCandidate(const CandidatePlan& candidate, double final_target, CandidatePlan* best,
                       CandidatePlan* best_stage) {
  const PlanEvaluation& e = candidate.evaluation;
  if (!std::isfinite(e.eval_ppl)) return false;
  auto better = [&](const CandidatePlan& c) {
    return c.actions.empty() || e.eval_ppl < c.evaluation.eval_ppl;
  };
  bool changed = false;
  if (e.effective_bits <= final_target + kFeasibleBitsSlack && better(*best)) {
    *best = candidate;
    best->target_bits = final_target;
    changed = true;
  }
  if (best_stage != nullptr && candidate.source != "lagrange" &&
      e.effective_bits <= candidate.target_bits + kFeasibleBitsSlack && better(*best_stage)) {
    *best_stage = candidate;
  }
  return changed;
}

PolicyOptions PolicyOptionsFromConfig(const config::RunConfig& c) {
  PolicyOptions po;
  po.state_dim = kStateDim;
  po.num_actions = quant::kNumActions;
  po.hidden_sizes.assign(c.ppo.hidden.begin(), c.ppo.hidden.end());
  po.init_seed = c.training.seed;
  return po;
}

absl::StatusOr<std::unique_ptr<PpoLearner>> CreatePpoLearner(const config::RunConfig& c) {
  return PpoLearner::Create(PolicyOptionsFromConfig(c), c.ppo, c.training.seed);
}

}  // namespace windquant::rl
