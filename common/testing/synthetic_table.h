// Synthetic unit tables and a synthetic plan evaluator for the RL tests
// (no model needed): units with real effective bits (effective_bits.h) and
// an error per action = sensitivity(u) * base error(a), where the
// sensitivity is visible to the policy through kFeatErrRatio. The evaluator's
// "perplexity" is exp(base + sum_u n_u/N * error(u, a_u)), so the optimum of
// a budget is the error-optimal knapsack, which tests can compute.
// Header-only; thread-compatible.
#ifndef WINDQUANT_COMMON_TESTING_SYNTHETIC_TABLE_H_
#define WINDQUANT_COMMON_TESTING_SYNTHETIC_TABLE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/plan/effective_bits.h"
#include "common/plan/unit_table.h"
#include "common/rl/episode_reward.h"

namespace windquant::testing {

inline constexpr double kBaseError[plan::kNumActions] = {0.0, 1e-4, 0.01, 0.04, 0.15, 0.3, 0.5};

// `units` units in layers of 7 matrices; chunk width 256, rows 32 or 64.
inline plan::UnitTable SyntheticTable(int units, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  plan::UnitTable t;
  t.chunk_size = 256;
  t.salient_fraction = 0.005;
  t.fingerprint = "synthetic-" + std::to_string(seed) + "-" + std::to_string(units);
  t.num_layers = (units + 6) / 7;
  t.end_layer = t.num_layers;
  for (int i = 0; i < units; ++i) {
    plan::Unit u;
    u.id = i;
    u.layer = i / 7;
    u.matrix = i % 7;
    u.rows = (i % 3 == 0) ? 64 : 32;
    u.cols = 256;
    u.salient_count = plan::SalientCount(u.n(), t.salient_fraction);
    // Sensitivity spans two decades; a few units are very sensitive.
    const double sens = std::pow(10.0, 2.0 * u01(rng)) * (u01(rng) < 0.1 ? 10.0 : 1.0);
    for (int a = 0; a < plan::kNumActions; ++a) {
      u.bits[a] = plan::UnitEffectiveBits(u.rows, u.cols, u.salient_count, plan::kAllActions[a]);
      u.error[a] = sens * kBaseError[a] / 100.0;
    }
    for (int f = 0; f < plan::kNumStaticFeatures; ++f) u.features[f] = static_cast<float>(u01(rng));
    u.features[plan::kFeatErrRatio] =
        static_cast<float>(std::min(1.0, std::log10(sens * 10.0) / 4.0));
    u.features[plan::kFeatIsAttention] = u.matrix < 4 ? 1.0f : 0.0f;
    u.features[plan::kFeatIsMlp] = u.matrix < 4 ? 0.0f : 1.0f;
    u.features[plan::kFeatDepth] =
        t.num_layers > 1 ? static_cast<float>(u.layer) / (t.num_layers - 1) : 0.0f;
    t.units.push_back(u);
  }
  return t;
}

// PPL = exp(kBaseNll + sum_u (n_u / N) * error(u, a)); loss increase = the sum.
class SyntheticEvaluator : public rl::PlanEvaluator {
 public:
  static constexpr double kBaseNll = 1.0;
  explicit SyntheticEvaluator(const plan::UnitTable* table) : table_(table) {}
  absl::StatusOr<rl::PlanEvaluation> Evaluate(const std::vector<int>& actions) override {
    ++calls_;
    if (actions.size() != table_->units.size())
      return absl::InvalidArgumentError("plan: wrong length");
    rl::PlanEvaluation e;
    e.effective_bits = table_->EffectiveBits(actions);
    e.loss_increase = Loss(actions);
    e.calib_nll = kBaseNll + e.loss_increase;
    e.eval_nll = e.calib_nll;
    e.eval_ppl = std::exp(e.eval_nll);
    e.relative_ppl_increase = e.eval_ppl / fp_eval_ppl() - 1.0;
    return e;
  }
  double fp_eval_ppl() const override { return std::exp(kBaseNll); }
  double Loss(const std::vector<int>& actions) const {
    const double total = static_cast<double>(table_->TotalWeights());
    double loss = 0;
    for (size_t i = 0; i < actions.size(); ++i) {
      const auto& u = table_->units[i];
      loss += static_cast<double>(u.n()) / total * u.error[actions[i]];
    }
    return loss;
  }
  int64_t calls() const { return calls_; }

 private:
  const plan::UnitTable* table_;
  int64_t calls_ = 0;
};

// Error-optimal plan within `target_bits` by a Lagrangian sweep (binary search
// on the price of a bit; each unit picks argmin n/N*error + mu*bits).
inline std::vector<int> LagrangianPlan(const plan::UnitTable& t, double target_bits) {
  const double total = static_cast<double>(t.TotalWeights());
  auto plan_for = [&](double mu) {
    std::vector<int> p(t.units.size());
    for (size_t i = 0; i < t.units.size(); ++i) {
      const auto& u = t.units[i];
      int best = 0;
      double best_cost = 1e300;
      for (int a = 0; a < plan::kNumActions; ++a) {
        const double cost = static_cast<double>(u.n()) / total * u.error[a] + mu * u.bits[a];
        if (cost < best_cost) best_cost = cost, best = a;
      }
      p[i] = best;
    }
    return p;
  };
  double lo = 0, hi = 1.0;
  while (t.EffectiveBits(plan_for(hi)) > target_bits) hi *= 2;
  for (int it = 0; it < 100; ++it) {
    const double mid = 0.5 * (lo + hi);
    (t.EffectiveBits(plan_for(mid)) > target_bits ? lo : hi) = mid;
  }
  return plan_for(hi);
}

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_SYNTHETIC_TABLE_H_
