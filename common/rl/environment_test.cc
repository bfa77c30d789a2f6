#include "common/rl/environment.h"

#include <cmath>
#include <random>

#include "common/search/baselines.h"
#include "common/testing/status_matchers.h"
#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

using ::windquant::testing::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

// Rounding in the running sums vs UnitTable::EffectiveBits.
constexpr double kBitsTolerance = 1e-9;

std::shared_ptr<const UnitCosts> Costs(int units, uint64_t seed) {
  auto c = UnitCosts::Create(testing::SyntheticTable(units, seed));
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

// An untrained seeded policy.
absl::StatusOr<std::unique_ptr<Policy>> SmallPolicy() {
  PolicyOptions po;
  po.init_seed = 11;
  po.hidden_sizes = {32, 32};
  return Policy::Create(po);
}

// Plays one episode choosing uniformly among allowed actions.
std::vector<int> RandomEpisode(Environment& env, std::mt19937_64& rng, double* step_return) {
  env.Reset();
  *step_return = 0;
  uint8_t mask[plan::kNumActions];
  while (!env.done()) {
    env.Mask(mask);
    std::vector<int> allowed;
    for (int a = 0; a < plan::kNumActions; ++a) {
      if (mask[a]) allowed.push_back(a);
    }
    EXPECT_FALSE(allowed.empty());
    auto r = env.Step(allowed[rng() % allowed.size()]);
    EXPECT_TRUE(r.ok()) << r.status();
    *step_return += *r;
  }
  return env.actions();
}

TEST(EnvironmentTest, HardMaskKeepsEveryRandomPlanWithinBudget) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto costs = Costs(40 + static_cast<int>(seed) * 7, seed);
    std::mt19937_64 rng(seed);
    ASSERT_LT(costs->suffix_min_bits(0) / costs->total_weights(), 1.5);
    for (double target : {1.5, 2.0, 2.5, 3.0, 5.0}) {
      EnvOptions o;
      o.target_bits = target;
      Environment env(costs, o);
      for (int episode = 0; episode < 10; ++episode) {
        double ret;
        std::vector<int> plan = RandomEpisode(env, rng, &ret);
        const double bits = costs->table().EffectiveBits(plan);
        EXPECT_LE(bits, target + kBitsTolerance) << "seed " << seed << " target " << target;
        EXPECT_NEAR(bits, env.EffectiveBits(), kBitsTolerance);
      }
    }
  }
}

TEST(EnvironmentTest, MaskAllowsAtLeastTheCheapestWhenTargetIsUnreachable) {
  auto costs = Costs(30, 1);
  EnvOptions o;
  o.target_bits = 0.5;  // below any plan
  Environment env(costs, o);
  uint8_t mask[plan::kNumActions];
  while (!env.done()) {
    env.Mask(mask);
    int allowed = 0;
    for (int a = 0; a < plan::kNumActions; ++a) allowed += mask[a];
    ASSERT_EQ(allowed, 1);
    EXPECT_TRUE(mask[costs->cheapest_action(env.step())]);
    ASSERT_TRUE(env.Step(costs->cheapest_action(env.step())).ok());
  }
}

TEST(EnvironmentTest, MaskedActionIsRejected) {
  auto costs = Costs(30, 2);
  EnvOptions o;
  o.target_bits = 1.7;
  Environment env(costs, o);
  uint8_t mask[plan::kNumActions];
  env.Mask(mask);
  ASSERT_FALSE(mask[0]);  // 16 bits on unit 0 cannot fit a 1.7-bit budget
  EXPECT_THAT(env.Step(0), StatusIs(kInvalid, "environment: action 0 is masked at step 0"));
  EXPECT_THAT(env.Step(7), StatusIs(kInvalid, "environment: action 7 out of range"));
}

TEST(EnvironmentTest, SoftModeAllowsOverrunsAndPenalisesThem) {
  auto costs = Costs(35, 3);
  EnvOptions o;
  o.target_bits = 2.0;
  o.budget_mode = BudgetMode::kSoft;
  Environment env(costs, o);
  uint8_t mask[plan::kNumActions];
  double fp_return = 0;
  while (!env.done()) {
    env.Mask(mask);
    for (int a = 0; a < plan::kNumActions; ++a) ASSERT_TRUE(mask[a]);
    fp_return += *env.Step(0);  // all 16 bit
  }
  EXPECT_GT(env.EffectiveBits(), 2.0);
  Environment cheap(costs, o);
  double cheap_return = 0;
  while (!cheap.done()) cheap_return += *cheap.Step(costs->cheapest_action(cheap.step()));
  EXPECT_LT(cheap.EffectiveBits(), 2.0);
  EXPECT_LT(fp_return, 0.0);
  EXPECT_GT(cheap_return, 0.0);
  // The episode-end term punishes the overrun too.
  PlanEvaluation e;
  e.effective_bits = env.EffectiveBits();
  EnvironmentOptions ec;
  const EpisodeReward r = EpisodeEndReward(ec, e, 0.0, 2.0);
  EXPECT_NEAR(r.violation, env.EffectiveBits() - 2.0, 1e-12);
  EXPECT_LT(r.total, EpisodeEndReward(ec, PlanEvaluation{2.0}, 0.0, 2.0).total);
}

TEST(EnvironmentTest, StateFeaturesAreFiniteAndWithinDocumentedRanges) {
  for (auto mode : {BudgetMode::kHard, BudgetMode::kSoft}) {
    auto costs = Costs(50, 4);
    EnvOptions o;
    o.target_bits = 2.0;
    o.budget_mode = mode;
    Environment env(costs, o);
    std::mt19937_64 rng(4);
    float s[kStateDim];
    uint8_t mask[plan::kNumActions];
    for (int episode = 0; episode < 20; ++episode) {
      env.Reset();
      while (!env.done()) {
        env.State(s);
        for (int i = 0; i < kStateDim; ++i) {
          ASSERT_TRUE(std::isfinite(s[i])) << i;
          const FeatureRange r = StateFeatureRange(i);
          ASSERT_GE(s[i], r.low) << "feature " << i;
          ASSERT_LE(s[i], r.high) << "feature " << i;
        }
        EXPECT_NEAR(s[kFeatProgress], static_cast<double>(env.step()) / costs->num_units(), 1e-6);
        if (mode == BudgetMode::kHard) {
          EXPECT_GE(s[kFeatUrgency], 0.0f);  // the budget stays feasible
        }
        env.Mask(mask);
        std::vector<int> allowed;
        for (int a = 0; a < plan::kNumActions; ++a) {
          if (mask[a]) allowed.push_back(a);
        }
        const int a = allowed[rng() % allowed.size()];
        ASSERT_TRUE(env.Step(a).ok());
        if (!env.done()) {
          env.State(s);
          EXPECT_FLOAT_EQ(s[kFeatPrevAction], a / 6.0f);
        }
      }
    }
  }
}

TEST(EnvironmentTest, StepRewardIsSavingAgainstRunningTarget) {
  // r_t = w * n_t/N * (running target - bits_t/n_t) - skip_penalty * [a == 16],
  // running target = bits left / weights left; hand-computed for two steps.
  auto costs = Costs(21, 5);
  EnvOptions o;
  o.target_bits = 2.5;
  o.step_saving_weight = 0.3;
  o.skip_penalty = 0.7;
  Environment env(costs, o);
  const double N = costs->total_weights();
  const double n0 = static_cast<double>(costs->table().units[0].n());
  const double b0 = costs->bits(0, 4);
  EXPECT_NEAR(*env.Step(4), 0.3 * n0 / N * (2.5 - b0 / n0), 1e-7);
  const double n1 = static_cast<double>(costs->table().units[1].n());
  const double b1 = costs->bits(1, 6);
  const double running = (2.5 * N - b0) / (N - n0);
  EXPECT_NEAR(*env.Step(6), 0.3 * n1 / N * (running - b1 / n1), 1e-7);
  // The skip penalty applies to action 16 only.
  EnvOptions wide = o;
  wide.target_bits = 16.0;
  Environment e16(costs, wide);
  EXPECT_NEAR(*e16.Step(0), -0.7, 1e-7);  // 16 bits at a 16-bit running target: no saving
}

TEST(BatchedEnvironmentTest, VectorisedEqualsSequential) {
  auto costs = Costs(45, 6);
  EnvOptions o;
  o.target_bits = 2.2;
  auto policy = SmallPolicy();
  ASSERT_TRUE(policy.ok());
  // Deterministic actions depend only on each row, so N batched episodes must
  // equal N single ones step for step.
  BatchedEnvironment batched(costs, o, 4);
  at::Generator g = MakeGenerator(1);
  auto ro = batched.Run(**policy, g, true, 100);
  ASSERT_TRUE(ro.ok()) << ro.status();
  ASSERT_EQ(ro->plans.size(), 4u);
  BatchedEnvironment single(costs, o, 1);
  auto one = single.Run(**policy, g, true, 0);
  ASSERT_TRUE(one.ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ro->plans[i], one->plans[0]);
    ASSERT_EQ(ro->episodes[i].size(), static_cast<size_t>(costs->num_units()));
    for (size_t t = 0; t < ro->episodes[i].size(); ++t) {
      const Transition& a = ro->episodes[i][t];
      const Transition& b = one->episodes[0][t];
      EXPECT_EQ(a.state, b.state);
      EXPECT_EQ(a.mask, b.mask);
      EXPECT_FLOAT_EQ(a.reward, b.reward);
      EXPECT_NEAR(a.log_prob, b.log_prob, 1e-5);
      EXPECT_EQ(a.episode_id, 100 + i);
      EXPECT_EQ(a.step, static_cast<int64_t>(t));
      EXPECT_EQ(a.done, t + 1 == ro->episodes[i].size());
    }
  }
  // Sampled rollouts: each episode equals a sequential replay of its plan.
  auto sampled = batched.Run(**policy, g, false, 0);
  ASSERT_TRUE(sampled.ok());
  for (int i = 0; i < 4; ++i) {
    auto replay = ReplayPlan(costs, o, sampled->plans[i]);
    ASSERT_TRUE(replay.ok()) << replay.status();
    for (size_t t = 0; t < replay->size(); ++t) {
      EXPECT_EQ((*replay)[t].state, sampled->episodes[i][t].state);
      EXPECT_EQ((*replay)[t].mask, sampled->episodes[i][t].mask);
      EXPECT_FLOAT_EQ((*replay)[t].reward, sampled->episodes[i][t].reward);
    }
    EXPECT_LE(costs->table().EffectiveBits(sampled->plans[i]), o.target_bits + kBitsTolerance);
  }
}

// Repair mode: every action allowed, every finished plan within the target
// (the chosen actions repaired), the transitions and ChosenBits keep what the
// policy chose.
TEST(BatchedEnvironmentTest, RepairModeMeasuresPlansWithinTheTargetAndKeepsTheChoices) {
  auto costs = Costs(45, 6);
  auto policy = SmallPolicy();
  ASSERT_TRUE(policy.ok());
  const plan::UnitTable& table = costs->table();
  for (search::RepairOrder order : {search::RepairOrder::kProxy, search::RepairOrder::kWalk}) {
    EnvOptions o;
    o.target_bits = 2.2;
    o.budget_mode = BudgetMode::kRepair;
    o.repair_order = order;
    BatchedEnvironment batched(costs, o, 8);
    at::Generator g = MakeGenerator(3);
    auto ro = batched.Run(**policy, g, false, 0);
    ASSERT_TRUE(ro.ok()) << ro.status();
    int repaired = 0;
    for (int i = 0; i < 8; ++i) {
      std::vector<int> chosen;
      for (const Transition& t : ro->episodes[i]) {
        for (uint8_t m : t.mask) EXPECT_EQ(m, 1);
        chosen.push_back(static_cast<int>(t.action));
      }
      EXPECT_EQ(ro->plans[i], search::RepairToBudget(table, chosen, o.target_bits, order));
      EXPECT_LE(table.EffectiveBits(ro->plans[i]), o.target_bits + kBitsTolerance);
      EXPECT_NEAR(ro->effective_bits[i], table.EffectiveBits(ro->plans[i]), kBitsTolerance);
      EXPECT_NEAR(ChosenBits(table, ro->episodes[i]), table.EffectiveBits(chosen), kBitsTolerance);
      if (ro->plans[i] != chosen) ++repaired;
    }
    // An untrained policy over 7 actions overruns 2.2 bits: the repair did something.
    EXPECT_GT(repaired, 0);
  }
  EXPECT_TRUE(std::isnan(ChosenBits(table, {})));
}

TEST(BatchedEnvironmentTest, ReplayRejectsWrongLengthAndMaskedPlans) {
  auto costs = Costs(14, 7);
  EnvOptions o;
  o.target_bits = 2.0;
  EXPECT_THAT(ReplayPlan(costs, o, std::vector<int>(3, 4)),
              StatusIs(kInvalid, "plan: 3 actions for 14 units"));
  EXPECT_THAT(ReplayPlan(costs, o, std::vector<int>(14, 0)),  // all FP16
              StatusIs(kInvalid, "environment: action 0 is masked at step 0"));
  EXPECT_TRUE(ReplayPlan(costs, o, std::vector<int>(14, 6)).ok());  // all 1 bit
}

}  // namespace
}  // namespace windquant::rl
