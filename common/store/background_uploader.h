// BackgroundUploader: store uploads on a thread of their own, so that whoever
// produces artifacts (the learner's PPO loop) never waits for the store.
// Enqueue copies nothing and returns at once; the thread runs the jobs in
// order. A job that fails is retried after a backoff (initial_backoff,
// doubling up to max_backoff) for as long as the uploader runs, except for
// INVALID_ARGUMENT (a bad key or object: retrying cannot help), which is
// given up and logged. So a store that is down, slow or refusing (no bucket
// yet, wrong credentials) only delays the uploads: the queue holds them until
// it answers again.
// The queue is bounded (max_queued jobs): a job with a coalesce key replaces
// a queued one with the same key (only the newest checkpoint matters), so it
// holds one place per key and is never dropped; when the queue is full the
// oldest job that is neither `essential` nor coalesced is dropped (logged,
// counted); essential jobs (a run's plans and final artifacts) are never
// dropped. So an outage of any length loses no essential or coalesced job,
// only delays it. Stop(drain) waits up to `drain` for the queue to empty,
// then abandons what is left (logged).
// Memory: whatever the queued jobs' closures hold (their objects' bytes;
// file objects, store::PlanObject::File, hold a path and stream when run).
// Thread-safe.
#ifndef WINDQUANT_COMMON_STORE_BACKGROUND_UPLOADER_H_
#define WINDQUANT_COMMON_STORE_BACKGROUND_UPLOADER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/log.h"

namespace windquant::store {

struct UploadJob {
  std::string name;                   // for log lines: "checkpoint u00000012-...", "plan best-..."
  std::string coalesce_key;           // non-empty: replaces a queued job with the same key
  bool essential = false;             // never dropped for room
  std::function<absl::Status()> run;  // the upload; called again after a failure
};

struct UploaderOptions {
  size_t max_queued = 16;
  absl::Duration initial_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(30);
  base::LogSink log;  // failures, drops, recoveries
};

struct UploaderStats {
  int64_t queued = 0;           // jobs waiting or running now
  int64_t uploaded = 0;         // jobs done
  int64_t failed_attempts = 0;  // attempts that failed (and were retried or given up)
  int64_t dropped = 0;          // dropped for room, replaced by a newer one, or given up
  int64_t abandoned = 0;        // left in the queue at Stop
};

class BackgroundUploader {
 public:
  explicit BackgroundUploader(UploaderOptions options);
  ~BackgroundUploader();  // Stop(absl::ZeroDuration())

  void Enqueue(UploadJob job);
  // Waits until every job enqueued before the call is done (or dropped), or
  // `timeout` passes; true when it got there.
  bool Flush(absl::Duration timeout);
  // Stops the thread (idempotent); see above. Jobs enqueued later are dropped.
  void Stop(absl::Duration drain);
  UploaderStats stats() const;

 private:
  void Loop();

  const UploaderOptions options_;
  mutable absl::Mutex mu_;
  std::deque<UploadJob> queue_ ABSL_GUARDED_BY(mu_);
  bool running_job_ ABSL_GUARDED_BY(mu_) = false;  // the front job is being run
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;  // jobs ever enqueued
  int64_t finished_ ABSL_GUARDED_BY(mu_) = 0;  // jobs done, dropped or given up
  UploaderStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace windquant::store

#endif  // WINDQUANT_COMMON_STORE_BACKGROUND_UPLOADER_H_
