// PlanSender over a real LearnerCore and a fake evaluator: every plan of the
// outbox is submitted in order, a full evaluator is retried (not skipped), a
// refused plan is dropped, and the plans an evaluator lost (a new
// evaluator_id) are sent again while still pending.
#include "learner/plan_sender.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "common/testing/status_matchers.h"
#include "learner/learner_core_test_fixture.h"

namespace windquant::learner {
namespace {

using ::windquant::learner::testing::LearnerCoreTest;
using ::windquant::learner::testing::LogLines;
using ::windquant::learner::testing::Stages;
using ::windquant::learner::testing::TestOptions;
using ::windquant::testing::IsOk;

// The evaluator's side: records every submission; the first `full` attempts
// answer RESOURCE_EXHAUSTED; plans named `refused` are refused for good.
class FakeEvaluator {
 public:
  absl::StatusOr<std::string> Submit(const OutgoingPlan& p) {
    absl::MutexLock lock(&mu_);
    ++attempts_;
    if (attempts_ <= full_) return absl::ResourceExhaustedError("queue full (2 plans)");
    if (p.plan.plan_id == refused_) return absl::InvalidArgumentError("plan.actions: bad");
    accepted_.push_back(p);
    return id_;
  }
  absl::StatusOr<std::string> Id() {
    absl::MutexLock lock(&mu_);
    ++probes_;
    return id_;
  }
  // Waits until `n` plans were accepted (false after 60 s).
  bool WaitForAccepted(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return accepted_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
  }

  absl::Mutex mu_;
  std::vector<OutgoingPlan> accepted_ ABSL_GUARDED_BY(mu_);
  int attempts_ ABSL_GUARDED_BY(mu_) = 0;
  int probes_ ABSL_GUARDED_BY(mu_) = 0;
  int full_ ABSL_GUARDED_BY(mu_) = 0;
  std::string refused_ ABSL_GUARDED_BY(mu_);
  std::string id_ ABSL_GUARDED_BY(mu_) = "evaluator-a";
};

class PlanSenderTest : public LearnerCoreTest {
 protected:
  std::unique_ptr<PlanSender> Sender(FakeEvaluator* ev, const LogLines& log) {
    return std::make_unique<PlanSender>(
        core_.get(), [ev](const OutgoingPlan& p, net::Canceller*) { return ev->Submit(p); },
        [ev](net::Canceller*) { return ev->Id(); }, absl::Milliseconds(20), log.fn());
  }
};

TEST_F(PlanSenderTest, SendsTheOutboxInOrderRetryingAFullEvaluatorAndDroppingARefusal) {
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core_->RegisterTable(s.first_layer, 0, s), IsOk());
  FakeEvaluator ev;
  {
    absl::MutexLock lock(&ev.mu_);
    ev.full_ = 2;
    ev.refused_ = "p5";
  }
  LogLines log;
  core_.reset();
  core_ = LearnerCore::Create(TestOptions(dir_), log.fn()).value();  // the table is restored
  for (uint64_t id : {4, 5, 6}) ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(id, 0)).value());
  auto sender = Sender(&ev, log);
  sender->Start();
  ASSERT_TRUE(ev.WaitForAccepted(3));
  sender->Stop();
  absl::MutexLock lock(&ev.mu_);
  ASSERT_EQ(ev.accepted_.size(), 3u);
  EXPECT_EQ(ev.accepted_[0].kind, rl::PlanKind::kCandidate);  // the step's reference
  EXPECT_EQ(ev.accepted_[1].plan.plan_id, "p4");
  EXPECT_EQ(ev.accepted_[2].plan.plan_id, "p6");
  EXPECT_EQ(ev.attempts_, 6) << "2 full, the reference, p4, p5 refused, p6";
  EXPECT_FALSE(core_->Pending(rl::PlanKind::kEpisode, 5));
  EXPECT_EQ(core_->Status().given_up, 1);
  EXPECT_TRUE(
      log.Has("learner: episode 5 given up: plan p5 refused by the evaluator: plan.actions: bad"));
}

TEST_F(PlanSenderTest, SendsAgainWhatAnEvaluatorOnANewQueueLost) {
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core_->RegisterTable(s.first_layer, 0, s), IsOk());
  for (uint64_t id : {1, 2}) ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(id, 0)).value());
  FakeEvaluator ev;
  LogLines log;
  auto sender = Sender(&ev, log);
  sender->Start();
  ASSERT_TRUE(ev.WaitForAccepted(3));
  // Episode 1 is evaluated; then the evaluator comes back on an empty queue.
  ASSERT_TRUE(Report(*core_, Eval(1, 3.0)).value());
  {
    absl::MutexLock lock(&ev.mu_);
    ev.id_ = "evaluator-b";
  }
  ASSERT_TRUE(ev.WaitForAccepted(5));
  sender->Stop();
  absl::MutexLock lock(&ev.mu_);
  ASSERT_EQ(ev.accepted_.size(), 5u) << "the two still pending, once each";
  std::set<std::string> again;
  for (size_t i = 3; i < 5; ++i) again.insert(ev.accepted_[i].plan.plan_id);
  EXPECT_EQ(again.count("p2"), 1u);
  EXPECT_EQ(again.count("p1"), 0u) << "evaluated: not sent again";
  EXPECT_GE(ev.probes_, 1);
  EXPECT_TRUE(
      log.Has("learner: the evaluator's queue is new (evaluator evaluator-b): 2 plans it "
              "had accepted are sent again"));
}

}  // namespace
}  // namespace windquant::learner
