#include "common/rl/curriculum.h"

#include <limits>

#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

CurriculumOptions ThreeSteps() {
  CurriculumOptions c;
  c.target_bits = {3.0, 2.5, 2.0};
  c.min_updates = 2;
  c.max_updates = 4;
  c.advance_ppl_ratio = 1.0;
  return c;
}

TEST(CurriculumTest, AdvancesOnPplCriterionAfterMinUpdates) {
  Curriculum c(ThreeSteps());
  std::string why;
  EXPECT_DOUBLE_EQ(c.target_bits(), 3.0);
  EXPECT_FALSE(c.OnUpdate(5.0, 6.0, &why));  // better than reference but < min_updates
  EXPECT_TRUE(c.OnUpdate(5.0, 6.0, &why));
  EXPECT_NE(why.find("reference"), std::string::npos) << why;
  EXPECT_EQ(c.step(), 1);
  EXPECT_DOUBLE_EQ(c.target_bits(), 2.5);
  EXPECT_EQ(c.updates_in_step(), 0);
}

TEST(CurriculumTest, AdvancesAfterMaxUpdatesWhenCriterionFails) {
  Curriculum c(ThreeSteps());
  std::string why;
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(c.OnUpdate(7.0, 6.0, &why));
  EXPECT_TRUE(c.OnUpdate(7.0, 6.0, &why));
  EXPECT_NE(why.find("max_updates"), std::string::npos) << why;
  EXPECT_EQ(c.step(), 1);
  // Unknown reference: only max_updates ends the step.
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(c.OnUpdate(1.0, 0.0, &why));
  EXPECT_TRUE(c.OnUpdate(1.0, 0.0, &why));
  EXPECT_EQ(c.step(), 2);
  EXPECT_TRUE(c.is_final_step());
  EXPECT_FALSE(c.finished());
  EXPECT_EQ(c.MaxRemainingUpdates(), 4);
  EXPECT_FALSE(c.OnUpdate(std::numeric_limits<double>::infinity(), 2.0, &why));
  EXPECT_TRUE(c.OnUpdate(1.0, 2.0, &why));
  EXPECT_TRUE(c.finished());
  EXPECT_EQ(c.step(), 2);
  EXPECT_EQ(c.MaxRemainingUpdates(), 0);
  EXPECT_FALSE(c.OnUpdate(1.0, 2.0, &why));
}

}  // namespace
}  // namespace windquant::rl
