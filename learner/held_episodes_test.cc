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

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(HeldEpisodesTest, AcceptsAnIdOncePerRun) {
  HeldEpisodes held;
  EXPECT_TRUE(held.Hold(MakeEpisode(1), kT0));
  EXPECT_FALSE(held.Hold(MakeEpisode(1), kT0));  // held
  std::optional<rl::Episode> e = held.Take(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->steps.size(), 3u);
  EXPECT_FALSE(held.Take(1).has_value());
  EXPECT_FALSE(held.Hold(MakeEpisode(1), kT0));  // evaluated already
  EXPECT_TRUE(held.Seen(1));
  EXPECT_EQ(held.size(), 0u);
}

// Ids recorded before a restart (plans.jsonl) are refused too.
TEST(HeldEpisodesTest, RefusesIdsMarkedSeen) {
  HeldEpisodes held;
  held.MarkSeen(4);
  EXPECT_FALSE(held.Hold(MakeEpisode(4), kT0));
  EXPECT_TRUE(held.Hold(MakeEpisode(5), kT0));
}

TEST(HeldEpisodesTest, ExpiredEpisodesStaySeen) {
  HeldEpisodes held;
  ASSERT_TRUE(held.Hold(MakeEpisode(9), kT0));
  ASSERT_TRUE(held.Hold(MakeEpisode(2), kT0 + absl::Seconds(1)));
  ASSERT_TRUE(held.Hold(MakeEpisode(5), kT0 + absl::Seconds(5)));
  EXPECT_EQ(held.Expire(kT0 + absl::Seconds(2)), (std::vector<uint64_t>{2, 9}));
  EXPECT_EQ(held.size(), 1u);
  EXPECT_FALSE(held.Take(9).has_value());
  EXPECT_FALSE(held.Hold(MakeEpisode(9), kT0 + absl::Seconds(3)));
  EXPECT_TRUE(held.Take(5).has_value());
}

}  // namespace
}  // namespace windquant::learner
