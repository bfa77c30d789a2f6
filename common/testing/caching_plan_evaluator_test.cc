#include "common/testing/caching_plan_evaluator.h"

#include <vector>

#include "common/testing/status_matchers.h"
#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"

namespace windquant::testing {
namespace {

using ::windquant::testing::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

TEST(CachingPlanEvaluatorTest, IdenticalPlansAreEvaluatedOnce) {
  const plan::UnitTable t = testing::SyntheticTable(20, 1);
  testing::SyntheticEvaluator inner(&t);
  CachingPlanEvaluator cache(&inner);
  std::vector<int> a(20, 4), b(20, 4);
  b[3] = 2;
  auto e1 = cache.Evaluate(a);
  auto e2 = cache.Evaluate(b);
  auto e3 = cache.Evaluate(a);
  ASSERT_TRUE(e1.ok() && e2.ok() && e3.ok());
  EXPECT_EQ(inner.calls(), 2);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 2);
  EXPECT_FALSE(e1->cached);
  EXPECT_TRUE(e3->cached);
  EXPECT_DOUBLE_EQ(e1->eval_ppl, e3->eval_ppl);
  EXPECT_NE(e1->eval_ppl, e2->eval_ppl);
  EXPECT_NE(rl::PlanHash(a), rl::PlanHash(b));
  EXPECT_THAT(cache.Evaluate(std::vector<int>(3, 0)), StatusIs(kInvalid, "plan: wrong length"));
}

}  // namespace
}  // namespace windquant::testing
