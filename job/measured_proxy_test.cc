#include "job/measured_proxy.h"

#include <cmath>
#include <vector>

#include "common/search/baselines.h"
#include "common/testing/status_matchers.h"
#include "common/testing/synthetic_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::job {
namespace {

using testing::kBaseError;

// The "model": ln PPL = 1 + sum_u w_u * s_g(u) * kBaseError[a_u], w_u = n_u / (weights of
// its group), with s_g in the reverse order of the table's own (rounding) errors, so that
// the table's proxy ranks the linears wrong.
struct Model {
  explicit Model(const plan::UnitTable& t) : table(t) {
    std::vector<double> group_weights;
    for (const plan::Unit& u : t.units) {
      const size_t g = Group(u);
      if (g >= group_weights.size()) group_weights.resize(g + 1, 0.0);
      group_weights[g] += static_cast<double>(u.n());
    }
    for (const plan::Unit& u : t.units) {
      weight.push_back(static_cast<double>(u.n()) / group_weights[Group(u)]);
      sensitivity.push_back(1.0 / (1.0 + 100.0 * u.error[4]));  // reversed
    }
  }
  static size_t Group(const plan::Unit& u) { return static_cast<size_t>(u.layer * 7 + u.matrix); }
  double Nll(const std::vector<int>& actions) const {
    double nll = 1.0;
    for (size_t i = 0; i < actions.size(); ++i) {
      nll += weight[i] * sensitivity[i] * kBaseError[actions[i]];
    }
    return nll;
  }
  PlanMeasure Measure(int64_t* calls) const {
    return [this, calls](const std::vector<int>& actions) -> absl::StatusOr<double> {
      ++*calls;
      return std::exp(Nll(actions));
    };
  }
  // The table whose proxy is this model's loss exactly (groups of one unit).
  plan::UnitTable TrueTable() const {
    plan::UnitTable t = table;
    const double total = static_cast<double>(t.TotalWeights());
    for (size_t i = 0; i < t.units.size(); ++i) {
      for (int a = 0; a < plan::kNumActions; ++a) {
        t.units[i].error[a] =
            sensitivity[i] * kBaseError[a] * total / static_cast<double>(t.units[i].n());
      }
    }
    return t;
  }
  const plan::UnitTable& table;
  std::vector<double> weight, sensitivity;
};

MeasuredProxyOptions Options(double bits, int rounds) {
  MeasuredProxyOptions o;
  o.target_bits = bits;
  o.rounds = rounds;
  return o;
}

TEST(MeasuredProxyTest, LearnsTheModelsLossAndPicksItsLagrangianPlan) {
  const plan::UnitTable table = testing::SyntheticTable(21, 3);  // one unit per linear
  const Model model(table);
  int64_t calls = 0;
  auto r = MeasureProxy(table, Options(3.0, 1), model.Measure(&calls));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->groups, 21);
  // Uniform 3-bit fits 3.0 bits? No (scales and salient entries cost extra): the anchor is
  // uniform 2-bit, so 6 probes per linear, the anchor, and the final plan.
  EXPECT_EQ(r->evaluations, calls);
  EXPECT_EQ(calls, 1 + 21 * 6 + 1);
  EXPECT_EQ(calls, MeasuredProxyEvaluations(table, 1));
  // The measured proxy of any plan is its change of the model's NLL from 16 bits everywhere.
  const std::vector<int> fp(table.units.size(), 0);
  for (uint64_t seed = 0; seed < 5; ++seed) {
    const absl::StatusOr<plan::Plan> random = search::RandomPlan(table, 3.0, seed);
    ASSERT_TRUE(random.ok()) << random.status();
    EXPECT_NEAR(search::ProxyError(r->table, random->actions),
                model.Nll(random->actions) - model.Nll(fp), 1e-9);
  }
  const absl::StatusOr<plan::Plan> best = search::LagrangePlan(model.TrueTable(), 3.0);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(r->actions, best->actions);
  EXPECT_NEAR(r->selection_ppl, std::exp(model.Nll(r->actions)), 1e-9);
  // The rounding proxy's plan is worse on this model; the measured one is within budget.
  const absl::StatusOr<plan::Plan> rounding = search::LagrangePlan(table, 3.0);
  ASSERT_TRUE(rounding.ok()) << rounding.status();
  EXPECT_LT(model.Nll(r->actions), model.Nll(rounding->actions));
  EXPECT_LE(table.EffectiveBits(r->actions), 3.0);
}

TEST(MeasuredProxyTest, SplitsALinearsLossOverItsUnitsAndStopsWhenThePlanSettles) {
  plan::UnitTable table = testing::SyntheticTable(28, 5);
  for (plan::Unit& u : table.units) {  // two units per linear
    u.layer = static_cast<int32_t>(u.id / 2 / 7);
    u.matrix = static_cast<int32_t>(u.id / 2 % 7);
  }
  const Model model(table);
  int64_t calls = 0;
  auto r = MeasureProxy(table, Options(2.5, 5), model.Measure(&calls));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->groups, 14);
  EXPECT_EQ(r->evaluations, calls);
  EXPECT_LT(r->anchor_ppl.size(), 5u);  // settled before round 5
  EXPECT_LE(calls, MeasuredProxyEvaluations(table, static_cast<int>(r->anchor_ppl.size())));
  // Never worse than a plan it measured, e.g. its first anchor.
  EXPECT_LE(r->selection_ppl, r->anchor_ppl[0]);
  EXPECT_NEAR(r->selection_ppl, std::exp(model.Nll(r->actions)), 1e-9);
  const double total = static_cast<double>(table.TotalWeights());
  for (size_t g = 0; g < 14; ++g) {
    for (int a = 0; a < plan::kNumActions; ++a) {
      double sum = 0;
      for (size_t i : {2 * g, 2 * g + 1}) {
        sum += static_cast<double>(table.units[i].n()) / total * r->table.units[i].error[a];
      }
      // Linear in the actions: the same whatever the anchor, 0 at 16 bits.
      EXPECT_NEAR(sum,
                  model.weight[2 * g] * model.sensitivity[2 * g] * kBaseError[a] +
                      model.weight[2 * g + 1] * model.sensitivity[2 * g + 1] * kBaseError[a],
                  1e-9)
          << "linear " << g << " action " << a;
    }
  }
}

TEST(MeasuredProxyTest, NoisyMeasurementsGiveErrorsThatNeverFallWithFewerBits) {
  const plan::UnitTable table = testing::SyntheticTable(14, 7);
  const Model model(table);
  // Noise that makes 1 bit look better than 2 for every linear.
  const PlanMeasure noisy = [&](const std::vector<int>& actions) -> absl::StatusOr<double> {
    double nll = model.Nll(actions);
    for (int a : actions) nll -= a == 6 ? 0.2 * kBaseError[6] / 14 : 0.0;
    return std::exp(nll);
  };
  auto r = MeasureProxy(table, Options(2.5, 2), noisy);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const plan::Unit& u : r->table.units) {
    EXPECT_EQ(u.error[0], 0.0);
    for (int a = 1; a < plan::kNumActions; ++a) {
      EXPECT_GE(u.error[a], u.error[a - 1]) << "unit " << u.id << " action " << a;
    }
  }
}

TEST(MeasuredProxyTest, RefusesBadOptionsAndBadMeasurements) {
  const plan::UnitTable table = testing::SyntheticTable(14, 1);
  const Model model(table);
  int64_t calls = 0;
  using testing::StatusIs;
  EXPECT_THAT(MeasureProxy(table, Options(2.5, 0), model.Measure(&calls)),
              StatusIs(absl::StatusCode::kInvalidArgument, "--rounds"));
  EXPECT_THAT(MeasureProxy(table, Options(1.0, 1), model.Measure(&calls)),
              StatusIs(absl::StatusCode::kInvalidArgument, "--bits"));
  EXPECT_EQ(calls, 0);
  int64_t n = 0;
  const PlanMeasure nan_third = [&](const std::vector<int>&) -> absl::StatusOr<double> {
    return ++n == 3 ? std::nan("") : 10.0;
  };
  EXPECT_THAT(MeasureProxy(table, Options(2.5, 1), nan_third),
              StatusIs(absl::StatusCode::kInvalidArgument, "round 1: perplexity nan"));
  const PlanMeasure gone = [](const std::vector<int>&) -> absl::StatusOr<double> {
    return absl::UnavailableError("evaluator gone");
  };
  EXPECT_THAT(MeasureProxy(table, Options(2.5, 1), gone),
              StatusIs(absl::StatusCode::kUnavailable, "evaluator gone"));
}

}  // namespace
}  // namespace windquant::job
