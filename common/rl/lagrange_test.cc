#include "common/rl/lagrange.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

TEST(LagrangeMultiplierTest, UpdateMatchesHandComputation) {
  LagrangeOptions c;
  c.eta = 0.5;
  c.epsilon = 0.1;
  c.lambda_init = 1.0;
  c.lambda_max = 2.0;
  LagrangeMultiplier m(c);
  EXPECT_DOUBLE_EQ(m.lambda(), 1.0);
  EXPECT_DOUBLE_EQ(m.Update(0.5), 1.0 + 0.5 * (0.5 - 0.1));  // 1.2
  EXPECT_DOUBLE_EQ(m.Update(0.0), 1.2 + 0.5 * (0.0 - 0.1));  // 1.15
  EXPECT_DOUBLE_EQ(m.Update(10.0), 2.0);                     // clipped at lambda_max
  EXPECT_DOUBLE_EQ(m.Update(-10.0), 0.0);                    // clipped at 0
  EXPECT_DOUBLE_EQ(m.Update(0.1), 0.0);                      // d == epsilon: unchanged
  EXPECT_DOUBLE_EQ(m.Update(std::numeric_limits<double>::quiet_NaN()), 2.0);
}

TEST(LagrangeMultiplierTest, ConstraintValueIsWhatLambdaPrices) {
  LagrangeOptions c;
  PlanEvaluation e;
  e.effective_bits = 2.25;
  e.relative_ppl_increase = 19.0;
  EXPECT_DOUBLE_EQ(ConstraintValue(c, e, 2.0), 19.0);
  c.prices = "budget";
  EXPECT_DOUBLE_EQ(ConstraintValue(c, e, 2.0), 0.25);
  c.prices = "target";  // the quality-target mode prices d against epsilon
  EXPECT_DOUBLE_EQ(ConstraintValue(c, e, 2.0), 19.0);
}

// A stand-in for the policy's answer to a price: the relative PPL increase
// of a plan falls with its bits, d(b) = kD2 * exp(-kSlope * (b - 2)) (about
// stories260k's: d ~ 20 at 2 bits), and the plans sampled in a batch rewarded
// with lambda have bits around the best answer to that reward (plus seeded
// noise, clipped to the bits a plan can have).
constexpr double kD2 = 20.0, kSlope = 1.5, kTarget = 2.0, kNoiseBits = 0.1;
constexpr int kEpisodesPerBatch = 8, kBatches = 60, kSettledFrom = 40;

double PplIncrease(double bits) { return kD2 * std::exp(-kSlope * (bits - 2.0)); }

// Budget pricing: maximise -d(b) - lambda * (b - target): d'(b) = -lambda.
double BestBitsAtPrice(double lambda) {
  const double b = 2.0 + std::log(kD2 * kSlope / std::max(lambda, 1e-9)) / kSlope;
  return std::clamp(b, 1.6, 3.0);
}

struct Trajectory {
  std::vector<double> lambda;     // after each batch
  std::vector<double> mean_bits;  // of each batch
};

Trajectory RunDualAscent(const LagrangeOptions& c, bool hard_budget) {
  BatchLambda lambda(c);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, kNoiseBits);
  Trajectory t;
  for (int batch = 0; batch < kBatches; ++batch) {
    // In the hard mode the mask keeps bits <= target and d falls with bits,
    // so every price is answered with the full budget.
    const double answer = hard_budget ? kTarget : BestBitsAtPrice(lambda.batch_lambda());
    double sum = 0;
    for (int i = 0; i < kEpisodesPerBatch; ++i) {
      PlanEvaluation e;
      e.effective_bits = std::clamp(answer + noise(rng), 1.6, hard_budget ? kTarget : 3.0);
      e.relative_ppl_increase = PplIncrease(e.effective_bits);
      lambda.Observe(ConstraintValue(c, e, kTarget));
      sum += e.effective_bits;
    }
    t.lambda.push_back(lambda.EndBatch());
    t.mean_bits.push_back(sum / kEpisodesPerBatch);
  }
  return t;
}

double MeanFrom(const std::vector<double>& v, int from) {
  double s = 0;
  for (size_t i = from; i < v.size(); ++i) s += v[i];
  return s / static_cast<double>(v.size() - from);
}

// With lambda pricing the budget, dual ascent settles where the plans use the
// budget on average, at the price d'(target) = kD2 * kSlope = 30, strictly
// between 0 and lambda_max; pricing quality (d - epsilon with d ~ 20 >>
// epsilon) drives lambda to lambda_max, where it only rescales the reward.
TEST(LagrangeMultiplierTest, BudgetPriceSettlesBetweenTheBounds) {
  LagrangeOptions c;
  c.prices = "budget";
  c.eta = 2.0;
  c.epsilon = 0.0;
  c.lambda_init = 1.0;
  c.lambda_max = 100.0;
  const Trajectory t = RunDualAscent(c, /*hard_budget=*/false);
  const double kPrice = kD2 * kSlope;
  const double settled = MeanFrom(t.lambda, kSettledFrom);
  EXPECT_NEAR(settled, kPrice, 0.1 * kPrice);
  for (int i = kSettledFrom; i < kBatches; ++i) {
    EXPECT_GT(t.lambda[i], 0.5 * kPrice) << "batch " << i;
    EXPECT_LT(t.lambda[i], 1.5 * kPrice) << "batch " << i;
  }
  EXPECT_NEAR(MeanFrom(t.mean_bits, kSettledFrom), kTarget, 0.05);
  // It got there: the first batches were far from the price and over budget.
  EXPECT_LT(t.lambda.front(), 0.7 * kPrice);
  EXPECT_GT(t.mean_bits.front(), kTarget + 0.3);

  LagrangeOptions q;  // the quality price of the same answers
  q.eta = 0.05;
  q.epsilon = 0.05;
  q.lambda_max = 20.0;
  const Trajectory tq = RunDualAscent(q, /*hard_budget=*/true);
  EXPECT_DOUBLE_EQ(tq.lambda.back(), q.lambda_max);
}

// The quality-target mode (prices: target): the same stand-in d(b), a cap of
// kCap bits, epsilon = 2 %. A batch rewarded with lambda answers with the bits
// that maximise w (16 - b) / 16 - lambda (d(b) - epsilon), where
// w / 16 = lambda * kSlope * d(b), plus seeded noise. Dual ascent on g = d then
// settles where the plans' mean d is epsilon, at the exchange rate
// lambda* = w / (16 * kSlope * epsilon) (~2.08 reward units per unit of d), with
// the plans at d^-1(epsilon) ~ 6.6 bits, well under the cap.
TEST(LagrangeMultiplierTest, QualityTargetPriceSettlesAtTheExchangeRate) {
  constexpr double kCap = 8.0, kBitsWeight = 1.0;
  LagrangeOptions c;
  c.prices = "target";
  c.eta = 5.0;
  c.epsilon = 0.02;
  c.lambda_init = 1.0;
  c.lambda_max = 100.0;
  BatchLambda lambda(c);
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0.0, kNoiseBits);
  std::vector<double> lambdas, mean_d, mean_bits;
  for (int batch = 0; batch < kBatches; ++batch) {
    const double price = std::max(lambda.batch_lambda(), 1e-9);
    const double answer =
        std::clamp(2.0 + std::log(kD2 * kSlope * 16.0 * price / kBitsWeight) / kSlope, 1.6, kCap);
    double sum_d = 0, sum_bits = 0;
    for (int i = 0; i < kEpisodesPerBatch; ++i) {
      PlanEvaluation e;
      e.effective_bits = std::clamp(answer + noise(rng), 1.6, kCap);
      e.relative_ppl_increase = PplIncrease(e.effective_bits);
      lambda.Observe(ConstraintValue(c, e, kCap));
      sum_d += e.relative_ppl_increase;
      sum_bits += e.effective_bits;
    }
    lambdas.push_back(lambda.EndBatch());
    mean_d.push_back(sum_d / kEpisodesPerBatch);
    mean_bits.push_back(sum_bits / kEpisodesPerBatch);
  }
  const double kRate = kBitsWeight / (16.0 * kSlope * c.epsilon);
  EXPECT_NEAR(MeanFrom(lambdas, kSettledFrom), kRate, 0.1 * kRate);
  for (int i = kSettledFrom; i < kBatches; ++i) {
    EXPECT_GT(lambdas[i], 0.8 * kRate) << "batch " << i;
    EXPECT_LT(lambdas[i], 1.2 * kRate) << "batch " << i;
  }
  EXPECT_NEAR(MeanFrom(mean_d, kSettledFrom), c.epsilon, 0.2 * c.epsilon);
  EXPECT_LT(MeanFrom(mean_bits, kSettledFrom), kCap - 1.0);  // the cap is not what binds
  // It got there: the first batch, priced at lambda_init, degraded by twice epsilon.
  EXPECT_GT(mean_d.front(), 1.5 * c.epsilon);
  EXPECT_GT(lambdas.front(), c.lambda_init + 0.3);
}

// The owner's record of the batches: Preview is Observe without the change,
// Rewind goes back to a batch reached before (a learner resumed there),
// Adopt continues at one never reached, and Serialize/Parse are exact.
TEST(BatchLambdaTest, PreviewRewindAdoptAndTheTextStateAreExact) {
  LagrangeOptions c;
  c.eta = 0.3;
  c.epsilon = 0.01;
  BatchLambda l(c);
  EXPECT_EQ(l.batch(), 0);
  const double after = l.Preview(0.7);
  EXPECT_DOUBLE_EQ(l.lambda(), c.lambda_init);  // unchanged
  l.Observe(0.7);
  EXPECT_EQ(l.lambda(), after);
  EXPECT_EQ(l.EndBatch(), after);
  l.Observe(1.0 / 3.0);
  const double lambda2 = l.EndBatch();
  l.Observe(2.0);
  EXPECT_EQ(l.batch(), 2);

  BatchLambda copy(c);
  ASSERT_TRUE(copy.Parse(l.Serialize()).ok());
  EXPECT_EQ(copy.batch(), 2);
  EXPECT_EQ(copy.batch_lambda(), lambda2);
  EXPECT_EQ(copy.lambda(), l.lambda());
  EXPECT_EQ(copy.Serialize(), l.Serialize());
  EXPECT_FALSE(copy.Parse("lambda-v1 x 1").ok());
  EXPECT_FALSE(copy.Parse("").ok());

  EXPECT_FALSE(l.Rewind(3));
  ASSERT_TRUE(l.Rewind(1));
  EXPECT_EQ(l.batch(), 1);
  EXPECT_EQ(l.batch_lambda(), after);
  EXPECT_EQ(l.lambda(), after);  // no g of batch 1 observed
  l.Adopt(4, 2.5);
  EXPECT_EQ(l.batch(), 4);
  EXPECT_EQ(l.batch_lambda(), 2.5);
  EXPECT_FALSE(l.Rewind(3));  // lambda_3 unknown
  EXPECT_TRUE(l.Rewind(1));
}

}  // namespace
}  // namespace windquant::rl
