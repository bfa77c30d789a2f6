#include "learner/evaluation_clock.h"

#include "gtest/gtest.h"

namespace windquant::learner {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000000);

TEST(EvaluationClockTest, BeforeAnyReportThePriorSetsTheBudgets) {
  EvaluationClock clock(absl::Seconds(120), kT0);
  clock.set_prior(absl::Seconds(100));
  EXPECT_FALSE(clock.measured());
  EXPECT_EQ(clock.StallBudget(), absl::Seconds(120 + 3 * 100));
  clock.OnHeld(kT0, 1);
  clock.OnHeld(kT0, 2);
  clock.OnHeld(kT0, 3);  // three plans out at most: each waits behind <= 2 others
  EXPECT_EQ(clock.QueueBudget(), absl::Seconds(120 + 3 * 4 * 100));
  // The evaluator is not quiet yet (420 s): the queue budget decides.
  EXPECT_EQ(clock.Cutoff(kT0 + absl::Seconds(400)), kT0 + absl::Seconds(400 - 1320));
  // Quiet for longer than the stall budget: whatever waited 420 s expires.
  EXPECT_EQ(clock.Cutoff(kT0 + absl::Seconds(500)), kT0 + absl::Seconds(500 - 420));
}

TEST(EvaluationClockTest, MeasuresTheLongestEvaluationWithoutIdleTime) {
  EvaluationClock clock(absl::Seconds(30), kT0);
  clock.set_prior(absl::Hours(1));
  // Idle for 10 min, then one plan out, reported 60 s later: 60 s, not 11 min.
  clock.OnHeld(kT0 + absl::Minutes(10), 1);
  clock.OnReport(kT0 + absl::Minutes(10) + absl::Seconds(60), 0);
  EXPECT_TRUE(clock.measured());
  EXPECT_EQ(clock.per_plan(), absl::Seconds(60));
  // Two out back to back: 90 s for the first (the longest so far), 20 s for
  // the second (a cached one) does not lower it.
  const absl::Time t1 = kT0 + absl::Minutes(20);
  clock.OnHeld(t1, 1);
  clock.OnHeld(t1, 2);
  clock.OnReport(t1 + absl::Seconds(90), 1);
  clock.OnReport(t1 + absl::Seconds(110), 0);
  EXPECT_EQ(clock.per_plan(), absl::Seconds(90));
  EXPECT_EQ(clock.StallBudget(), absl::Seconds(30 + 3 * 90));
  EXPECT_EQ(clock.QueueBudget(), absl::Seconds(30 + 3 * 3 * 90));
}

TEST(EvaluationClockTest, ALostPlanExpiresWhileOthersAreReported) {
  EvaluationClock clock(absl::Seconds(10), kT0);
  clock.OnHeld(kT0, 1);
  clock.OnReport(kT0 + absl::Seconds(20), 0);  // 20 s per plan
  clock.OnHeld(kT0 + absl::Seconds(20), 1);    // this one is lost
  // Others keep coming, each reported within the stall budget (70 s).
  absl::Time t = kT0 + absl::Seconds(20);
  for (int i = 0; i < 10; ++i) {
    clock.OnHeld(t, 2);
    t += absl::Seconds(20);
    clock.OnReport(t, 1);
  }
  // Queue budget: 10 + 3 x (2 + 1) x 20 = 190 s; the lost plan has waited 200.
  EXPECT_EQ(clock.QueueBudget(), absl::Seconds(190));
  EXPECT_GT(clock.Cutoff(t), kT0 + absl::Seconds(20));
  // One that arrived 100 s ago does not expire.
  EXPECT_LT(clock.Cutoff(t), t - absl::Seconds(100));
}

TEST(EvaluationClockTest, ANegativeAllowanceExpiresEverythingAtOnce) {
  EvaluationClock clock(absl::Seconds(-60), kT0);
  clock.set_prior(absl::Milliseconds(10));
  clock.OnHeld(kT0, 1);
  EXPECT_GT(clock.Cutoff(kT0), kT0);
}

TEST(EvaluationClockTest, PriorFollowsTheWork) {
  // 2 layers of the LLaMA-3.2-1B shape (121.6M weights), 768 tokens:
  // 121.6M x 768 / 1e9 s + 121.6M / 1e6 s.
  const int64_t w = 2 * (2 * 2048 * 2048 + 2 * 512 * 2048 + 3 * 8192 * 2048);
  EXPECT_NEAR(absl::ToDoubleSeconds(EvaluationWorkPrior(w, 768)),
              static_cast<double>(w) * 768 / 1e9 + static_cast<double>(w) / 1e6, 1e-6);
  EXPECT_GT(EvaluationWorkPrior(8 * w, 768), 7 * EvaluationWorkPrior(w, 768));
}

}  // namespace
}  // namespace windquant::learner
