#include "common/rl/warm_start.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::rl {
namespace {

constexpr double kWarmStartLearningRate = 1e-3;

}  // namespace

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
      c10::NoGradGuard no_grad;
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
                                       const EnvironmentOptions& env, int steps, double target_bits,
                                       const std::vector<int>& plan, double target_prob) {
  WQ_ASSIGN_OR_RETURN(std::vector<Transition> demo,
                      ReplayPlan(std::move(costs), MakeEnvOptions(env, target_bits), plan));
  return BehaviourClone(policy, demo, steps, kWarmStartLearningRate, target_prob);
}

}  // namespace windquant::rl
