#include "evaluator/evaluation_queue.h"
#include "evaluator/pipeline_evaluator.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/base/checked_file.h"
#include "common/base/files.h"
#include "common/metrics/registry.h"
#include "common/plan/action.h"
#include "common/stage/stage_worker.h"
#include "common/testing/stage_test_util.h"
#include "common/transport/local_activation_transport.h"

namespace windquant::evaluator {
namespace {

std::string ModelDir() { return testing::RealModelDir(); }

// Shape of the real test model (stories260k: 5 layers of 64; the default model: 4 of 128).
const model::LlamaConfig& RealConfig() {
  static const model::LlamaConfig c = *model::LlamaConfig::FromDirectory(ModelDir());
  return c;
}
using testing::RandomIds;

// What the fake learner saw: every report attempt, in order. It answers as
// learner::LearnerService does: an episode's report joins its PPO batch when
// meant for it, and every `episodes_per_update` of them an update runs and the
// pushed λ_after becomes its λ.
class FakeLearner {
 public:
  // The first `failures` attempts fail with `failure`, the rest succeed.
  FakeLearner(int failures, absl::Status failure, int episodes_per_update = 1000,
              int64_t updates = 0, double lambda = 1.0)
      : failures_(failures),
        failure_(failure),
        per_update_(episodes_per_update),
        updates_(updates),
        lambda_(lambda) {}
  absl::StatusOr<ReportAnswer> Receive(const Report& r) {
    absl::MutexLock lock(&mu_);
    attempts_.push_back(r);
    if (static_cast<int>(attempts_.size()) <= failures_) return failure_;
    ReportAnswer a;
    a.accepted = !r.grant.has_value() || r.grant->batch == updates_;
    if (r.grant.has_value() && a.accepted && ++in_batch_ == per_update_) {
      in_batch_ = 0;
      ++updates_;
      lambda_ = r.grant->lambda_after;
    }
    a.updates = updates_;
    a.lambda = lambda_;
    return a;
  }
  std::vector<Report> attempts() const {
    absl::MutexLock lock(&mu_);
    return attempts_;
  }
  // Waits until at least `n` attempts were made (false after 60 s).
  bool WaitForAttempts(size_t n) const {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return attempts_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
  }

 private:
  mutable absl::Mutex mu_;
  const int failures_;
  const absl::Status failure_;
  const int per_update_;
  std::vector<Report> attempts_ ABSL_GUARDED_BY(mu_);
  int64_t updates_ ABSL_GUARDED_BY(mu_);
  double lambda_ ABSL_GUARDED_BY(mu_);
  int in_batch_ ABSL_GUARDED_BY(mu_) = 0;
};

class EvaluationQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/wq-evaluation-queue";
    std::filesystem::remove_all(dir_);
    PipelineEvaluatorOptions o;
    o.context = 16;
    o.batch_size = 4;
    o.calib_slice_tokens = 200;
    o.eval_slice_tokens = 200;
    o.calibration_samples = 4;
    o.calibration_seq_len = 16;
    o.calibration_batch = 2;
    auto ev = PipelineEvaluator::Create(ModelDir(), o, RandomIds(600, 1), RandomIds(600, 2));
    ASSERT_TRUE(ev.ok()) << ev.status();
    evaluator_ = *std::move(ev);
    const int64_t L = RealConfig().num_hidden_layers;
    for (auto [a, b] : std::vector<std::pair<int64_t, int64_t>>{{0, L - 2}, {L - 2, L}}) {
      const absl::Status added = local_.Add(ModelDir(), a, b, 64);
      ASSERT_TRUE(added.ok()) << added;
    }
    // The global unit count, for plans over it.
    auto tables = evaluator_->Calibrate(stages_, evaluator_->CalibrationFingerprint());
    ASSERT_TRUE(tables.ok()) << tables.status();
    for (const auto& t : *tables) units_ += t.units.size();
    lagrange_.lambda_init = 1.0;
    lagrange_.eta = 0.5;
  }

  QueuedPlan Plan(uint64_t episode, rl::PlanKind kind = rl::PlanKind::kEpisode) {
    QueuedPlan q;
    q.kind = kind;
    q.plan.plan_id = "plan-" + std::to_string(episode);
    q.plan.episode_id = episode;
    q.plan.model_fingerprint = evaluator_->CalibrationFingerprint();
    q.plan.actions.assign(units_, static_cast<int>(plan::Action::k2));
    q.effective_bits = 2.0;
    q.actor_id = "a";
    return q;
  }
  std::unique_ptr<EvaluationQueue> MakeQueue(FakeLearner* learner,
                                             metrics::Registry* registry = nullptr,
                                             const std::string& dir = "",
                                             base::LogSink log = base::LogToStderr) {
    return std::make_unique<EvaluationQueue>(
        evaluator_.get(), std::vector<std::vector<transport::ActivationTransport*>>{stages_}, env_,
        lagrange_, dir.empty() ? dir_ : dir, 16,
        [learner](const Report& r) { return learner->Receive(r); }, registry, std::move(log));
  }
  bool QueueFileExists(uint64_t id, const std::string& kind = "episode") const {
    return std::filesystem::exists(dir_ + "/" + kind + "-" + std::to_string(id) + ".plan.pb");
  }

  std::string dir_;
  rl::EnvironmentOptions env_;
  rl::LagrangeOptions lagrange_;
  size_t units_ = 0;
  std::unique_ptr<PipelineEvaluator> evaluator_;
  testing::LocalStages local_;
  std::vector<transport::ActivationTransport*>& stages_ = local_.stages;
};

TEST_F(EvaluationQueueTest, RetriesTheReportNotTheEvaluationAndMovesLambdaOnce) {
  FakeLearner learner(3, absl::UnavailableError("learner down"));
  metrics::Registry registry;
  auto queue = MakeQueue(&learner, &registry);
  ASSERT_TRUE(queue->Start().ok());
  ASSERT_TRUE(queue->Submit(Plan(7)).ok());
  EXPECT_TRUE(QueueFileExists(7));
  ASSERT_TRUE(learner.WaitForAttempts(4));
  queue->Stop();
  const std::vector<Report> attempts = learner.attempts();
  ASSERT_EQ(attempts.size(), 4u);  // 3 failures, then delivered; nothing after
  for (const Report& r : attempts) {
    EXPECT_EQ(r.episode_id, 7u);
    ASSERT_TRUE(r.grant.has_value());
    EXPECT_EQ(r.grant->reward, attempts[0].grant->reward);  // one reward for one plan
    EXPECT_EQ(r.lambda, lagrange_.lambda_init);             // batch 0's
    EXPECT_FALSE(r.evaluation.cached);                      // evaluated once, not again per attempt
  }
  EXPECT_EQ(queue->evaluated(), 1);
  EXPECT_DOUBLE_EQ(queue->lambda(), lagrange_.lambda_init);  // the batch goes on
  EXPECT_FALSE(QueueFileExists(7));                          // delivered: no longer pending
  const std::string text = registry.TextExposition();
  EXPECT_NE(text.find("\nwindquant_evaluator_evaluation_duration_seconds_count 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nwindquant_evaluator_queue_depth 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nwindquant_evaluator_lambda "), std::string::npos) << text;
}

TEST_F(EvaluationQueueTest, StopWhileTheLearnerIsDownKeepsThePlanForTheNextStart) {
  FakeLearner down(1 << 30, absl::DeadlineExceededError("no learner"));
  {
    auto queue = MakeQueue(&down);
    ASSERT_TRUE(queue->Start().ok());
    ASSERT_TRUE(queue->Submit(Plan(8)).ok());
    ASSERT_TRUE(down.WaitForAttempts(2));
    const absl::Time t0 = absl::Now();
    queue->Stop();
    EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
  }
  EXPECT_TRUE(QueueFileExists(8));
  // The next evaluator reloads it and delivers it.
  FakeLearner up(0, absl::OkStatus());
  auto queue = MakeQueue(&up);
  ASSERT_TRUE(queue->Start().ok());
  ASSERT_TRUE(up.WaitForAttempts(1));
  queue->Stop();
  ASSERT_EQ(up.attempts().size(), 1u);
  EXPECT_EQ(up.attempts()[0].episode_id, 8u);
  EXPECT_FALSE(QueueFileExists(8));
}

TEST_F(EvaluationQueueTest, ARefusedReportIsDroppedNotRetried) {
  FakeLearner refusing(1, absl::InvalidArgumentError("perplexity: must be >= 1"));
  auto queue = MakeQueue(&refusing);
  ASSERT_TRUE(queue->Start().ok());
  ASSERT_TRUE(queue->Submit(Plan(9)).ok());
  ASSERT_TRUE(queue->Submit(Plan(10)).ok());
  ASSERT_TRUE(refusing.WaitForAttempts(2));
  queue->Stop();
  const std::vector<Report> attempts = refusing.attempts();
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].episode_id, 9u);
  EXPECT_EQ(attempts[1].episode_id, 10u);
  EXPECT_FALSE(QueueFileExists(9));
  EXPECT_FALSE(QueueFileExists(10));
}

// λ's owner: each episode is rewarded with its PPO batch's λ (the first two
// with lambda_init, the next two with the multiplier after the first two g's),
// the state survives a restart in lambda.txt, and a learner resumed from an
// older batch is followed: the report is rewarded again for its batch.
TEST_F(EvaluationQueueTest, RewardsEachBatchWithItsLambdaAndFollowsTheLearner) {
  FakeLearner learner(0, absl::OkStatus(), /*episodes_per_update=*/2);
  {
    auto queue = MakeQueue(&learner);
    ASSERT_TRUE(queue->Start().ok());
    for (uint64_t id : {1, 2, 3, 4}) ASSERT_TRUE(queue->Submit(Plan(id)).ok());
    ASSERT_TRUE(learner.WaitForAttempts(4));
    queue->Stop();
  }
  const std::vector<Report> a = learner.attempts();
  ASSERT_EQ(a.size(), 4u);
  rl::BatchLambda reference(lagrange_);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].grant.has_value());
    EXPECT_EQ(a[i].grant->batch, static_cast<int64_t>(i / 2)) << i;
    EXPECT_DOUBLE_EQ(a[i].grant->lambda, reference.batch_lambda()) << i;
    reference.Observe(a[i].grant->constraint_value);
    EXPECT_DOUBLE_EQ(a[i].grant->lambda_after, reference.lambda()) << i;
    if (i % 2 == 1) reference.EndBatch();
  }
  EXPECT_NE(a[2].grant->lambda, a[0].grant->lambda);  // eta 0.5 moved it
  ASSERT_TRUE(std::filesystem::exists(dir_ + "/lambda.txt"));

  // A restarted evaluator goes on with batch 2's λ; the learner resumed from
  // its checkpoint at update 1: the report is rewarded again with batch 1's.
  FakeLearner resumed(0, absl::OkStatus(), 2, /*updates=*/1, reference.batch_lambda());
  auto queue = MakeQueue(&resumed);
  ASSERT_TRUE(queue->Start().ok());
  EXPECT_DOUBLE_EQ(queue->lambda(), reference.batch_lambda());
  ASSERT_TRUE(queue->Submit(Plan(5)).ok());
  ASSERT_TRUE(resumed.WaitForAttempts(2));
  queue->Stop();
  const std::vector<Report> b = resumed.attempts();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].grant->batch, 2);
  EXPECT_EQ(b[1].grant->batch, 1);
  EXPECT_DOUBLE_EQ(b[1].grant->lambda, a[2].grant->lambda);
  EXPECT_DOUBLE_EQ(b[1].grant->reward, a[2].grant->reward);  // the same plan, the same batch λ
}

// Plans are known by kind and id: one sent again while queued or being
// evaluated is not queued twice, the same id of the other kind is another
// plan (a candidate: reported without a reward). The queue's identity stays
// with its directory across restarts; a new directory is another evaluator.
TEST_F(EvaluationQueueTest, KnowsPlansByKindAndIdAndKeepsItsIdentityWithItsDirectory) {
  std::string id;
  {
    FakeLearner down(1 << 30, absl::DeadlineExceededError("no learner"));
    auto queue = MakeQueue(&down);
    ASSERT_TRUE(queue->Start().ok());
    id = queue->evaluator_id();
    EXPECT_EQ(id.size(), 16u);
    ASSERT_TRUE(queue->Submit(Plan(8)).ok());
    ASSERT_TRUE(down.WaitForAttempts(1));  // evaluated, its report retried
    EXPECT_EQ(queue->Submit(Plan(8)).value(), 0) << "being delivered: not queued again";
    EXPECT_EQ(queue->Submit(Plan(8, rl::PlanKind::kCandidate)).value(), 1);
    EXPECT_EQ(queue->Submit(Plan(8, rl::PlanKind::kCandidate)).value(), 1);
    queue->Stop();
  }
  EXPECT_TRUE(QueueFileExists(8, "episode"));
  EXPECT_TRUE(QueueFileExists(8, "candidate"));
  FakeLearner up(0, absl::OkStatus());
  auto queue = MakeQueue(&up);
  ASSERT_TRUE(queue->Start().ok());
  EXPECT_EQ(queue->evaluator_id(), id) << "the same directory: the same evaluator";
  ASSERT_TRUE(up.WaitForAttempts(2));
  queue->Stop();
  std::vector<Report> a = up.attempts();
  ASSERT_EQ(a.size(), 2u);
  std::sort(a.begin(), a.end(), [](const Report& x, const Report& y) { return x.kind < y.kind; });
  EXPECT_EQ(a[0].kind, rl::PlanKind::kEpisode);
  EXPECT_TRUE(a[0].grant.has_value());
  EXPECT_EQ(a[1].kind, rl::PlanKind::kCandidate);
  EXPECT_EQ(a[1].episode_id, 8u);
  EXPECT_FALSE(a[1].grant.has_value()) << "a candidate is not rewarded";
  EXPECT_FALSE(QueueFileExists(8, "episode"));
  EXPECT_FALSE(QueueFileExists(8, "candidate"));
  auto fresh = MakeQueue(&up, nullptr, dir_ + "-new");
  ASSERT_TRUE(fresh->Start().ok());
  EXPECT_NE(fresh->evaluator_id(), id) << "a new directory: another evaluator";
  fresh->Stop();
  std::filesystem::remove_all(dir_ + "-new");
}

// The queue's files on a disk that cut or altered them (writes are atomic; a
// disk is not): a plan file is never trusted, it is removed with one log line
// and the queue takes another identity, so the learner (PlanSender) sends its
// pending plans again; a bad lambda.txt starts λ from lambda_init, a bad
// evaluator_id.txt gives a new id.
// error-case: storage.queue-file-corrupt
// error-case: storage.lambda-file-corrupt
// error-case: storage.evaluator-id-corrupt
TEST_F(EvaluationQueueTest, ACutOrAlteredQueueFileIsNeverTrusted) {
  std::string id;
  {
    FakeLearner down(1 << 30, absl::DeadlineExceededError("no learner"));
    auto queue = MakeQueue(&down);
    ASSERT_TRUE(queue->Start().ok());
    id = queue->evaluator_id();
    for (uint64_t e : {8, 9}) ASSERT_TRUE(queue->Submit(Plan(e)).ok());
    ASSERT_TRUE(down.WaitForAttempts(1));
    queue->Stop();
  }
  const std::string cut = dir_ + "/episode-8.plan.pb", altered = dir_ + "/episode-9.plan.pb";
  std::string bytes = base::ReadFile(cut).value();
  const size_t payload = bytes.size() - bytes.find('\n') - 1;  // after the checked file's header
  ASSERT_TRUE(base::WriteFileAtomic(cut, bytes.substr(0, bytes.size() - 5)).ok());
  bytes = base::ReadFile(altered).value();
  bytes[bytes.size() - 3] ^= 0x01;
  ASSERT_TRUE(base::WriteFileAtomic(altered, bytes).ok());
  rl::BatchLambda moved(lagrange_);
  moved.Observe(1.0);
  moved.EndBatch();
  ASSERT_NE(moved.batch_lambda(), lagrange_.lambda_init);
  ASSERT_TRUE(base::WriteCheckedFile(dir_ + "/lambda.txt", moved.Serialize()).ok());
  ASSERT_TRUE(base::WriteFileAtomic(dir_ + "/lambda.txt",
                                    base::ReadFile(dir_ + "/lambda.txt")->substr(0, 20))
                  .ok());
  std::vector<std::string> log;
  FakeLearner up(0, absl::OkStatus());
  auto queue = MakeQueue(&up, nullptr, "", [&](const std::string& l) { log.push_back(l); });
  ASSERT_TRUE(queue->Start().ok());
  EXPECT_EQ(queue->depth(), 0) << "neither plan is trusted";
  EXPECT_FALSE(QueueFileExists(8));
  EXPECT_FALSE(QueueFileExists(9));
  EXPECT_NE(queue->evaluator_id(), id) << "another identity: the learner sends its plans again";
  EXPECT_DOUBLE_EQ(queue->lambda(), lagrange_.lambda_init);
  auto logged = [&](const std::string& line) {
    return std::count(log.begin(), log.end(), line) == 1;
  };
  EXPECT_TRUE(logged("evaluator: " + cut + ": truncated (" + std::to_string(payload - 5) +
                     " bytes, the header says " + std::to_string(payload) +
                     "); removed, the learner sends the plan again"))
      << ::testing::PrintToString(log);
  EXPECT_TRUE(logged("evaluator: " + altered +
                     ": checksum mismatch (the file was altered); removed, the learner sends "
                     "the plan again"));
  EXPECT_TRUE(logged("evaluator: " + dir_ +
                     "/lambda.txt: no checksum header (truncated or not a WQCHECKED1 file); "
                     "lambda starts again from lambda_init"));
  ASSERT_TRUE(queue->Submit(Plan(8)).ok());  // sent again: evaluated and reported
  ASSERT_TRUE(up.WaitForAttempts(1));
  queue->Stop();
  EXPECT_EQ(up.attempts()[0].episode_id, 8u);
  ASSERT_TRUE(base::WriteFileAtomic(dir_ + "/evaluator_id.txt", "\x01garbage").ok());
  log.clear();
  queue = MakeQueue(&up, nullptr, "", [&](const std::string& l) { log.push_back(l); });
  ASSERT_TRUE(queue->Start().ok());
  EXPECT_EQ(queue->evaluator_id().size(), 16u);
  EXPECT_EQ(base::ReadFile(dir_ + "/evaluator_id.txt").value(), queue->evaluator_id());
  EXPECT_TRUE(
      logged("evaluator: " + dir_ + "/evaluator_id.txt: not an evaluator id (corrupt); a new one"));
  queue->Stop();
}

}  // namespace
}  // namespace windquant::evaluator
