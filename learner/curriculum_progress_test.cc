#include "learner/curriculum_progress.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace windquant::learner {
namespace {

rl::CurriculumOptions TwoSteps() {
  rl::CurriculumOptions c;
  c.target_bits = {3.0, 2.0};
  c.min_updates = 1;
  c.max_updates = 2;
  c.advance_ppl_ratio = 1.0;
  return c;
}

rl::CandidatePlan Plan(std::vector<int> actions, double target_bits) {
  rl::CandidatePlan p;
  p.actions = std::move(actions);
  p.target_bits = target_bits;
  return p;
}

TEST(CurriculumProgressTest, EachStepStartsOnce) {
  CurriculumProgress p(TwoSteps());
  EXPECT_TRUE(p.StepIsNew());
  p.MarkStepStarted();
  EXPECT_FALSE(p.StepIsNew());
  std::string why;
  EXPECT_FALSE(p.OnUpdate(5.0, 4.0, &why));
  EXPECT_TRUE(p.OnUpdate(5.0, 4.0, &why));  // max_updates
  EXPECT_EQ(p.step(), 1);
  EXPECT_DOUBLE_EQ(p.target_bits(), 2.0);
  EXPECT_TRUE(p.StepIsNew());
  p.MarkStepStarted();
  EXPECT_FALSE(p.StepIsNew());
  EXPECT_TRUE(p.OnUpdate(1.0, 4.0, &why));  // the criterion, in the last step
  EXPECT_TRUE(p.finished());
  EXPECT_EQ(p.num_steps(), 2);
}

// A resumed step whose warm start ran before the restart is not new; one
// the checkpoint advanced to without starting it is.
TEST(CurriculumProgressTest, CheckpointRoundTripKeepsTheStartedStep) {
  CurriculumProgress p(TwoSteps());
  p.MarkStepStarted();
  std::string why;
  ASSERT_TRUE(p.OnUpdate(1.0, 4.0, &why));
  rl::RunCheckpoint c;
  p.SaveTo(&c);
  EXPECT_EQ(c.stage, 1);
  EXPECT_EQ(c.updates_in_stage, 0);
  EXPECT_FALSE(c.curriculum_finished);
  EXPECT_EQ(c.warm_started_stage, 0);

  CurriculumProgress resumed(TwoSteps());
  resumed.Restore(c);
  EXPECT_EQ(resumed.step(), 1);
  EXPECT_TRUE(resumed.StepIsNew());
  c.warm_started_stage = 1;
  c.updates_in_stage = 1;
  resumed.Restore(c);
  EXPECT_FALSE(resumed.StepIsNew());
  EXPECT_TRUE(resumed.OnUpdate(9.0, 4.0, &why));  // 2 updates: max_updates
  EXPECT_TRUE(resumed.finished());
}

TEST(CurriculumProgressTest, SelfImitationClonesEachBestPlanOnce) {
  CurriculumProgress p(TwoSteps());  // step 0: target 3.0, not the final 2.0
  const rl::CandidatePlan best = Plan({1, 1}, 2.0), of_step = Plan({2, 2}, 3.0);
  EXPECT_EQ(p.SelfImitationPlan(Plan({}, 0), Plan({}, 0)), nullptr);  // nothing yet
  const std::vector<int>* plan = p.SelfImitationPlan(best, of_step);
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(*plan, of_step.actions);  // not the last step: the step's best
  p.MarkImitated(*plan);
  EXPECT_EQ(p.SelfImitationPlan(best, of_step), nullptr);  // cloned already
  std::string why;
  ASSERT_TRUE(p.OnUpdate(1.0, 4.0, &why));
  plan = p.SelfImitationPlan(best, of_step);
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(*plan, best.actions);  // the last step: the final target's best
}

}  // namespace
}  // namespace windquant::learner
