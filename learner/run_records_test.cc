#include "learner/run_records.h"
#include "common/testing/scoped_test_dir.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace windquant::learner {
namespace {

using ::windquant::testing::ScopedTestDir;

std::vector<std::string> Lines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class RunRecordsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = temp_.path(); }
  ScopedTestDir temp_{"wq-run-records"};
  std::string dir_;
};

TEST_F(RunRecordsTest, AppendsOneLinePerEvaluatedPlan) {
  RunRecords r(dir_);
  EXPECT_TRUE(r.RecordedEpisodeIds().empty());  // no plans.jsonl yet
  rl::Episode e;
  e.episode_id = 42;
  e.actor_id = "actor-1";
  e.policy_version = 3;
  rl::PlanEvaluation pe;
  pe.effective_bits = 2.25;
  pe.eval_ppl = 12.5;
  r.RecordEpisode(e, "plan-42", pe, -1.5);
  plan::Plan c;
  c.episode_id = uint64_t{5} << 32 | 7;
  c.plan_id = "learner-lagrange-7";
  c.source = "lagrange";
  c.policy_version = -1;
  r.RecordCandidate(c, pe);
  const std::vector<std::string> lines = Lines(dir_ + "/plans.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "{\"episode_id\":42,\"plan_id\":\"plan-42\",\"actor_id\":\"actor-1\","
            "\"policy_version\":3,\"effective_bits\":2.25,\"perplexity\":12.5,\"reward\":-1.5}");
  EXPECT_EQ(lines[1], "{\"episode_id\":" + std::to_string(c.episode_id) +
                          ",\"plan_id\":\"learner-lagrange-7\",\"actor_id\":\"learner\","
                          "\"source\":\"lagrange\",\"policy_version\":-1,\"effective_bits\":2.25,"
                          "\"perplexity\":12.5}");
  // What a restarted learner refuses.
  EXPECT_EQ(RunRecords(dir_).RecordedEpisodeIds(), (std::set<uint64_t>{42, c.episode_id}));
}

TEST_F(RunRecordsTest, CountsEvaluationsAndKeepsTheHistory) {
  RunRecords r(dir_);
  r.CountEvaluation(false);
  r.CountEvaluation(true);
  r.CountEvaluation(false);
  EXPECT_EQ(r.evaluations(), 3);
  EXPECT_EQ(r.cache_hits(), 1);
  EXPECT_GE(r.seconds(), 0);
  rl::UpdateRecord u;
  u.update = 1;
  r.AddUpdate(u);
  r.AddStepEvent(rl::StageEvent{0, 3.0, 1, "max_updates"});
  ASSERT_EQ(r.curve().size(), 1u);
  ASSERT_EQ(r.steps().size(), 1u);
  EXPECT_EQ(r.steps()[0].reason, "max_updates");
  // Restore replaces the history (a checkpoint's).
  rl::UpdateRecord u5;
  u5.update = 5;
  r.Restore({u5, u5}, {});
  EXPECT_EQ(r.curve().size(), 2u);
  EXPECT_EQ(r.curve()[0].update, 5);
  EXPECT_TRUE(r.steps().empty());
}

}  // namespace
}  // namespace windquant::learner
