// RunPublisher: a run's results in the artifact store (output.store; layout
// in common/store/run_repository.h), for the learner and `windquant quantize`.
//
// Run id: output.run_id when set; else output.dir/run_id when there (the
// local run goes on); else, unless the run is to start fresh, the newest run
// of the store whose id starts with "<model>-<first 8 hex of
// config::RunConfigDigest>-" (a learner restarted elsewhere with the same config
// finds its run); else a new one, that prefix + the UTC start time. The id is
// written to output.dir/run_id.
//
// Restore (Open): when output.dir holds no checkpoint (a learner whose disk
// is gone), the run's newest checkpoint in the store (run.ckpt,
// unit_table.pb, plans.jsonl, each verified against its sha256) is written
// into output.dir before the learner starts, so LearnerCore resumes from it
// as from its own files: policy and optimiser, λ, curriculum, best plan, the
// merged unit table, and the episode ids already recorded (plans.jsonl). A
// store that cannot be read is retried for `restore_timeout`, then Open fails
// (a learner must not start a second history of a run it cannot see).
//
// Pushes never block the caller: the checkpoint's files are read when
// PublishCheckpoint is called (consistent with the checkpoint), everything
// else in the background (store::BackgroundUploader: ordered, retried with
// backoff for as long as the store is down; only the newest checkpoint and
// run.json wait, an older one is superseded; every best plan and the final
// artifacts are never dropped, so an outage of the store delays them and
// loses none: run_publisher_outage_test). After each checkpoint, the two
// newest stay in the store.
//
// As the RunObserver of LearnerCore it pushes every checkpoint and every new
// best plan. Thread-safe.
#ifndef WINDQUANT_LEARNER_RUN_PUBLISHER_H_
#define WINDQUANT_LEARNER_RUN_PUBLISHER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/log.h"
#include "common/store/artifact_store.h"
#include "common/store/background_uploader.h"
#include "common/store/run_repository.h"
#include "learner/run_observer.h"

namespace windquant::learner {

struct RunPublisherOptions {
  // What the run is (job/learner_options.h builds these from the run config).
  std::string store;          // output.store: file:///abs/dir, a path or s3://bucket[/prefix]
  std::string dir;            // output.dir: the learner's files, run_id
  std::string run_id;         // output.run_id; "" = resolved as above
  std::string model_dir;      // model.dir: its last component names the model in run ids
  std::string config_digest;  // config::RunConfigDigest of the run (run ids, run.json)
  double target_bits = 0;     // the final curriculum target (run.json)
  store::S3Options s3;        // for s3:// stores
  bool fresh = false;         // a new run: neither find one in the store nor restore
  absl::Duration restore_timeout = absl::Seconds(60);
  store::UploaderOptions uploader;
  base::LogSink log;
};

class RunPublisher : public RunObserver {
 public:
  // Opens options.store (INVALID_ARGUMENT naming output.store when it is
  // empty), resolves the run id and restores options.dir as described above.
  static absl::StatusOr<std::unique_ptr<RunPublisher>> Open(RunPublisherOptions options);
  ~RunPublisher() override;

  const std::string& run_id() const { return run_id_; }
  std::string Describe() const;  // "s3://bucket/prefix runs/<id>"
  // Open wrote the store's checkpoint into output.dir.
  bool restored() const { return restored_; }

  // RunObserver.
  void OnCheckpoint(int64_t update, bool done) override;
  void OnBestPlan(const rl::CandidatePlan& best, const plan::UnitTable& table) override;
  void OnDone() override {}

  // The run's result as plan "final": `entries` (files or directories,
  // relative to `dir`), read when uploaded; `metadata` shown by `plans list`.
  // Also marks the run done in run.json. Never dropped.
  void PublishFinal(const std::string& dir, const std::vector<std::string>& entries,
                    std::map<std::string, std::string> metadata);
  // Whether the store holds the run's final plan (a learner restarted after
  // the end has nothing left to push). Errors of the store.
  absl::StatusOr<bool> HasFinal();

  // Waits for the uploads queued so far (see BackgroundUploader::Flush).
  bool Flush(absl::Duration timeout) { return uploader_->Flush(timeout); }
  void Stop(absl::Duration drain) { uploader_->Stop(drain); }
  store::UploaderStats stats() const { return uploader_->stats(); }

 private:
  RunPublisher() = default;
  absl::Status ResolveRunId(bool fresh);
  absl::Status RestoreCheckpoint(absl::Duration timeout);
  // Queues the write of run.json as it is now (coalesced).
  void QueueRunInfo() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Now, but later than the last one handed out: "newest first" keeps the
  // order of events of one process.
  std::string NextTimestamp();
  void Log(const std::string& line) const;

  RunPublisherOptions options_;
  base::LogSink log_;
  std::unique_ptr<store::ArtifactStore> store_;
  std::unique_ptr<store::RunRepository> runs_;
  std::string run_id_;
  bool restored_ = false;
  mutable absl::Mutex mu_;
  store::RunInfo info_ ABSL_GUARDED_BY(mu_);
  absl::Time last_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::unique_ptr<store::BackgroundUploader> uploader_;  // last: stopped first
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_RUN_PUBLISHER_H_
