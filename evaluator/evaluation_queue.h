// EvaluationQueue: the evaluator's scheduler (DESIGN.md section 5). Finished
// plans wait in a bounded queue, persisted one file per episode under
// `queue_dir` so a restarted evaluator evaluates what was pending; one worker
// per replica calibrates its replica once (retrying while its actors come
// up), then evaluates plans through it with the ReplicaEvaluator, updates λ
// (rl::LagrangeMultiplier, the formula lives there, once per plan; not for a
// learner's candidate plan, rl::IsCandidateEpisode) and hands
// the report to `report`, one attempt per call: UNAVAILABLE and
// DEADLINE_EXCEEDED are retried with backoff (the report, not the
// evaluation) until delivered or Stop(); any other error drops the report.
// A plan's file is removed only once its report was answered, so a plan
// pending at a crash is evaluated after the restart. A plan whose replica
// fails is put back and retried.
// Stop() returns promptly when `report` returns promptly after the caller
// cancelled its calls (see net::Canceller).
// Metrics (when given a registry): windquant_evaluator_evaluation_duration_seconds,
// windquant_evaluator_queue_depth, windquant_evaluator_lambda.
// Thread-safety: all methods are thread-safe.
#ifndef WINDQUANT_EVALUATOR_EVALUATION_QUEUE_H_
#define WINDQUANT_EVALUATOR_EVALUATION_QUEUE_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/base/log.h"
#include "common/metrics/registry.h"
#include "common/rl/lagrange.h"
#include "evaluator/replica_evaluator.h"

namespace windquant::evaluator {

struct QueuedPlan {
  quant::Plan plan;
  double effective_bits = 0;
  std::string actor_id;
};

struct Report {
  uint64_t episode_id = 0;
  std::string plan_id;
  PlanEvaluation evaluation;  // effective_bits: the queued plan's
  double lambda = 0;
};

class EvaluationQueue {
 public:
  using ReportFn = std::function<absl::Status(const Report&)>;
  using TableFn = std::function<void(const std::vector<quant::UnitTable>&)>;
  EvaluationQueue(ReplicaEvaluator* evaluator,
                  std::vector<std::vector<transport::ActivationTransport*>> replicas,
                  const rl::LagrangeOptions& lagrange, std::string queue_dir, size_t max_queue,
                  ReportFn report, metrics::Registry* registry = nullptr,
                  base::LogSink log = base::LogToStderr);
  ~EvaluationQueue();

  void set_lambda(double lambda);
  double lambda() const;
  // Reloads persisted plans, starts one worker per replica.
  absl::Status Start();
  // RESOURCE_EXHAUSTED when full. Returns the queue depth.
  absl::StatusOr<int> Submit(QueuedPlan plan);
  // Evaluates now on replica 0 (no λ update, no report).
  absl::StatusOr<PlanEvaluation> EvaluateNow(const quant::Plan& plan);
  // The held-out perplexity of `plan` now on replica 0
  // (ReplicaEvaluator::HeldOutPerplexity; no λ update, no report, no cache).
  absl::StatusOr<PlanEvaluation> HeldOutNow(const quant::Plan& plan);
  int depth() const;
  int64_t evaluated() const;
  void Stop();

 private:
  const base::LogSink log_;
  void Worker(size_t replica);
  // The calibration pass of `replica`; false (logged) when it failed.
  bool CalibrateReplica(size_t replica);
  // The next plan, waiting up to a second; nullopt when none came or stopping.
  std::optional<QueuedPlan> PopPlan();
  // After a failed evaluation: puts the plan back unless the plan itself is bad (then
  // its file goes), and recalibrates `replica` when its actors lost their fits.
  void Requeue(size_t replica, QueuedPlan plan, const absl::Status& error);
  // The λ update (not for a candidate plan) and the report of an evaluated plan.
  Report Record(const QueuedPlan& plan, const PlanEvaluation& evaluation);
  void RemoveFile(uint64_t episode_id) const;
  // Delivers `report` (retrying transient failures); false when stopped first.
  bool Deliver(const Report& report, size_t replica);
  // Waits `d` or until Stop(); true when stopping.
  bool WaitOrStop(absl::Duration d);
  void PublishDepthLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string PathOf(uint64_t episode_id) const;

  ReplicaEvaluator* const evaluator_;
  const std::vector<std::vector<transport::ActivationTransport*>> replicas_;
  const std::string queue_dir_;
  const size_t max_queue_;
  const ReportFn report_;
  mutable absl::Mutex mu_;
  rl::LagrangeMultiplier lagrange_ ABSL_GUARDED_BY(mu_);
  std::deque<QueuedPlan> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t evaluated_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<bool> calibrated_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
  metrics::Histogram* duration_ = nullptr;  // metrics (nullptr = none)
  metrics::Gauge* depth_ = nullptr;
  metrics::Gauge* lambda_gauge_ = nullptr;
};

}  // namespace windquant::evaluator

#endif  // WINDQUANT_EVALUATOR_EVALUATION_QUEUE_H_
