#include "common/store/background_uploader.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Generous: a loaded 2-core machine may deschedule the uploader's thread.
constexpr absl::Duration kWait = absl::Seconds(30);

UploaderOptions FastOptions(std::vector<std::string>* log, absl::Mutex* mu) {
  UploaderOptions o;
  o.initial_backoff = absl::Milliseconds(1);
  o.max_backoff = absl::Milliseconds(4);
  o.log = [log, mu](const std::string& line) {
    absl::MutexLock lock(mu);
    log->push_back(line);
  };
  return o;
}

TEST(BackgroundUploaderTest, RunsJobsInOrderAndRetriesUntilTheStoreAnswers) {
  std::vector<std::string> log;
  absl::Mutex log_mu;
  BackgroundUploader up(FastOptions(&log, &log_mu));
  absl::Mutex mu;
  std::vector<std::string> done;
  std::atomic<int> failures_left{3};
  up.Enqueue({"first", "", false, [&]() -> absl::Status {
                if (failures_left.fetch_sub(1) > 0) return absl::UnavailableError("store down");
                absl::MutexLock lock(&mu);
                done.push_back("first");
                return absl::OkStatus();
              }});
  up.Enqueue({"second", "", false, [&] {
                absl::MutexLock lock(&mu);
                done.push_back("second");
                return absl::OkStatus();
              }});
  ASSERT_TRUE(up.Flush(kWait));
  {
    absl::MutexLock lock(&mu);
    EXPECT_THAT(done, ElementsAre("first", "second"));
  }
  const UploaderStats s = up.stats();
  EXPECT_EQ(s.uploaded, 2);
  EXPECT_EQ(s.failed_attempts, 3);
  EXPECT_EQ(s.queued, 0);
  absl::MutexLock lock(&log_mu);
  EXPECT_THAT(log.front(), HasSubstr("store: first failed (attempt 1), retrying"));
  EXPECT_THAT(log.back(), HasSubstr("store: first uploaded after 4 attempts"));
}

TEST(BackgroundUploaderTest, EnqueueNeverWaitsForASlowStore) {
  BackgroundUploader up(UploaderOptions{});
  absl::Notification release, started;
  up.Enqueue({"slow", "", false, [&] {
                started.Notify();
                release.WaitForNotification();
                return absl::OkStatus();
              }});
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kWait));
  // The store is stuck in the first upload; enqueueing more returns at once.
  for (int i = 0; i < 100; ++i)
    up.Enqueue({absl::StrCat("j", i), "", false, [] { return absl::OkStatus(); }});
  EXPECT_EQ(up.stats().queued, 17) << "16 waiting (the bound) + the running one";
  EXPECT_EQ(up.stats().dropped, 84);
  EXPECT_FALSE(up.Flush(absl::ZeroDuration()));
  release.Notify();
  EXPECT_TRUE(up.Flush(kWait));
  EXPECT_EQ(up.stats().uploaded, 17);
}

TEST(BackgroundUploaderTest, CoalescesByKeyAndNeverDropsEssentialJobs) {
  UploaderOptions o;
  o.max_queued = 2;
  BackgroundUploader up(o);
  absl::Notification release, started;
  up.Enqueue({"blocker", "", false, [&] {
                started.Notify();
                release.WaitForNotification();
                return absl::OkStatus();
              }});
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kWait));
  absl::Mutex mu;
  std::vector<std::string> done;
  auto job = [&](const std::string& name, const std::string& key, bool essential) {
    return UploadJob{name, key, essential, [&, name] {
                       absl::MutexLock lock(&mu);
                       done.push_back(name);
                       return absl::OkStatus();
                     }};
  };
  up.Enqueue(job("ckpt-1", "checkpoint", false));
  up.Enqueue(job("ckpt-2", "checkpoint", false));  // replaces ckpt-1
  up.Enqueue(job("final", "", true));
  // Full, but nothing droppable: a coalesced job holds one place per key and
  // waits however long the store is away (only the newest checkpoint matters).
  up.Enqueue(job("best", "", false));
  up.Enqueue(job("final-2", "", true));  // full: drops best; essential ones stay
  up.Enqueue(job("final-3", "", true));  // full of undroppable jobs: queued anyway
  release.Notify();
  ASSERT_TRUE(up.Flush(kWait));
  EXPECT_EQ(up.stats().dropped, 1);
  absl::MutexLock lock(&mu);
  EXPECT_THAT(done, ElementsAre("ckpt-2", "final", "final-2", "final-3"));
}

TEST(BackgroundUploaderTest, InvalidArgumentIsGivenUpAndStopAbandonsTheRest) {
  std::vector<std::string> log;
  absl::Mutex log_mu;
  BackgroundUploader up(FastOptions(&log, &log_mu));
  up.Enqueue({"bad key", "", false, [] { return absl::InvalidArgumentError("artifact key"); }});
  ASSERT_TRUE(up.Flush(kWait));
  EXPECT_EQ(up.stats().dropped, 1);
  // A store that never comes back: Stop gives up after the drain time.
  up.Enqueue({"doomed", "", true, [] { return absl::UnavailableError("store down"); }});
  up.Stop(absl::Milliseconds(20));
  EXPECT_EQ(up.stats().abandoned, 1);
  up.Enqueue({"late", "", true, [] { return absl::OkStatus(); }});
  EXPECT_EQ(up.stats().uploaded, 0);
  absl::MutexLock lock(&log_mu);
  EXPECT_THAT(log[0], HasSubstr("store: bad key given up: artifact key"));
  EXPECT_THAT(log.back(), HasSubstr("store: dropped late (the uploader has stopped)"));
}

}  // namespace
}  // namespace windquant::store
