#include "common/rl/lagrange.h"

#include <limits>

#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

TEST(LagrangeMultiplierTest, UpdateMatchesHandComputation) {
  config::LagrangeConfig c;
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

}  // namespace
}  // namespace windquant::rl
