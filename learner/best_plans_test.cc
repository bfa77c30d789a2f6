#include "learner/best_plans.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/plan/plan_io.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/status_matchers.h"
#include "common/testing/synthetic_table.h"

namespace windquant::learner {
namespace {

using ::windquant::testing::ScopedTestDir;

using ::windquant::testing::IsOk;

constexpr double kFinal = 2.0;

class BestPlansTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_.path();
    table_ = windquant::testing::SyntheticTable(14, 3);
  }
  // A measured plan of `source` made for `target` bits (all units action `a`).
  rl::CandidatePlan Candidate(const std::string& source, double target, double bits, double ppl,
                              int a = 4) const {
    rl::CandidatePlan c;
    c.actions.assign(table_.units.size(), a);
    c.evaluation.effective_bits = bits;
    c.evaluation.eval_ppl = ppl;
    c.target_bits = target;
    c.source = source;
    return c;
  }
  plan::Plan PlanOf(const rl::CandidatePlan& c) const {
    plan::Plan p;
    p.plan_id = "p";
    p.model_fingerprint = table_.fingerprint;
    p.actions = c.actions;
    p.target_bits = c.target_bits;
    return p;
  }
  bool Consider(BestPlans& b, const rl::CandidatePlan& c, bool this_step) {
    absl::StatusOr<bool> r = b.Consider(c, PlanOf(c), this_step, table_);
    EXPECT_THAT(r, IsOk());
    return r.ok() && *r;
  }

  ScopedTestDir temp_{"wq-best-plans"};
  std::string dir_;
  plan::UnitTable table_;
};

TEST_F(BestPlansTest, KeepsTheLowestPerplexityWithinTheFinalTargetAsPlanFiles) {
  BestPlans b(kFinal, dir_);
  EXPECT_TRUE(b.best().actions.empty());
  EXPECT_TRUE(Consider(b, Candidate("rl", kFinal, 1.9, 5.0, 4), true));
  EXPECT_FALSE(Consider(b, Candidate("rl", kFinal, 1.9, 6.0), true));  // worse
  EXPECT_FALSE(Consider(b, Candidate("rl", 3.0, 2.5, 1.0), false));    // over the budget
  EXPECT_FALSE(Consider(b, Candidate("rl", kFinal, 1.9, NAN), true));  // not measured
  EXPECT_TRUE(Consider(b, Candidate("rl-greedy", kFinal, 2.0, 4.0, 3), true));
  EXPECT_DOUBLE_EQ(b.best().evaluation.eval_ppl, 4.0);
  EXPECT_EQ(b.best().source, "rl-greedy");
  absl::StatusOr<plan::Plan> files = plan::ReadPlanFile(dir_ + "/plan.json", table_);
  ASSERT_THAT(files, IsOk());
  EXPECT_EQ(files->plan_id, "best");
  EXPECT_EQ(files->source, "rl-greedy");
  EXPECT_EQ(files->actions, std::vector<int>(table_.units.size(), 3));
}

// The curriculum criterion: the step's best policy plan (made for this
// step) and its reference's perplexity.
TEST_F(BestPlansTest, TheStepBestCountsOnlyPolicyPlansOfThisStep) {
  BestPlans b(kFinal, dir_);
  EXPECT_EQ(b.StepBestPpl(), std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(b.step_reference_ppl(), 0);
  Consider(b, Candidate("lagrange", 3.0, 2.9, 3.0), true);
  EXPECT_DOUBLE_EQ(b.step_reference_ppl(), 3.0);
  EXPECT_EQ(b.StepBestPpl(), std::numeric_limits<double>::infinity());  // no policy plan
  Consider(b, Candidate("rl", 3.0, 2.9, 2.5), false);  // a late plan of another step
  EXPECT_EQ(b.StepBestPpl(), std::numeric_limits<double>::infinity());
  Consider(b, Candidate("rl", 3.0, 3.5, 2.0), true);  // over the step's target
  EXPECT_EQ(b.StepBestPpl(), std::numeric_limits<double>::infinity());
  Consider(b, Candidate("rl", 3.0, 2.9, 2.7), true);
  EXPECT_DOUBLE_EQ(b.StepBestPpl(), 2.7);
  EXPECT_TRUE(b.best().actions.empty());  // 2.9 bits: over the final 2.0
  b.StartStep();
  EXPECT_EQ(b.StepBestPpl(), std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(b.step_reference_ppl(), 0);
}

TEST_F(BestPlansTest, RecordsTheFinalStepsReferenceAsEvaluated) {
  BestPlans b(kFinal, dir_);
  Consider(b, Candidate("lagrange", 3.0, 2.9, 3.0), true);
  EXPECT_TRUE(b.reference().actions.empty());  // not the final step's
  Consider(b, Candidate("lagrange", kFinal, 1.95, 4.5), true);
  EXPECT_EQ(b.reference().source, "lagrange");
  EXPECT_DOUBLE_EQ(b.reference().evaluation.eval_ppl, 4.5);
  EXPECT_DOUBLE_EQ(b.best().evaluation.eval_ppl, 4.5);  // and the best so far
}

// The quality-target mode (epsilon 0.05, cap kFinal): the best plan is the
// fewest bits measured within epsilon, written as plan files when it changes;
// the step's best (the curriculum criterion) stays the lowest perplexity.
TEST_F(BestPlansTest, QualityTargetKeepsTheFewestBitsWithinEpsilon) {
  BestPlans b(kFinal, dir_, /*max_ppl_increase=*/0.05);
  auto measured = [&](double bits, double d, int a) {
    rl::CandidatePlan c = Candidate("rl", kFinal, bits, 10.0 * (1 + d), a);
    c.evaluation.relative_ppl_increase = d;
    return c;
  };
  EXPECT_TRUE(Consider(b, measured(1.9, 0.20, 2), true));    // none within yet: least degraded
  EXPECT_TRUE(Consider(b, measured(1.95, 0.10, 3), true));   // less degraded
  EXPECT_TRUE(Consider(b, measured(2.0, 0.04, 4), true));    // within epsilon
  EXPECT_TRUE(Consider(b, measured(1.8, 0.05, 5), true));    // fewer bits, within
  EXPECT_FALSE(Consider(b, measured(1.85, 0.01, 6), true));  // within, more bits
  EXPECT_FALSE(Consider(b, measured(1.5, 0.051, 1), true));  // fewer bits, outside
  EXPECT_TRUE(Consider(b, measured(1.8, 0.03, 0), true));    // a tie on bits, lower d
  EXPECT_DOUBLE_EQ(b.best().evaluation.effective_bits, 1.8);
  EXPECT_DOUBLE_EQ(b.best().evaluation.relative_ppl_increase, 0.03);
  absl::StatusOr<plan::Plan> files = plan::ReadPlanFile(dir_ + "/plan.json", table_);
  ASSERT_THAT(files, IsOk());
  EXPECT_EQ(files->actions, std::vector<int>(table_.units.size(), 0));
  EXPECT_DOUBLE_EQ(b.StepBestPpl(), 10.0 * 1.01);  // the curriculum's: lowest perplexity
}

TEST_F(BestPlansTest, RestoresACheckpointsState) {
  BestPlans b(kFinal, dir_);
  rl::CandidatePlan best = Candidate("rl", kFinal, 1.9, 5.0);
  best.target_bits = kFinal;
  b.Restore(best, Candidate("rl", 3.0, 2.9, 2.2), 2.4);
  EXPECT_DOUBLE_EQ(b.best().evaluation.eval_ppl, 5.0);
  EXPECT_DOUBLE_EQ(b.StepBestPpl(), 2.2);
  EXPECT_DOUBLE_EQ(b.step_reference_ppl(), 2.4);
  EXPECT_FALSE(Consider(b, Candidate("rl", kFinal, 1.9, 5.5), true));
}

}  // namespace
}  // namespace windquant::learner
