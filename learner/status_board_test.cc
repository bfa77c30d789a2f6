#include "learner/status_board.h"

#include <thread>

#include <gtest/gtest.h>

namespace windquant::learner {
namespace {

TEST(StatusBoardTest, GetReturnsWhatWasPublishedLast) {
  StatusBoard board;
  EXPECT_EQ(board.Get().updates, 0);
  EXPECT_FALSE(board.Get().done);
  LearnerStatus s;
  s.updates = 3;
  s.best_plan_id = "best";
  board.Publish(s);
  s.updates = 4;
  s.done = true;
  board.Publish(s);
  const LearnerStatus got = board.Get();
  EXPECT_EQ(got.updates, 4);
  EXPECT_TRUE(got.done);
  EXPECT_EQ(got.best_plan_id, "best");
}

// A reader never sees a half-written status: every field of one Publish.
TEST(StatusBoardTest, ReadersSeeWholeSnapshots) {
  StatusBoard board;
  std::thread writer([&] {
    for (int i = 1; i <= 2000; ++i) {
      LearnerStatus s;
      s.updates = i;
      s.episodes = 2 * i;
      s.best_plan_id = std::string(static_cast<size_t>(i % 7), 'x');
      board.Publish(s);
    }
  });
  for (int i = 0; i < 2000; ++i) {
    const LearnerStatus s = board.Get();
    ASSERT_EQ(s.episodes, 2 * s.updates);
    ASSERT_EQ(s.best_plan_id.size(), static_cast<size_t>(s.updates % 7));
  }
  writer.join();
}

// The file format scripts parse: keys and their order.
TEST(StatusBoardTest, StatusFileTextListsTheFieldsInOrder) {
  LearnerStatus s;
  s.done = true;
  s.table_complete = true;
  s.curriculum_stage = 1;
  s.curriculum_stages = 3;
  s.target_bits = 2.5;
  s.updates = 7;
  s.episodes = 56;
  s.evaluations = 50;
  s.policy_version = 7;
  s.lambda = 1.25;
  s.best_plan_id = "best";
  s.best_bits = 2.4;
  s.best_perplexity = 9.5;
  EXPECT_EQ(StatusFileText(s),
            "done=true\nunit_table_complete=true\ncurriculum_stage=1/3\ntarget_bits=2.5\n"
            "updates=7\nepisodes=56\nevaluations=50\npolicy_version=7\nlambda=1.25\n"
            "best_plan_id=best\nbest_plan_effective_bits=2.4\nbest_plan_perplexity=9.5\n");
  EXPECT_EQ(StatusFileText(LearnerStatus{})
                .rfind("done=false\nunit_table_complete=false\ncurriculum_stage=0/0\n", 0),
            0u);
}

}  // namespace
}  // namespace windquant::learner
