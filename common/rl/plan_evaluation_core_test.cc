#include "common/rl/plan_evaluation_core.h"

#include <cmath>
#include <thread>
#include <vector>

#include "common/testing/fake_plan_backend.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

using testing::FakePlanBackend;
using ::windquant::testing::StatusIs;

plan::Plan PlanOf(std::vector<int> actions, std::string fingerprint = "m") {
  plan::Plan p;
  p.model_fingerprint = std::move(fingerprint);
  p.actions = std::move(actions);
  return p;
}

TEST(PlanEvaluationCoreTest, AssemblesTheEvaluationAgainstTheReference) {
  FakePlanBackend backend;
  PlanEvaluationCore core(PlanCache::kUnbounded);
  const plan::Plan plan = PlanOf({3, 4, 5});  // NLL = 2 + 0.01 * 12
  auto e = core.Evaluate(backend, plan);
  ASSERT_TRUE(e.ok()) << e.status();
  const double nll = FakePlanBackend::kFpNll + 0.12;
  EXPECT_DOUBLE_EQ(e->calib_nll, nll);
  EXPECT_DOUBLE_EQ(e->eval_nll, nll);
  EXPECT_DOUBLE_EQ(e->eval_ppl, std::exp(nll));
  EXPECT_NEAR(e->loss_increase, 0.12, 1e-12);
  EXPECT_NEAR(e->relative_ppl_increase, std::exp(0.12) - 1.0, 1e-12);
  EXPECT_EQ(e->tokens, FakePlanBackend::kCalibTokens + FakePlanBackend::kEvalTokens);
  EXPECT_DOUBLE_EQ(e->seconds, 1.0);
  EXPECT_FALSE(e->cached);
  auto ref = core.reference();
  ASSERT_TRUE(ref.has_value());
  EXPECT_DOUBLE_EQ(ref->eval_ppl, std::exp(FakePlanBackend::kFpNll));
  EXPECT_EQ(ref->loss_increase, 0.0);
}

TEST(PlanEvaluationCoreTest, MeasuresTheReferenceOnceAndIdenticalPlansOnce) {
  FakePlanBackend backend;
  PlanEvaluationCore core(PlanCache::kUnbounded);
  ASSERT_TRUE(core.Evaluate(backend, PlanOf({1, 1})).ok());
  ASSERT_TRUE(core.Evaluate(backend, PlanOf({1, 2})).ok());
  auto again = core.Evaluate(backend, PlanOf({1, 1}));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->cached);
  // The same actions for another model are another plan.
  auto other = core.Evaluate(backend, PlanOf({1, 1}, "other"));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->cached);
  EXPECT_EQ(backend.fp_measurements(), 1);
  EXPECT_EQ(backend.plan_measurements(), 3);
  EXPECT_EQ(core.cache().hits(), 1);
  EXPECT_EQ(core.cache().misses(), 3);
}

TEST(PlanEvaluationCoreTest, WithoutACacheEveryPlanIsMeasured) {
  FakePlanBackend backend;
  PlanEvaluationCore core(0);
  ASSERT_TRUE(core.Evaluate(backend, PlanOf({2})).ok());
  auto again = core.Evaluate(backend, PlanOf({2}));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->cached);
  EXPECT_EQ(backend.plan_measurements(), 2);
}

TEST(PlanEvaluationCoreTest, BackendErrorsPassThroughAndAreNotCached) {
  FakePlanBackend backend;
  PlanEvaluationCore core(PlanCache::kUnbounded);
  EXPECT_THAT(core.Evaluate(backend, PlanOf({})),
              StatusIs(absl::StatusCode::kInvalidArgument, "plan: no actions"));
  backend.FailWith(absl::UnavailableError("stage 1 replica 0: down"));
  EXPECT_THAT(core.Evaluate(backend, PlanOf({1})),
              StatusIs(absl::StatusCode::kUnavailable, "stage 1 replica 0: down"));
  backend.FailWith(absl::OkStatus());
  auto e = core.Evaluate(backend, PlanOf({1}));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->cached);
  EXPECT_EQ(core.cache().size(), 1u);
}

TEST(PlanEvaluationCoreTest, AReferenceThatFailsIsMeasuredAgainNextTime) {
  FakePlanBackend backend;
  PlanEvaluationCore core(PlanCache::kUnbounded);
  backend.FailWith(absl::UnavailableError("down"));
  EXPECT_THAT(core.Reference(backend), StatusIs(absl::StatusCode::kUnavailable, "down"));
  EXPECT_FALSE(core.reference().has_value());
  backend.FailWith(absl::OkStatus());
  ASSERT_TRUE(core.Reference(backend).ok());
  ASSERT_TRUE(core.Reference(backend).ok());
  EXPECT_EQ(backend.fp_measurements(), 1);
}

// Replicas share one core, each with its own backend.
TEST(PlanEvaluationCoreTest, BackendsOfSeveralReplicasShareOneCache) {
  PlanEvaluationCore core(PlanCache::kUnbounded);
  constexpr int kReplicas = 3, kPlans = 50;
  std::vector<FakePlanBackend> backends(kReplicas);
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < kPlans; ++i) {
        auto e = core.Evaluate(backends[r], PlanOf({i}));
        EXPECT_TRUE(e.ok());
        EXPECT_NEAR(e->loss_increase, 0.01 * i, 1e-12);
      }
    });
  }
  for (auto& t : threads) t.join();
  int64_t measured = 0;
  for (const auto& b : backends) measured += b.plan_measurements();
  // Every plan measured at least once; a plan two replicas raced on at most once each.
  EXPECT_GE(measured, kPlans);
  EXPECT_LE(measured, kReplicas * kPlans);
  EXPECT_EQ(core.cache().size(), static_cast<size_t>(kPlans));
  EXPECT_EQ(core.cache().hits() + core.cache().misses(), kReplicas * kPlans);
}

}  // namespace
}  // namespace windquant::rl
