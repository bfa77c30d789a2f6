#include "common/rl/trainer.h"

#include <filesystem>
#include <random>

#include "common/rl/environment.h"
#include "common/rl/synthetic_table.h"
#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

config::RunConfig TinyConfig(double target) {
  config::RunConfig c;
  c.curriculum.target_bits = {target};
  c.curriculum.min_updates = 1000;
  c.curriculum.max_updates = 25;
  c.training.episodes_per_update = 16;
  c.training.warm_start = "none";
  c.training.seed = 7;
  c.ppo.hidden = {64, 64};
  c.ppo.learning_rate = 1e-3;
  c.ppo.minibatch_size = 256;
  c.ppo.entropy_coef = 0.003;
  c.lagrange.lambda_init = 1.0;
  c.lagrange.eta = 0.0;  // a fixed penalty weight keeps the synthetic objective stationary
  c.env.loss_penalty_weight = 0.0;
  c.env.ppl_penalty_weight = 20.0;
  return c;
}

// Mean synthetic loss of plans from uniformly random allowed actions.
double RandomPolicyLoss(const quant::UnitTable& t, const testing::SyntheticEvaluator& ev, double target) {
  auto costs = *UnitCosts::Create(t);
  EnvOptions o;
  o.target_bits = target;
  Environment env(costs, o);
  std::mt19937_64 rng(99);
  double sum = 0;
  constexpr int kEpisodes = 200;
  uint8_t mask[quant::kNumActions];
  for (int e = 0; e < kEpisodes; ++e) {
    env.Reset();
    while (!env.done()) {
      env.Mask(mask);
      std::vector<int> allowed;
      for (int a = 0; a < quant::kNumActions; ++a) {
        if (mask[a]) allowed.push_back(a);
      }
      (void)env.Step(allowed[rng() % allowed.size()]);
    }
    sum += ev.Loss(env.actions());
  }
  return sum / kEpisodes;
}

TEST(TrainerTest, LearnsBetterThanRandomOnSyntheticTable) {
  const quant::UnitTable t = testing::SyntheticTable(70, 5);
  testing::SyntheticEvaluator ev(&t);
  constexpr double kTarget = 2.0;
  TrainerOptions o;
  o.config = TinyConfig(kTarget);
  o.show_progress = false;
  auto trainer = Trainer::Create(t, &ev, o);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto r = (*trainer)->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->best.actions.empty());
  EXPECT_LE(r->best.evaluation.effective_bits, kTarget + 1e-9);
  const double optimum = ev.Loss(testing::LagrangianPlan(t, kTarget));
  const double random = RandomPolicyLoss(t, ev, kTarget);
  const double best = ev.Loss(r->best.actions);
  ASSERT_LT(optimum, random);
  // The trained policy closes at least half of the gap between random and optimal...
  EXPECT_LT(best - optimum, 0.5 * (random - optimum)) << "best " << best << " optimum " << optimum
                                                       << " random " << random;
  // ...and its last updates sample better plans than the first.
  ASSERT_EQ(r->curve.size(), 25u);
  EXPECT_LT(r->curve.back().mean_ppl, r->curve.front().mean_ppl);
  EXPECT_EQ(r->updates, 25);
  EXPECT_GT(r->cache_hits + r->evaluations, 25 * 16);
}

TEST(TrainerTest, WarmStartNeverEndsWorseThanTheReferencePlan) {
  const quant::UnitTable t = testing::SyntheticTable(42, 6);
  testing::SyntheticEvaluator ev(&t);
  TrainerOptions o;
  o.config = TinyConfig(2.0);
  o.config.curriculum.target_bits = {3.0, 2.0};
  o.config.curriculum.min_updates = 1;
  o.config.curriculum.max_updates = 2;
  o.config.curriculum.advance_ppl_ratio = 1.0;
  o.config.training.warm_start = "lagrange";
  o.config.training.warm_start_steps = 300;
  o.show_progress = false;
  std::vector<std::string> log;
  o.log = [&](const std::string& s) { log.push_back(s); };
  o.reference_plan = [&](double target) -> absl::StatusOr<std::vector<int>> {
    return testing::LagrangianPlan(t, target);
  };
  auto trainer = Trainer::Create(t, &ev, o);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto r = (*trainer)->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->reference.actions.empty());
  EXPECT_LE(r->best.evaluation.eval_ppl, r->reference.evaluation.eval_ppl);
  EXPECT_LE(r->best.evaluation.effective_bits, 2.0 + 1e-9);
  ASSERT_EQ(r->stages.size(), 2u);  // stage 1 advanced, stage 2 finished
  EXPECT_DOUBLE_EQ(r->stages[0].target_bits, 3.0);
  bool cloned = false;
  for (const auto& line : log) cloned = cloned || line.find("behaviour-cloned") != std::string::npos;
  EXPECT_TRUE(cloned);
}

TEST(BehaviourCloneTest, ReachesTargetProbability) {
  const quant::UnitTable t = testing::SyntheticTable(30, 8);
  auto costs = *UnitCosts::Create(t);
  EnvOptions eo;
  eo.target_bits = 2.5;
  auto demo = ReplayPlan(costs, eo, testing::LagrangianPlan(t, 2.5));
  ASSERT_TRUE(demo.ok()) << demo.status();
  auto policy = *Policy::Create(PolicyOptions{});
  auto p = BehaviourClone(*policy, *demo, 500, 1e-3, 0.9);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_GE(*p, 0.9);
  EXPECT_FALSE(BehaviourClone(*policy, {}, 5, 1e-3, 0.9).ok());
}

}  // namespace
}  // namespace windquant::rl
