#include "common/rl/warm_start.h"

#include "common/rl/environment.h"
#include "common/testing/status_matchers.h"
#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

using ::windquant::testing::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

TEST(BehaviourCloneTest, ReachesTargetProbability) {
  const plan::UnitTable t = testing::SyntheticTable(30, 8);
  auto costs = *UnitCosts::Create(t);
  EnvOptions eo;
  eo.target_bits = 2.5;
  auto demo = ReplayPlan(costs, eo, testing::LagrangianPlan(t, 2.5));
  ASSERT_TRUE(demo.ok()) << demo.status();
  auto policy = *Policy::Create(PolicyOptions{});
  auto p = BehaviourClone(*policy, *demo, 500, 1e-3, 0.9);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_GE(*p, 0.9);
  EXPECT_THAT(BehaviourClone(*policy, {}, 5, 1e-3, 0.9),
              StatusIs(kInvalid, "behaviour cloning: no transitions"));
}

}  // namespace
}  // namespace windquant::rl
