#include "learner/candidate_queue.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/rl/episode.h"

namespace windquant::learner {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(CandidateQueueTest, QueuesPlansWithCandidateIdsAndHandsThemOutOnce) {
  CandidateQueue q(/*incarnation=*/5);
  const plan::Plan ref = q.Queue({1, 2, 3}, "lagrange", 3.0, -1, "fp", kT0);
  const plan::Plan greedy = q.Queue({4, 5, 6}, "rl-greedy", 3.0, 2, "fp", kT0);
  EXPECT_TRUE(rl::IsCandidateEpisode(ref.episode_id));
  EXPECT_EQ(ref.episode_id, rl::kCandidateEpisodeBit | (uint64_t{5} << 32));
  EXPECT_EQ(greedy.episode_id, ref.episode_id + 1);
  EXPECT_EQ(ref.plan_id, "learner-lagrange-" + std::to_string(uint64_t{5} << 32));
  EXPECT_EQ(greedy.plan_id, "learner-rl-greedy-" + std::to_string((uint64_t{5} << 32) + 1));
  EXPECT_EQ(ref.model_fingerprint, "fp");
  EXPECT_EQ(ref.actions, (std::vector<int>{1, 2, 3}));
  EXPECT_DOUBLE_EQ(ref.target_bits, 3.0);
  EXPECT_EQ(ref.policy_version, -1);
  EXPECT_EQ(greedy.policy_version, 2);
  EXPECT_EQ(greedy.source, "rl-greedy");
  ASSERT_TRUE(q.HasOutbox());
  const std::vector<plan::Plan> out = q.TakeOutbox();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].plan_id, ref.plan_id);
  EXPECT_EQ(out[1].plan_id, greedy.plan_id);
  EXPECT_FALSE(q.HasOutbox());
  EXPECT_TRUE(q.TakeOutbox().empty());
  // Handed out, still pending until evaluated.
  EXPECT_EQ(q.pending(), 2u);
  EXPECT_TRUE(q.Pending(ref.episode_id));
}

TEST(CandidateQueueTest, AnEvaluationMustNameThePlan) {
  CandidateQueue q(1);
  const plan::Plan p = q.Queue({0}, "lagrange", 2.0, -1, "fp", kT0);
  EXPECT_FALSE(q.TakeEvaluated(p.episode_id, "another-plan").has_value());
  EXPECT_TRUE(q.Pending(p.episode_id));
  std::optional<plan::Plan> got = q.TakeEvaluated(p.episode_id, p.plan_id);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->source, "lagrange");
  EXPECT_FALSE(q.Pending(p.episode_id));
  EXPECT_FALSE(q.TakeEvaluated(p.episode_id, p.plan_id).has_value());  // once
}

TEST(CandidateQueueTest, DroppedAndExpiredCandidatesAreNoLongerPending) {
  CandidateQueue q(1);
  const plan::Plan a = q.Queue({0}, "lagrange", 2.0, -1, "fp", kT0);
  const plan::Plan b = q.Queue({1}, "rl-greedy", 2.0, 1, "fp", kT0 + absl::Seconds(1));
  const plan::Plan c = q.Queue({2}, "rl-greedy", 2.0, 2, "fp", kT0 + absl::Seconds(5));
  EXPECT_TRUE(q.Drop(a.episode_id));
  EXPECT_FALSE(q.Drop(a.episode_id));
  const std::vector<plan::Plan> expired = q.Expire(kT0 + absl::Seconds(2));
  ASSERT_EQ(expired.size(), 1u);  // a left already
  EXPECT_EQ(expired[0].plan_id, b.plan_id);
  EXPECT_FALSE(q.Pending(b.episode_id));
  EXPECT_FALSE(q.TakeEvaluated(b.episode_id, b.plan_id).has_value());
  EXPECT_TRUE(q.Pending(c.episode_id));
  EXPECT_EQ(q.pending(), 1u);
  // The outbox still holds all three (the sender checks Pending).
  EXPECT_EQ(q.TakeOutbox().size(), 3u);
}

// Another learner process (another incarnation) never reuses this one's ids;
// the incarnation keeps 31 bits (odd), below the candidate bit.
TEST(CandidateQueueTest, IncarnationsHaveDisjointIds) {
  std::set<uint64_t> ids;
  for (uint32_t incarnation : {1u, 3u, 5u}) {
    CandidateQueue q(incarnation);
    for (int i = 0; i < 3; ++i) {
      const uint64_t id = q.Queue({0}, "lagrange", 2.0, -1, "fp", kT0).episode_id;
      EXPECT_TRUE(rl::IsCandidateEpisode(id));
      ids.insert(id);
    }
  }
  EXPECT_EQ(ids.size(), 9u);
  CandidateQueue high(0xffffffffu);
  EXPECT_EQ(high.Queue({0}, "x", 2.0, -1, "fp", kT0).episode_id,
            rl::kCandidateEpisodeBit | (uint64_t{0x7fffffff} << 32));
  CandidateQueue random;  // std::random_device
  EXPECT_TRUE(rl::IsCandidateEpisode(random.Queue({0}, "x", 2.0, -1, "fp", kT0).episode_id));
}

}  // namespace
}  // namespace windquant::learner
