#include "learner/update_batch.h"

#include <vector>

#include <gtest/gtest.h>

namespace windquant::learner {
namespace {

std::vector<rl::Transition> Steps(int64_t episode, int n) {
  std::vector<rl::Transition> out(n);
  for (int i = 0; i < n; ++i) {
    out[i].episode_id = episode;
    out[i].step = i;
  }
  return out;
}

TEST(UpdateBatchTest, ConcatenatesTheEpisodesAndAveragesTheirNumbers) {
  UpdateBatch b;
  EXPECT_EQ(b.episodes(), 0);
  b.Add(Steps(1, 2), /*episode_return=*/-1.0, /*ppl=*/10.0, /*effective_bits=*/2.0);
  b.Add(Steps(2, 3), -3.0, 14.0, 2.5);
  EXPECT_EQ(b.episodes(), 2);
  const UpdateBatch::Taken t = b.Take();
  ASSERT_EQ(t.transitions.size(), 5u);
  EXPECT_EQ(t.transitions[0].episode_id, 1);
  EXPECT_EQ(t.transitions[2].episode_id, 2);
  EXPECT_EQ(t.transitions[4].step, 2);
  EXPECT_DOUBLE_EQ(t.mean_reward, -2.0);
  EXPECT_DOUBLE_EQ(t.mean_ppl, 12.0);
  EXPECT_DOUBLE_EQ(t.mean_bits, 2.25);
  // Taken: empty again.
  EXPECT_EQ(b.episodes(), 0);
  const UpdateBatch::Taken empty = b.Take();
  EXPECT_TRUE(empty.transitions.empty());
  EXPECT_DOUBLE_EQ(empty.mean_reward, 0);
}

TEST(UpdateBatchTest, PredictedEpisodesAreLearnedFromButNeitherCountedNorAveraged) {
  UpdateBatch b;
  b.AddPredicted(Steps(7, 2));
  b.Add(Steps(1, 2), -1.0, 10.0, 2.0);
  b.AddPredicted(Steps(8, 2));
  EXPECT_EQ(b.episodes(), 1);
  EXPECT_EQ(b.predicted(), 2);
  const UpdateBatch::Taken t = b.Take();
  ASSERT_EQ(t.transitions.size(), 6u);
  EXPECT_EQ(t.transitions[0].episode_id, 1);  // the measured one first
  EXPECT_EQ(t.transitions[2].episode_id, 7);
  EXPECT_EQ(t.transitions[4].episode_id, 8);
  EXPECT_EQ(t.predicted, 2);
  EXPECT_DOUBLE_EQ(t.mean_reward, -1.0);
  EXPECT_DOUBLE_EQ(t.mean_ppl, 10.0);
  EXPECT_EQ(b.predicted(), 0);
}

}  // namespace
}  // namespace windquant::learner
