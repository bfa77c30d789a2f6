#include "common/rl/candidate_plan.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

constexpr double kEpsilon = 0.02;
constexpr double kInf = std::numeric_limits<double>::infinity();

CandidatePlan Measured(int id, double bits, double d, const char* source = "rl") {
  CandidatePlan c;
  c.actions = {id};
  c.evaluation.effective_bits = bits;
  c.evaluation.relative_ppl_increase = d;
  c.evaluation.eval_ppl = 10.0 * (1.0 + d);
  c.target_bits = 4.0;
  c.source = source;
  return c;
}

// Offers the plans in order to an empty best at the cap 4.0; returns the best's id.
int Select(const std::vector<CandidatePlan>& plans, double epsilon) {
  CandidatePlan best;
  for (const CandidatePlan& c : plans) ConsiderCandidate(c, 4.0, &best, nullptr, epsilon);
  return best.actions.empty() ? -1 : best.actions[0];
}

TEST(QualityTargetBetterTest, FewestBitsWithinEpsilonThenLowerDegradation) {
  // Within epsilon: fewer bits win whatever d.
  EXPECT_TRUE(QualityTargetBetter(2.5, 0.019, 3.0, 0.001, kEpsilon));
  EXPECT_FALSE(QualityTargetBetter(3.0, 0.001, 2.5, 0.019, kEpsilon));
  // d exactly epsilon is within.
  EXPECT_TRUE(QualityTargetBetter(2.5, kEpsilon, 3.0, 0.0, kEpsilon));
  // Same bits: the lower d.
  EXPECT_TRUE(QualityTargetBetter(3.0, 0.01, 3.0, 0.015, kEpsilon));
  EXPECT_FALSE(QualityTargetBetter(3.0, 0.015, 3.0, 0.01, kEpsilon));
  EXPECT_FALSE(QualityTargetBetter(3.0, 0.01, 3.0, 0.01, kEpsilon));  // not strictly better
  // Within beats outside, however many bits it has.
  EXPECT_TRUE(QualityTargetBetter(4.0, 0.02, 2.0, 0.021, kEpsilon));
  EXPECT_FALSE(QualityTargetBetter(2.0, 0.021, 4.0, 0.02, kEpsilon));
  // None within: the lower d, whatever the bits; same d: fewer bits.
  EXPECT_TRUE(QualityTargetBetter(3.5, 0.05, 2.0, 0.30, kEpsilon));
  EXPECT_FALSE(QualityTargetBetter(2.0, 0.30, 3.5, 0.05, kEpsilon));
  EXPECT_TRUE(QualityTargetBetter(2.0, 0.30, 3.0, 0.30, kEpsilon));
  // A broken measurement loses to any finite one and is never within.
  EXPECT_FALSE(QualityTargetBetter(1.0, kInf, 4.0, 5.0, kEpsilon));
  EXPECT_TRUE(QualityTargetBetter(4.0, 5.0, 1.0, kInf, kEpsilon));
  EXPECT_FALSE(QualityTargetBetter(1.0, std::nan(""), 4.0, 5.0, kEpsilon));
}

TEST(ConsiderCandidateTest, QualityTargetReturnsTheFewestBitsMeasuredWithinEpsilon) {
  const std::vector<CandidatePlan> plans = {
      Measured(1, 4.0, 0.001, "lagrange"),  // the reference at the cap
      Measured(2, 3.0, 0.015),              // within
      Measured(3, 2.5, 0.040),              // fewer bits, outside
      Measured(4, 2.75, 0.019),             // the fewest bits within
      Measured(5, 2.75, 0.018),             // a tie on bits, lower d
      Measured(6, 2.75, 0.0185),            // a tie, higher d than 5
      Measured(7, 4.5, 0.0),                // over the cap: never
  };
  EXPECT_EQ(Select(plans, kEpsilon), 5);
  // The fixed-budget rule on the same plans: the lowest perplexity within the cap.
  EXPECT_EQ(Select(plans, 0), 1);
  // Order does not matter.
  std::vector<CandidatePlan> reversed(plans.rbegin(), plans.rend());
  EXPECT_EQ(Select(reversed, kEpsilon), 5);
}

TEST(ConsiderCandidateTest, QualityTargetFallsBackToTheLeastDegradedWhenNoneIsWithin) {
  const std::vector<CandidatePlan> plans = {
      Measured(1, 2.0, 0.30),
      Measured(2, 2.5, 0.08),
      Measured(3, 1.5, 0.90),
  };
  EXPECT_EQ(Select(plans, kEpsilon), 2);
  // One plan within epsilon later in the run takes over.
  std::vector<CandidatePlan> more = plans;
  more.push_back(Measured(4, 3.9, 0.02));
  EXPECT_EQ(Select(more, kEpsilon), 4);
}

TEST(ConsiderCandidateTest, QualityTargetKeepsTheStageBestByPerplexity) {
  CandidatePlan best, stage;
  ConsiderCandidate(Measured(1, 3.0, 0.01), 4.0, &best, &stage, kEpsilon);
  ConsiderCandidate(Measured(2, 2.0, 0.015), 4.0, &best, &stage, kEpsilon);
  EXPECT_EQ(best.actions[0], 2);   // fewer bits within epsilon
  EXPECT_EQ(stage.actions[0], 1);  // the curriculum criterion: the lower perplexity
}

}  // namespace
}  // namespace windquant::rl
