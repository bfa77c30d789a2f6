#include "learner/held_episodes.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/rl/environment.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/synthetic_table.h"

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

// The journal: what Journal wrote and Release did not remove is held again
// by a new HeldEpisodes on the same directory, except ids seen (recorded)
// before and files that are not episodes of the table.
TEST(HeldEpisodesTest, ReloadsTheJournalOfAnotherInstance) {
  ::windquant::testing::ScopedTestDir temp("wq-held-episodes");
  const std::string dir = temp.path() + "/held";
  const plan::UnitTable table = ::windquant::testing::SyntheticTable(7, 1);
  auto costs = rl::UnitCosts::Create(table).value();
  std::vector<int> actions;
  for (int64_t u = 0; u < costs->num_units(); ++u) actions.push_back(costs->cheapest_action(u));
  rl::EnvOptions env;
  env.target_bits = 3.0;
  auto episode = [&](uint64_t id) {  // a policy-free walk, as the actors encode it
    rl::Episode e;
    e.episode_id = id;
    e.actor_id = "a";
    e.policy_version = 2;
    e.steps = rl::ReplayPlan(costs, env, actions).value();
    for (auto& t : e.steps) {
      t.policy_version = 2;
      t.episode_id = static_cast<int64_t>(id);
    }
    e.plan.plan_id = "p" + std::to_string(id);
    e.plan.model_fingerprint = table.fingerprint;
    e.plan.actions = actions;
    e.plan.target_bits = 3.0;
    e.plan.episode_id = id;
    return e;
  };
  {
    HeldEpisodes before(dir);
    for (uint64_t id : {3, 1, 2}) {
      ASSERT_TRUE(before.Journal(episode(id), table).ok());
      ASSERT_TRUE(before.Hold(episode(id)));
    }
    before.Release(3);  // recorded
  }
  std::ofstream(dir + "/9.episode.pb") << "not an episode";
  HeldEpisodes after(dir);
  after.MarkSeen(2);  // recorded before its Release
  EXPECT_EQ(after.Reload(table).value(), (std::vector<uint64_t>{1}));
  ASSERT_NE(after.Find(1), nullptr);
  EXPECT_EQ(after.Find(1)->steps.size(), table.units.size());
  EXPECT_EQ(after.Find(1)->policy_version, 2);
  EXPECT_FALSE(std::filesystem::exists(dir + "/9.episode.pb"));  // the first version's file
  EXPECT_TRUE(HeldEpisodes().Reload(table).value().empty());     // no journal
  // What the reload left out (2: recorded, 9: not an episode) left the journal.
  HeldEpisodes again(dir);
  EXPECT_EQ(again.Reload(table).value(), (std::vector<uint64_t>{1}));
}

}  // namespace
}  // namespace windquant::learner
