#include "common/rl/plan_validation.h"

#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

v1::Plan WirePlan(const std::string& fingerprint, size_t actions, uint32_t action) {
  v1::Plan p;
  p.set_plan_id("p");
  p.set_model_fingerprint(fingerprint);
  for (size_t i = 0; i < actions; ++i) p.add_actions(action);
  return p;
}

void ExpectInvalid(const absl::Status& s, const std::string& culprit) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message().rfind(culprit, 0), 0u) << s;  // the message starts with the field
}

TEST(PlanValidationTest, RunPlanHasOneActionIndexPerUnitOfThatModel) {
  const plan::UnitTable t = testing::SyntheticTable(14, 1);
  EXPECT_TRUE(ValidatePlan(WirePlan(t.fingerprint, 14, 4), t, PlanScope::kRun).ok());
  ExpectInvalid(ValidatePlan(WirePlan("other", 14, 4), t, PlanScope::kRun),
                "plan.model_fingerprint: other is not the run's model");
  ExpectInvalid(ValidatePlan(WirePlan(t.fingerprint, 13, 4), t, PlanScope::kRun),
                "plan.actions: 13 entries, the unit table has 14 units");
  ExpectInvalid(ValidatePlan(WirePlan(t.fingerprint, 15, 4), t, PlanScope::kRun), "plan.actions:");
  v1::Plan bad = WirePlan(t.fingerprint, 14, 4);
  bad.set_actions(9, plan::kNumActions);
  ExpectInvalid(ValidatePlan(bad, t, PlanScope::kRun), "plan.actions[9]: 7 is not an action index");
}

TEST(PlanValidationTest, StagePlanReachesTheStagesLastUnit) {
  plan::UnitTable stage = testing::SyntheticTable(14, 1);
  stage.units.erase(stage.units.begin(), stage.units.begin() + 7);  // layer 1: ids 7..13
  EXPECT_TRUE(ValidatePlan(WirePlan(stage.fingerprint, 14, 2), stage, PlanScope::kStage).ok());
  EXPECT_TRUE(ValidatePlan(WirePlan(stage.fingerprint, 20, 2), stage, PlanScope::kStage).ok());
  ExpectInvalid(ValidatePlan(WirePlan(stage.fingerprint, 13, 2), stage, PlanScope::kStage),
                "plan.actions: 13 entries, this stage's units need 14");
  ExpectInvalid(ValidatePlan(WirePlan("other", 14, 2), stage, PlanScope::kStage),
                "plan.model_fingerprint: other is not this stage's model");
}

}  // namespace
}  // namespace windquant::rl
