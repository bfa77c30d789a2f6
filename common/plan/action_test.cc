#include "common/plan/action.h"

#include <cmath>

#include "gtest/gtest.h"

namespace windquant::plan {
namespace {

TEST(ActionTest, IndexOrderIsAsListed) {
  const char* names[] = {"16", "8", "4", "3", "2", "1.58", "1"};
  for (int i = 0; i < kNumActions; ++i) {
    auto a = ActionFromIndex(i);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(ActionIndex(*a), i);
    EXPECT_EQ(ActionName(*a), names[i]);
  }
  EXPECT_FALSE(ActionFromIndex(-1).ok());
  EXPECT_FALSE(ActionFromIndex(7).ok());
}

TEST(ActionTest, BitsOf) {
  EXPECT_EQ(BitsOf(Action::k16), 16.0);
  EXPECT_EQ(BitsOf(Action::k8), 8.0);
  EXPECT_EQ(BitsOf(Action::k4), 4.0);
  EXPECT_EQ(BitsOf(Action::k3), 3.0);
  EXPECT_EQ(BitsOf(Action::k2), 2.0);
  EXPECT_NEAR(BitsOf(Action::k1_58), 1.5849625007211562, 1e-15);
  EXPECT_EQ(BitsOf(Action::k1), 1.0);
}

TEST(ActionTest, ParseRoundTripsNames) {
  for (Action a : kAllActions) {
    auto parsed = ParseAction(ActionName(a));
    ASSERT_TRUE(parsed.ok()) << ActionName(a);
    EXPECT_EQ(*parsed, a);
  }
}

TEST(ActionTest, ParseRejectsUnknownNamesWithMessage) {
  for (const char* bad : {"", "5", "1.6", "2bit", "16 ", "fp16"}) {
    auto parsed = ParseAction(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("unknown action"), std::string::npos);
  }
}

TEST(ActionTest, FromBits) {
  EXPECT_EQ(*ActionFromBits(16), Action::k16);
  EXPECT_EQ(*ActionFromBits(8), Action::k8);
  EXPECT_EQ(*ActionFromBits(1), Action::k1);
  EXPECT_EQ(*ActionFromBits(1.58), Action::k1_58);
  EXPECT_EQ(*ActionFromBits(std::log2(3.0)), Action::k1_58);
  EXPECT_FALSE(ActionFromBits(5).ok());
  EXPECT_FALSE(ActionFromBits(1.5).ok());
  EXPECT_FALSE(ActionFromBits(NAN).ok());
}

}  // namespace
}  // namespace windquant::plan
