#include "common/rl/state_features.h"

#include <array>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

// Each expected value below is the formula of state_features.h worked by hand; every
// feature is one or two float operations, so they are compared with EXPECT_FLOAT_EQ.

plan::Unit UnitWithFeatures() {
  plan::Unit u;
  for (int i = 0; i < plan::kNumStaticFeatures; ++i) u.features[i] = 0.05f * (i + 1);
  u.features[plan::kFeatWeightMean] = -0.4f;
  return u;
}

std::array<float, kStateDim> State(const plan::Unit& unit, const EpisodeContext& c) {
  std::array<float, kStateDim> out;
  out.fill(-99.0f);  // every entry must be written
  ComputeState(unit, c, out.data());
  return out;
}

TEST(StateFeaturesTest, MidEpisodeValuesMatchTheHandComputation) {
  EpisodeContext c;
  c.step = 3;
  c.num_units = 10;
  c.bits_left = 400;  // 4 bits per weight left over 100 weights
  c.weights_left = 100;
  c.min_bits_left = 50;  // 8x slack -> log2(8) / 4
  c.previous_action = 4;
  const auto s = State(UnitWithFeatures(), c);
  EXPECT_FLOAT_EQ(s[plan::kFeatWeightMean], -0.4f);
  for (int i = 1; i < plan::kNumStaticFeatures; ++i) EXPECT_FLOAT_EQ(s[i], 0.05f * (i + 1)) << i;
  EXPECT_FLOAT_EQ(s[kFeatProgress], 0.3f);          // 3 / 10
  EXPECT_FLOAT_EQ(s[kFeatBudgetPerWeight], 0.25f);  // (400 / 100) / 16
  EXPECT_FLOAT_EQ(s[kFeatUrgency], 0.75f);          // log2(400 / 50) / 4
  EXPECT_FLOAT_EQ(s[kFeatPrevAction], 4.0f / 6.0f);
}

TEST(StateFeaturesTest, FirstStepIgnoresThePreviousActionAndTightBudgetIsZeroUrgency) {
  EpisodeContext c;
  c.step = 0;
  c.num_units = 7;
  c.bits_left = 224;  // exactly what the cheapest actions need
  c.weights_left = 112;
  c.min_bits_left = 224;
  c.previous_action = 5;
  const auto s = State(UnitWithFeatures(), c);
  EXPECT_FLOAT_EQ(s[kFeatProgress], 0.0f);
  EXPECT_FLOAT_EQ(s[kFeatBudgetPerWeight], 0.125f);  // (224 / 112) / 16
  EXPECT_FLOAT_EQ(s[kFeatUrgency], 0.0f);            // log2(1) / 4
  EXPECT_FLOAT_EQ(s[kFeatPrevAction], 0.0f);
}

TEST(StateFeaturesTest, OverrunInSoftModeIsNegativeBudgetAndUrgencyMinusOne) {
  EpisodeContext c;
  c.step = 9;
  c.num_units = 10;
  c.bits_left = -200;
  c.weights_left = 100;
  c.min_bits_left = 30;
  c.previous_action = 6;
  const auto s = State(UnitWithFeatures(), c);
  EXPECT_FLOAT_EQ(s[kFeatProgress], 0.9f);
  EXPECT_FLOAT_EQ(s[kFeatBudgetPerWeight], -0.125f);  // (-200 / 100) / 16
  EXPECT_FLOAT_EQ(s[kFeatUrgency], -1.0f);
  EXPECT_FLOAT_EQ(s[kFeatPrevAction], 1.0f);  // 6 / 6
}

TEST(StateFeaturesTest, ValuesOutsideTheirRangeAreClipped) {
  EpisodeContext c;
  c.step = 2;
  c.num_units = 4;
  c.bits_left = 1e6;  // 1e6 / 10 / 16 >> 1
  c.weights_left = 10;
  c.min_bits_left = 1;  // log2(1e6) / 4 ~ 4.98 > 1
  c.previous_action = 42;
  auto s = State(UnitWithFeatures(), c);
  EXPECT_FLOAT_EQ(s[kFeatProgress], 0.5f);
  EXPECT_FLOAT_EQ(s[kFeatBudgetPerWeight], 1.0f);
  EXPECT_FLOAT_EQ(s[kFeatUrgency], 1.0f);
  EXPECT_FLOAT_EQ(s[kFeatPrevAction], 1.0f);  // clamped to the last action
  c.previous_action = -3;
  c.bits_left = -1e6;
  s = State(UnitWithFeatures(), c);
  EXPECT_FLOAT_EQ(s[kFeatBudgetPerWeight], -1.0f);
  EXPECT_FLOAT_EQ(s[kFeatPrevAction], 0.0f);
}

TEST(StateFeaturesTest, DegenerateContextsGiveTheDocumentedDefaults) {
  EpisodeContext c;  // all zero: no units, no weights, no budget
  auto s = State(UnitWithFeatures(), c);
  EXPECT_FLOAT_EQ(s[kFeatProgress], 0.0f);
  EXPECT_FLOAT_EQ(s[kFeatBudgetPerWeight], 0.0f);  // no weights left
  EXPECT_FLOAT_EQ(s[kFeatUrgency], 0.0f);          // nothing left, nothing needed
  c.bits_left = 5;                                 // budget left, nothing needed
  s = State(UnitWithFeatures(), c);
  EXPECT_FLOAT_EQ(s[kFeatUrgency], 1.0f);
}

TEST(StateFeaturesTest, NonFiniteStaticFeaturesBecomeZero) {
  plan::Unit u = UnitWithFeatures();
  u.features[plan::kFeatSparsity] = std::numeric_limits<float>::quiet_NaN();
  u.features[plan::kFeatActMaxRel] = std::numeric_limits<float>::infinity();
  EpisodeContext c;
  c.num_units = 1;
  const auto s = State(u, c);
  EXPECT_EQ(s[plan::kFeatSparsity], 0.0f);
  EXPECT_EQ(s[plan::kFeatActMaxRel], 0.0f);
  EXPECT_FLOAT_EQ(s[plan::kFeatDepth], 0.05f * (plan::kFeatDepth + 1));
}

TEST(StateFeaturesTest, RangesAreTheDocumentedOnes) {
  for (int i : std::initializer_list<int>{
           plan::kFeatWeightMean, plan::kFeatWeightVar, plan::kFeatActMeanRel, plan::kFeatActMaxRel,
           plan::kFeatMassShare, kFeatBudgetPerWeight, kFeatUrgency}) {
    EXPECT_EQ(StateFeatureRange(i).low, -1.0f) << i;
    EXPECT_EQ(StateFeatureRange(i).high, 1.0f) << i;
  }
  for (int i : std::initializer_list<int>{
           plan::kFeatSparsity, plan::kFeatOutlierFrac, plan::kFeatIsAttention, plan::kFeatIsMlp,
           plan::kFeatDepth, plan::kFeatErrRatio, kFeatProgress, kFeatPrevAction}) {
    EXPECT_EQ(StateFeatureRange(i).low, 0.0f) << i;
    EXPECT_EQ(StateFeatureRange(i).high, 1.0f) << i;
  }
}

TEST(StateFeaturesTest, EveryDynamicFeatureStaysInItsRangeOverAGrid) {
  const plan::Unit u = UnitWithFeatures();
  for (int64_t step : {0, 1, 5, 9}) {
    for (double bits : {-1e9, -3.0, 0.0, 1.0, 320.0, 1e12}) {
      for (double weights : {0.0, 1.0, 80.0}) {
        for (double min_bits : {0.0, 2.0, 1e10}) {
          EpisodeContext c{step, 10, bits, weights, min_bits, static_cast<int>(step) - 2};
          const auto s = State(u, c);
          for (int i = kFeatProgress; i < kStateDim; ++i) {
            ASSERT_TRUE(std::isfinite(s[i])) << i;
            EXPECT_GE(s[i], StateFeatureRange(i).low) << i;
            EXPECT_LE(s[i], StateFeatureRange(i).high) << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace windquant::rl
