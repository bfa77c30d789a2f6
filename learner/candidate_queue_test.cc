#include "learner/candidate_queue.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace windquant::learner {
namespace {

TEST(CandidateQueueTest, QueuesPlansWithCandidateIds) {
  CandidateQueue q(/*incarnation=*/5);
  const plan::Plan ref = q.Queue({1, 2, 3}, "lagrange", 3.0, -1, "fp");
  const plan::Plan greedy = q.Queue({4, 5, 6}, "rl-greedy", 3.0, 2, "fp");
  EXPECT_EQ(ref.episode_id, uint64_t{5} << 32);
  EXPECT_EQ(greedy.episode_id, ref.episode_id + 1);
  EXPECT_EQ(ref.plan_id, "learner-lagrange-" + std::to_string(uint64_t{5} << 32));
  EXPECT_EQ(greedy.plan_id, "learner-rl-greedy-" + std::to_string((uint64_t{5} << 32) + 1));
  EXPECT_EQ(ref.model_fingerprint, "fp");
  EXPECT_EQ(ref.actions, (std::vector<int>{1, 2, 3}));
  EXPECT_DOUBLE_EQ(ref.target_bits, 3.0);
  EXPECT_EQ(ref.policy_version, -1);
  EXPECT_EQ(greedy.policy_version, 2);
  EXPECT_EQ(greedy.source, "rl-greedy");
  EXPECT_EQ(q.pending(), 2u);
  ASSERT_NE(q.Find(ref.episode_id), nullptr);
  EXPECT_EQ(q.Find(ref.episode_id)->plan_id, ref.plan_id);
  EXPECT_EQ(q.Find(ref.episode_id + 7), nullptr);
}

TEST(CandidateQueueTest, AnEvaluationMustNameThePlan) {
  CandidateQueue q(1);
  const plan::Plan p = q.Queue({0}, "lagrange", 2.0, -1, "fp");
  EXPECT_FALSE(q.TakeEvaluated(p.episode_id, "another-plan").has_value());
  EXPECT_TRUE(q.Pending(p.episode_id));
  std::optional<plan::Plan> got = q.TakeEvaluated(p.episode_id, p.plan_id);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->source, "lagrange");
  EXPECT_FALSE(q.Pending(p.episode_id));
  EXPECT_FALSE(q.TakeEvaluated(p.episode_id, p.plan_id).has_value());  // once
}

TEST(CandidateQueueTest, DroppedCandidatesAreNoLongerPending) {
  CandidateQueue q(1);
  const plan::Plan a = q.Queue({0}, "lagrange", 2.0, -1, "fp");
  const plan::Plan b = q.Queue({1}, "rl-greedy", 2.0, 1, "fp");
  EXPECT_TRUE(q.Drop(a.episode_id));
  EXPECT_FALSE(q.Drop(a.episode_id));
  EXPECT_FALSE(q.TakeEvaluated(a.episode_id, a.plan_id).has_value());
  EXPECT_TRUE(q.Pending(b.episode_id));
  EXPECT_EQ(q.pending(), 1u);
}

// Another learner process (another incarnation) never reuses this one's ids.
TEST(CandidateQueueTest, IncarnationsHaveDisjointIds) {
  std::set<uint64_t> ids;
  for (uint32_t incarnation : {1u, 3u, 5u}) {
    CandidateQueue q(incarnation);
    for (int i = 0; i < 3; ++i) ids.insert(q.Queue({0}, "lagrange", 2.0, -1, "fp").episode_id);
  }
  EXPECT_EQ(ids.size(), 9u);
  CandidateQueue high(0xffffffffu);
  EXPECT_EQ(high.Queue({0}, "x", 2.0, -1, "fp").episode_id, uint64_t{0xffffffff} << 32);
  CandidateQueue even(4);  // made odd: an id is never 0
  EXPECT_EQ(even.Queue({0}, "x", 2.0, -1, "fp").episode_id, uint64_t{5} << 32);
}

}  // namespace
}  // namespace windquant::learner
