#include "learner/held_episodes.h"

#include <vector>

#include <gtest/gtest.h>

namespace windquant::learner {
namespace {

rl::Episode MakeEpisode(uint64_t id) {
  rl::Episode e;
  e.episode_id = id;
  e.actor_id = "a";
  e.steps.resize(3);
  return e;
}

TEST(HeldEpisodesTest, AcceptsAnIdOncePerRun) {
  HeldEpisodes held;
  EXPECT_TRUE(held.Hold(MakeEpisode(1)));
  EXPECT_FALSE(held.Hold(MakeEpisode(1)));  // held
  std::optional<rl::Episode> e = held.Take(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->steps.size(), 3u);
  EXPECT_FALSE(held.Take(1).has_value());
  EXPECT_FALSE(held.Hold(MakeEpisode(1)));  // evaluated already
  EXPECT_TRUE(held.Seen(1));
  EXPECT_EQ(held.size(), 0u);
}

// Ids recorded before a restart (plans.jsonl) are refused too.
TEST(HeldEpisodesTest, RefusesIdsMarkedSeen) {
  HeldEpisodes held;
  held.MarkSeen(4);
  EXPECT_FALSE(held.Hold(MakeEpisode(4)));
  EXPECT_TRUE(held.Hold(MakeEpisode(5)));
}

TEST(HeldEpisodesTest, FindsWithoutTaking) {
  HeldEpisodes held;
  ASSERT_TRUE(held.Hold(MakeEpisode(9)));
  ASSERT_TRUE(held.Hold(MakeEpisode(2)));
  ASSERT_NE(held.Find(9), nullptr);
  EXPECT_EQ(held.Find(9)->episode_id, 9u);
  EXPECT_EQ(held.Find(3), nullptr);
  EXPECT_EQ(held.size(), 2u);
  EXPECT_TRUE(held.Take(9).has_value());
  EXPECT_EQ(held.Find(9), nullptr);
  EXPECT_FALSE(held.Hold(MakeEpisode(9)));  // given up or evaluated: still seen
}

}  // namespace
}  // namespace windquant::learner
