// RunPublisher over an S3 store (moto_server) whose endpoint goes away and
// comes back (testing::TcpRelay between them): while it is unreachable the
// uploads are retried with a growing, capped backoff and nothing is dropped,
// more best plans than the uploader's queue bound included; once it answers,
// every plan and the newest checkpoint are there, each verified on pull.
// Fails with a message when moto_server is not installed.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/files.h"
#include "common/store/run_repository.h"
#include "common/store/s3_artifact_store.h"
#include "common/testing/moto_server.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/synthetic_table.h"
#include "common/testing/tcp_relay.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "learner/run_publisher.h"

namespace windquant::learner {
namespace {

using ::testing::HasSubstr;

constexpr int kPlans = 24;                     // more than UploaderOptions::max_queued
constexpr int64_t kFailuresDuringOutage = 12;  // attempts that must fail before it ends
constexpr absl::Duration kWait = absl::Seconds(120);

store::S3Options Options(const std::string& endpoint) {
  store::S3Options o;
  o.endpoint_url = endpoint;
  o.access_key_id = "testing";
  o.secret_access_key = "testing";
  o.max_attempts = 1;  // the uploader's retries are under test, not the client's
  o.connect_timeout_ms = 2000;
  return o;
}

// The log of the publisher: counts the failed attempts, wakes a waiter.
class Log {
 public:
  base::LogSink Sink() {
    return [this](const std::string& line) {
      absl::MutexLock lock(&mu_);
      lines_.push_back(line);
      failures_ += absl::StrContains(line, " failed (attempt ");
    };
  }
  bool WaitForFailures(int64_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return failures_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
  }
  bool Has(const std::string& part) {
    absl::MutexLock lock(&mu_);
    return std::any_of(lines_.begin(), lines_.end(),
                       [&](const std::string& l) { return absl::StrContains(l, part); });
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
};

// kPlans distinct best plans, better and better, and a checkpoint (its files
// in `dir`) after every 8: updates 1 .. kPlans / 8.
void PublishPlansAndCheckpoints(RunPublisher& p, const std::string& dir) {
  const plan::UnitTable table = windquant::testing::SyntheticTable(14, 1);
  for (int k = 1; k <= kPlans; ++k) {
    rl::CandidatePlan best;
    for (size_t u = 0; u < table.units.size(); ++u) best.actions.push_back((k >> u) & 1 ? 2 : 4);
    best.evaluation.effective_bits = 2.0;
    best.evaluation.eval_ppl = 100.0 - k;
    best.target_bits = 2.0;
    best.source = "rl";
    best.update = k;
    p.OnBestPlan(best, table);
    if (k % 8 != 0) continue;
    for (const char* f : {"checkpoint/run.ckpt", "unit_table.pb", "plans.jsonl"})
      ASSERT_TRUE(base::WriteFileAtomic(dir + "/" + f, absl::StrCat(k, f)).ok());
    p.OnCheckpoint(k / 8, false);
  }
}

// error-case: storage.store-unreachable
TEST(RunPublisherOutageTest, AStoreAwayForAWhileDelaysUploadsAndLosesNone) {
  const ::windquant::testing::ScopedTestDir dir("wq-publisher-outage");
  ::windquant::testing::MotoServer moto;
  std::string moto_bin, aws_bin;
  const std::string failure = moto.StartForSuite(dir.path() + "/moto.log", &moto_bin, &aws_bin);
  ASSERT_TRUE(failure.empty()) << failure;
  int moto_port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(moto.endpoint().substr(moto.endpoint().rfind(':') + 1), &moto_port));
  ::windquant::testing::TcpRelay relay;
  std::string error;
  ASSERT_TRUE(relay.Start(moto_port, &error)) << error;
  auto direct = store::OpenArtifactStore("s3://wq-outage", Options(moto.endpoint()));
  ASSERT_TRUE(direct.ok()) << direct.status();
  ASSERT_TRUE(static_cast<store::S3ArtifactStore*>(direct->get())->CreateBucket().ok());

  Log log;
  RunPublisherOptions o;
  o.store = "s3://wq-outage";
  o.s3 = Options(relay.endpoint());
  o.dir = dir.path() + "/out";
  o.model_dir = "/models/stories260k";
  o.config_digest = "0123456789abcdef";
  o.target_bits = 2.0;
  o.fresh = true;
  o.uploader.initial_backoff = absl::Milliseconds(5);
  o.uploader.max_backoff = absl::Milliseconds(40);
  o.log = log.Sink();
  auto publisher = RunPublisher::Open(o);
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  RunPublisher& p = **publisher;
  ASSERT_TRUE(p.Flush(kWait));  // run.json: the store is there

  relay.SetReachable(false);
  ASSERT_NO_FATAL_FAILURE(PublishPlansAndCheckpoints(p, o.dir));
  ASSERT_TRUE(log.WaitForFailures(kFailuresDuringOutage)) << "no retries while the store is away";
  EXPECT_GT(relay.refused(), 0);
  EXPECT_TRUE(log.Has("retrying in 40ms")) << "the backoff grows to max_backoff";
  EXPECT_FALSE(log.Has("retrying in 80ms")) << "and no further";
  store::UploaderStats during = p.stats();
  EXPECT_EQ(during.dropped, 0);
  EXPECT_EQ(during.uploaded, 1);  // run.json, before the outage
  EXPECT_GE(during.queued, kPlans);
  store::RunRepository runs(direct->get());
  EXPECT_TRUE(runs.ListPlans(p.run_id())->empty());

  relay.SetReachable(true);
  ASSERT_TRUE(p.Flush(kWait)) << "the uploads went through once the store answered";
  const store::UploaderStats after = p.stats();
  EXPECT_EQ(after.dropped, 0);
  EXPECT_EQ(after.abandoned, 0);
  EXPECT_GE(after.failed_attempts, kFailuresDuringOutage);
  EXPECT_TRUE(log.Has(" uploaded after "));
  auto plans = runs.ListPlans(p.run_id());
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), static_cast<size_t>(kPlans)) << "every best plan is in the store";
  for (const store::RunPlan& plan : *plans) {
    auto pulled = runs.Plans(p.run_id()).Pull(plan.plan_id);  // sizes and sha256 verified
    EXPECT_TRUE(pulled.ok()) << plan.plan_id << ": " << pulled.status();
  }
  auto latest = runs.LatestCheckpoint(p.run_id());
  ASSERT_TRUE(latest.ok()) << latest.status();
  auto manifest = runs.Checkpoints(p.run_id()).GetManifest(*latest);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->metadata.at("update"), absl::StrCat(kPlans / 8));
  auto files = runs.Checkpoints(p.run_id()).Pull(*latest);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT((*files)[0].bytes, HasSubstr(absl::StrCat(kPlans)));
  p.Stop(absl::ZeroDuration());
}

}  // namespace
}  // namespace windquant::learner
