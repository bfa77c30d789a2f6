#include "learner/run_lifecycle.h"

#include <gtest/gtest.h>

namespace windquant::learner {
namespace {

TEST(RunLifecycleTest, NeverStopsWithoutALimit) {
  RunLifecycle run;
  for (int i = 0; i < 5; ++i) run.OnUpdate();
  EXPECT_EQ(run.updates_here(), 5);
  EXPECT_FALSE(run.StopDue());
  run.set_stop_after_updates(-3);  // negative is "never" too
  EXPECT_FALSE(run.StopDue());
}

TEST(RunLifecycleTest, StopsOnceAfterTheUpdatesOfThisProcess) {
  RunLifecycle run;
  run.Restore(/*curriculum_finished=*/false);
  run.set_stop_after_updates(2);
  run.OnUpdate();
  EXPECT_FALSE(run.StopDue());
  run.OnUpdate();
  EXPECT_TRUE(run.StopDue());
  run.MarkStopped();
  EXPECT_TRUE(run.stopped());
  EXPECT_FALSE(run.StopDue());  // once
  EXPECT_FALSE(run.done());
  // A stopped run never finishes: the next process does.
  EXPECT_FALSE(run.FinishDue(/*curriculum_finished=*/true, /*plans_out=*/0));
}

// Set after the updates ran (a late --stop-after-updates): due at once.
TEST(RunLifecycleTest, ALimitSetLateIsDueAtOnce) {
  RunLifecycle run;
  for (int i = 0; i < 3; ++i) run.OnUpdate();
  run.set_stop_after_updates(1);
  EXPECT_TRUE(run.StopDue());
}

TEST(RunLifecycleTest, FinishesWhenTheCurriculumEndedAndNoPlanIsOut) {
  RunLifecycle run;
  EXPECT_FALSE(run.FinishDue(false, 0));
  EXPECT_FALSE(run.FinishDue(true, 1));
  EXPECT_TRUE(run.FinishDue(true, 0));
  run.MarkDone();
  EXPECT_TRUE(run.done());
  EXPECT_FALSE(run.FinishDue(true, 0));  // once
}

TEST(RunLifecycleTest, AFinishedCheckpointRestoresDone) {
  RunLifecycle run;
  run.Restore(/*curriculum_finished=*/true);
  EXPECT_TRUE(run.done());
  EXPECT_FALSE(run.FinishDue(true, 0));
  EXPECT_EQ(run.updates_here(), 0);
}

}  // namespace
}  // namespace windquant::learner
