#include "job/bisection_baseline.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/search/baselines.h"
#include "common/testing/status_matchers.h"
#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"

namespace windquant::job {
namespace {

constexpr double kLow = 1.0, kCap = 5.0, kEpsilon = 0.1;
// d(b) = (4 - b) / 10: within epsilon exactly from b = 3 up.
constexpr double kThreshold = 3.0;

double LinearD(double b) { return (4.0 - b) / 10.0; }

BisectionOptions Options(int64_t evaluations, double min_step) {
  BisectionOptions o;
  o.low_bits = kLow;
  o.cap_bits = kCap;
  o.max_ppl_increase = kEpsilon;
  o.evaluations = evaluations;
  o.min_step_bits = min_step;
  return o;
}

// A probe whose plan has exactly the bits asked for, one evaluation each.
BisectionProber Exact(int64_t* calls) {
  return [calls](double b, int64_t) -> absl::StatusOr<BisectionProbe> {
    ++*calls;
    return BisectionProbe{{}, b, LinearD(b), 1};
  };
}

TEST(BisectBitsTest, FindsTheSmallestBitsWithinEpsilonToTheBitStep) {
  int64_t calls = 0;
  constexpr double kStep = 1e-3;
  auto r = BisectBits(Options(100, kStep), Exact(&calls));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->within_epsilon);
  EXPECT_GE(r->bits, kThreshold);
  EXPECT_LT(r->bits, kThreshold + kStep);
  EXPECT_LE(r->degradation, kEpsilon);
  // The bracket of 4 bits halves per probe: it is below 1e-3 after 12 probes.
  EXPECT_EQ(r->evaluations, 12);
  EXPECT_EQ(calls, 12);
  EXPECT_EQ(r->steps.size(), 12u);
}

TEST(BisectBitsTest, SpendsExactlyTheBudgetWhenItIsShort) {
  int64_t calls = 0;
  auto r = BisectBits(Options(5, 1e-6), Exact(&calls));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->evaluations, 5);
  EXPECT_EQ(calls, 5);
  EXPECT_TRUE(r->within_epsilon);
  // After 5 halvings the bracket is 4 / 32 bits wide.
  EXPECT_GE(r->bits, kThreshold);
  EXPECT_LE(r->bits, kThreshold + (kCap - kLow) / 32.0);
  // The fewest bits within epsilon among the probes.
  for (const BisectionStep& s : r->steps) {
    if (s.degradation <= kEpsilon) {
      EXPECT_LE(r->bits, s.bits);
    }
  }
}

// Plans on a grid of 0.25 bits (the plan at b has the grid's bits at or below
// b): a plan built again is answered from memory, so the bisection ends on the
// grid point at the threshold without paying for repeats.
TEST(BisectBitsTest, RepeatedPlansCostNothingAndTheUpperEndIsThePlansBits) {
  int64_t measured = 0;
  std::vector<double> seen;
  BisectionProber grid = [&](double b, int64_t) -> absl::StatusOr<BisectionProbe> {
    const double bits = std::floor(b / 0.25) * 0.25;
    BisectionProbe p{{}, bits, LinearD(bits), 1};
    for (double s : seen) {
      if (s == bits) p.evaluations = 0;
    }
    if (p.evaluations == 1) {
      seen.push_back(bits);
      ++measured;
    }
    return p;
  };
  auto r = BisectBits(Options(100, 1e-3), grid);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->bits, kThreshold);
  // The best probe's b builds the returned plan again (RL's start in the quality-target mode).
  EXPECT_DOUBLE_EQ(std::floor(r->target_bits / 0.25) * 0.25, r->bits);
  EXPECT_GE(r->target_bits, r->bits);
  EXPECT_EQ(r->evaluations, measured);
  EXPECT_LE(r->evaluations, 100);
}

TEST(BisectBitsTest, NoneWithinReturnsTheLeastDegraded) {
  BisectionProber never = [](double b, int64_t) -> absl::StatusOr<BisectionProbe> {
    return BisectionProbe{{}, b, 1.0 + 1.0 / b, 1};  // always above epsilon, falls with b
  };
  auto r = BisectBits(Options(7, 1e-6), never);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->within_epsilon);
  EXPECT_EQ(r->evaluations, 7);
  for (const BisectionStep& s : r->steps) EXPECT_LE(r->degradation, s.degradation);
  EXPECT_GT(r->bits, kCap - (kCap - kLow) / 64.0);
}

TEST(BisectBitsTest, SplitsTheBudgetOverProbesAndNeverExceedsIt) {
  std::vector<int64_t> given;
  BisectionProber spender = [&](double b, int64_t give) -> absl::StatusOr<BisectionProbe> {
    given.push_back(give);
    return BisectionProbe{{}, b, LinearD(b), give};
  };
  BisectionOptions o = Options(10, 1e-6);
  o.per_probe = 3;
  auto r = BisectBits(o, spender);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(given, (std::vector<int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(r->evaluations, 10);
}

TEST(BisectBitsTest, RejectsAProbeThatOverspendsAndBadOptions) {
  BisectionProber greedy = [](double b, int64_t give) -> absl::StatusOr<BisectionProbe> {
    return BisectionProbe{{}, b, LinearD(b), give + 1};
  };
  EXPECT_EQ(BisectBits(Options(4, 1e-3), greedy).status().code(), absl::StatusCode::kInternal);
  int64_t calls = 0;
  BisectionOptions o = Options(4, 1e-3);
  o.cap_bits = o.low_bits;
  EXPECT_EQ(BisectBits(o, Exact(&calls)).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(0, 1e-3);
  EXPECT_EQ(BisectBits(o, Exact(&calls)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 0);
}

// The product rows on a synthetic table, the proxy error standing in for d:
// every call of `measure` is a counted evaluation, and neither row spends more
// than the RL run's count.
TEST(BisectRowsTest, CountEveryMeasurementAndStayWithinTheBudget) {
  const plan::UnitTable t = testing::SyntheticTable(30, 3);
  constexpr double kFp = 10.0;
  int64_t calls = 0;
  const PlanMeasure measure = [&](const std::vector<int>& a) -> absl::StatusOr<double> {
    ++calls;
    return kFp * (1.0 + search::ProxyError(t, a));
  };
  const double cap = 6.0;
  auto at_cap = search::LagrangePlan(t, cap);
  ASSERT_TRUE(at_cap.ok());
  const double eps = 2.0 * search::ProxyError(t, at_cap->actions);
  for (int64_t n : {1, 9, 40}) {
    calls = 0;
    auto lag = LagrangeBisect(t, cap, eps, n, kFp, measure, nullptr);
    ASSERT_TRUE(lag.ok()) << lag.status();
    EXPECT_EQ(lag->evaluations, calls);
    EXPECT_LE(lag->evaluations, n);
    EXPECT_LE(lag->bits, cap);
    if (n >= 9) {
      EXPECT_TRUE(lag->within_epsilon);
      EXPECT_LT(lag->bits, t.EffectiveBits(at_cap->actions));
    }
    calls = 0;
    auto scr = ScreenedBisect(t, cap, eps, n, kFp, /*seed=*/1, kSearchScreen, measure, nullptr);
    ASSERT_TRUE(scr.ok()) << scr.status();
    EXPECT_EQ(scr->evaluations, calls);
    EXPECT_LE(scr->evaluations, n);
    EXPECT_LE(scr->steps.size(), static_cast<size_t>(kScreenedBisectSteps));
    EXPECT_LE(scr->bits, cap);
  }
  // A screen of one proposal (or none) is the unscreened search: refused, nothing measured.
  for (int screen : {0, 1}) {
    calls = 0;
    auto scr = ScreenedBisect(t, cap, eps, 9, kFp, /*seed=*/1, screen, measure, nullptr);
    ASSERT_FALSE(scr.ok());
    EXPECT_EQ(scr.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(scr.status().message().find("screen"), std::string::npos) << scr.status();
    EXPECT_EQ(calls, 0);
  }
}

}  // namespace
}  // namespace windquant::job
