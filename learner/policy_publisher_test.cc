#include "learner/policy_publisher.h"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"
#include "common/testing/synthetic_table.h"

namespace windquant::learner {
namespace {

using ::windquant::testing::StatusIs;

PolicyPublisher::Options TestOptions(int screen_samples) {
  PolicyPublisher::Options o;
  o.ppo.hidden = {16, 16};
  o.ppo.minibatch_size = 8;
  o.ppo.epochs = 1;
  o.screen_samples = screen_samples;
  return o;
}

std::unique_ptr<PolicyPublisher> Make(const PolicyPublisher::Options& c) {
  absl::StatusOr<std::unique_ptr<PolicyPublisher>> p = PolicyPublisher::Create(c);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

rl::PlanEvaluation Measured(double ppl, bool cached = false) {
  rl::PlanEvaluation e;
  e.eval_ppl = ppl;
  e.effective_bits = 3.0;
  e.cached = cached;
  return e;
}

TEST(PolicyPublisherTest, PlansNeedTheTable) {
  std::unique_ptr<PolicyPublisher> p = Make(TestOptions(0));
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(p->GreedyPlan(3.0).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "unit table"));
  EXPECT_THAT(p->ClonePlan(3.0, {0}).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  const plan::UnitTable table = windquant::testing::SyntheticTable(14, 3);
  ASSERT_TRUE(p->SetTable(table).ok());
  absl::StatusOr<std::vector<int>> greedy = p->GreedyPlan(3.0);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  EXPECT_EQ(greedy->size(), table.units.size());
}

// Cloning a plan moves the policy's greedy plan to it (the warm start's
// point). The greedy plan keeps to the budget unit by unit, so a few units
// may still differ.
TEST(PolicyPublisherTest, AClonedPlanBecomesNearlyTheGreedyPlan) {
  std::unique_ptr<PolicyPublisher> p = Make(TestOptions(0));
  ASSERT_NE(p, nullptr);
  const plan::UnitTable table = windquant::testing::SyntheticTable(14, 3);
  ASSERT_TRUE(p->SetTable(table).ok());
  const std::vector<int> plan = windquant::testing::LagrangianPlan(table, 3.0);
  auto agreeing = [&]() {
    absl::StatusOr<std::vector<int>> greedy = p->GreedyPlan(3.0);
    EXPECT_TRUE(greedy.ok()) << greedy.status();
    int n = 0;
    for (size_t i = 0; greedy.ok() && i < plan.size(); ++i) n += (*greedy)[i] == plan[i];
    return n;
  };
  const int before = agreeing();
  absl::StatusOr<double> prob = p->ClonePlan(3.0, plan);
  ASSERT_TRUE(prob.ok()) << prob.status();
  EXPECT_GE(*prob, 0.5);
  const int after = agreeing();
  EXPECT_GT(after, before);
  EXPECT_GE(after, 10) << "of 14 units";
}

TEST(PolicyPublisherTest, NoRewardModelWithoutScreening) {
  std::unique_ptr<PolicyPublisher> p = Make(TestOptions(0));
  ASSERT_NE(p, nullptr);
  const plan::UnitTable table = windquant::testing::SyntheticTable(14, 3);
  ASSERT_TRUE(p->SetTable(table).ok());
  for (int i = 0; i < 6; ++i) p->AddMeasured(std::vector<int>(14, i % 7), Measured(5.0 + i));
  const PublishedPolicy out = p->Publish(-1, 1, 2.5, 0.75);
  EXPECT_EQ(out.snapshot.version, p->version());
  EXPECT_EQ(out.curriculum_stage, 1);
  EXPECT_DOUBLE_EQ(out.target_bits, 2.5);
  EXPECT_DOUBLE_EQ(out.lambda, 0.75);
  EXPECT_TRUE(out.reward_model.empty());
}

// With screening the model of the measured plans (cached ones left out) goes
// with a snapshot the actor does not have yet, and only then.
TEST(PolicyPublisherTest, TheRewardModelGoesWithANewSnapshotOnly) {
  std::unique_ptr<PolicyPublisher> p = Make(TestOptions(4));
  ASSERT_NE(p, nullptr);
  const plan::UnitTable table = windquant::testing::SyntheticTable(14, 3);
  ASSERT_TRUE(p->SetTable(table).ok());
  for (int i = 0; i < 6; ++i) {
    std::vector<int> plan(14, 1);
    plan[i] = 3;
    p->AddMeasured(plan, Measured(5.0 + i));
  }
  p->AddMeasured(std::vector<int>(14, 6), Measured(50.0, /*cached=*/true));
  const PublishedPolicy fresh = p->Publish(p->version() - 1, 0, 3.0, 1.0);
  ASSERT_FALSE(fresh.reward_model.empty());
  EXPECT_EQ(fresh.reward_model.plans, 6);
  EXPECT_TRUE(p->Publish(p->version(), 0, 3.0, 1.0).reward_model.empty());
  // A new table: the model starts afresh.
  ASSERT_TRUE(p->SetTable(table).ok());
  EXPECT_TRUE(p->Publish(p->version() - 1, 0, 3.0, 1.0).reward_model.empty());
}

// The model a version's snapshots carry is fitted at the update that made the
// version: plans measured after it (while actors are still to ask) are not in
// it, so what actors screen with does not depend on when they ask.
TEST(PolicyPublisherTest, AVersionCarriesTheModelOfItsUpdate) {
  std::unique_ptr<PolicyPublisher> p = Make(TestOptions(4));
  ASSERT_NE(p, nullptr);
  const plan::UnitTable table = windquant::testing::SyntheticTable(14, 3);
  ASSERT_TRUE(p->SetTable(table).ok());
  auto measure = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      std::vector<int> plan(14, 1);
      plan[i % 14] = 2 + i / 14;
      p->AddMeasured(plan, Measured(5.0 + i));
    }
  };
  measure(0, 6);
  auto costs = rl::UnitCosts::Create(table);
  ASSERT_TRUE(costs.ok()) << costs.status();
  rl::EnvOptions eo;
  eo.target_bits = 3.0;
  std::vector<int> plan;
  for (int64_t u = 0; u < (*costs)->num_units(); ++u) plan.push_back((*costs)->cheapest_action(u));
  auto steps = rl::ReplayPlan(*costs, eo, plan);
  ASSERT_TRUE(steps.ok()) << steps.status();
  for (auto& t : *steps) t.policy_version = p->version();
  steps->back().reward = -1.0f;
  const int64_t before = p->version();
  ASSERT_TRUE(p->Update(*steps).ok());
  ASSERT_NE(p->version(), before);
  measure(6, 9);  // measured after the update
  const PublishedPolicy late = p->Publish(before, 0, 3.0, 1.0);
  ASSERT_FALSE(late.reward_model.empty());
  EXPECT_EQ(late.reward_model.plans, 6);
  // The next update's version carries all nine.
  for (auto& t : *steps) t.policy_version = p->version();
  ASSERT_TRUE(p->Update(*steps).ok());
  EXPECT_EQ(p->Publish(before, 0, 3.0, 1.0).reward_model.plans, 9);
}

TEST(PolicyPublisherTest, StateRoundTrips) {
  std::unique_ptr<PolicyPublisher> a = Make(TestOptions(0));
  std::unique_ptr<PolicyPublisher> b = Make(TestOptions(0));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<std::string> state = a->SaveState();
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_TRUE(b->LoadState(*state).ok());
  EXPECT_EQ(b->version(), a->version());
  EXPECT_THAT(b->LoadState("not a state"),
              StatusIs(absl::StatusCode::kInvalidArgument, "learner state"));
}

}  // namespace
}  // namespace windquant::learner
