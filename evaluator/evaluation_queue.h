// EvaluationQueue: the evaluator's scheduler (DESIGN.md section 5). The
// learner's plans (episodes' and candidates', learner/plan_sender.h) wait in a
// bounded queue, persisted one file per plan under `queue_dir` so a restarted
// evaluator evaluates what was pending (checked files, base::WriteCheckedFile:
// a cut or altered one is never trusted; it is logged and removed, and the
// queue takes a new evaluator_id so the learner sends its plans again); a
// plan already queued or being
// evaluated (same kind and id: a submission resent after a lost answer) is not
// queued twice. `queue_dir` also keeps the queue's identity (evaluator_id): a
// restart on a new directory has another, so the learner knows to send its
// plans again. One worker
// per replica calibrates its replica once (retrying while its actors come
// up), then evaluates plans through it with the ReplicaEvaluator and hands
// the report to `report`, one attempt per call: UNAVAILABLE and
// DEADLINE_EXCEEDED are retried with backoff (the report, not the
// evaluation) until delivered or Stop(); any other error drops the report.
// A plan's file is removed only once its report was answered, so a plan
// pending at a crash is evaluated after the restart. A plan whose replica
// fails is put back and retried.
// λ: the queue is its one owner (rl::EpisodeRewarder, the formulas live in
// common/rl). An episode's report (not a learner's candidate plan,
// rl::PlanKind) carries its episode-end reward with the λ of the PPO
// batch the learner will train it in; reports are delivered one at a time so
// that the learner's answer (joined the batch, the batch completed) settles
// λ before the next report is rewarded. The state is kept in
// `queue_dir`/lambda.txt (a checked file), rewritten after every answer; one
// not trusted at a restart is logged and λ starts from lagrange.lambda_init.
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
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/base/log.h"
#include "common/metrics/registry.h"
#include "common/rl/environment_options.h"
#include "common/rl/episode.h"
#include "common/rl/episode_rewarder.h"
#include "common/rl/lagrange_options.h"
#include "evaluator/replica_evaluator.h"

namespace windquant::evaluator {

struct QueuedPlan {
  rl::PlanKind kind = rl::PlanKind::kEpisode;
  plan::Plan plan;
  double effective_bits = 0;
  double charged_bits =
      0;  // v1::Plan.charged_bits: what its reward is charged with (0 = effective_bits)
  std::string actor_id;
};

struct Report {
  rl::PlanKind kind = rl::PlanKind::kEpisode;
  uint64_t episode_id = 0;
  std::string plan_id;
  PlanEvaluation evaluation;  // effective_bits: the queued plan's
  double lambda = 0;          // the open batch's λ (an episode's: the one its reward used)
  std::optional<rl::EpisodeRewardGrant> grant;  // an episode's reward; none for a candidate
};

// The learner's answer to a report (v1::ReportEvaluationReply).
struct ReportAnswer {
  bool accepted = false;
  int64_t updates = 0;  // its PPO updates after the report
  double lambda = 0;    // the λ it was last pushed
};

class EvaluationQueue {
 public:
  using ReportFn = std::function<absl::StatusOr<ReportAnswer>(const Report&)>;
  using TableFn = std::function<void(const std::vector<plan::UnitTable>&)>;
  EvaluationQueue(ReplicaEvaluator* evaluator,
                  std::vector<std::vector<transport::ActivationTransport*>> replicas,
                  const rl::EnvironmentOptions& env, const rl::LagrangeOptions& lagrange,
                  std::string queue_dir, size_t max_queue, ReportFn report,
                  metrics::Registry* registry = nullptr, base::LogSink log = base::LogToStderr);
  ~EvaluationQueue();

  // The λ of the open PPO batch.
  double lambda() const;
  // Reloads persisted plans, λ and the evaluator_id (a new one for a new
  // directory), starts one worker per replica.
  absl::Status Start();
  // RESOURCE_EXHAUSTED when full. Returns the queue depth. A plan of the same
  // kind and id queued or being evaluated is not queued again.
  absl::StatusOr<int> Submit(QueuedPlan plan);
  // The queue's identity: random hex, kept in `queue_dir` (from Start on);
  // without one, this object's.
  std::string evaluator_id() const;
  // Evaluates now on replica 0 (no λ update, no report).
  absl::StatusOr<PlanEvaluation> EvaluateNow(const plan::Plan& plan);
  // The held-out perplexity of `plan` now on replica 0
  // (ReplicaEvaluator::HeldOutPerplexity; no λ update, no report, no cache).
  absl::StatusOr<PlanEvaluation> HeldOutNow(const plan::Plan& plan);
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
  // The report of an evaluated plan (its reward and λ are filled in by Deliver).
  Report Record(const QueuedPlan& plan, const PlanEvaluation& evaluation);
  // The plan left the queue for good (reported or refused): its file goes.
  void Forget(const QueuedPlan& plan);
  // Rewards `report` of `plan` (an episode's) and delivers it, one report at a
  // time, retrying transient failures, and settles λ with the learner's
  // answer; false when stopped first.
  bool Deliver(const QueuedPlan& plan, Report report, size_t replica);
  // One attempt after another until answered, refused for good (nullopt) or
  // stopped (false).
  bool Send(const Report& report, size_t replica, std::optional<ReportAnswer>* answer);
  // Reads `queue_dir`/evaluator_id.txt, or writes a new one (also when
  // `renew`, or when the file holds no id).
  absl::Status LoadEvaluatorId(bool renew);
  // Reads `queue_dir`/lambda.txt; one not trusted (base::ReadCheckedFile) is
  // logged and removed, λ starting again from lagrange.lambda_init.
  void LoadLambda();
  // λ after an answer: the gauge and `queue_dir`/lambda.txt.
  void SaveLambdaLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits `d` or until Stop(); true when stopping.
  bool WaitOrStop(absl::Duration d);
  void PublishDepthLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string PathOf(const QueuedPlan& plan) const;

  ReplicaEvaluator* const evaluator_;
  const std::vector<std::vector<transport::ActivationTransport*>> replicas_;
  const std::string queue_dir_;
  const size_t max_queue_;
  const ReportFn report_;
  // Held across a report's delivery: the learner answers one before the next
  // is rewarded. Taken before mu_.
  absl::Mutex deliver_mu_;
  mutable absl::Mutex mu_;
  rl::EpisodeRewarder rewarder_ ABSL_GUARDED_BY(mu_);
  std::deque<QueuedPlan> queue_ ABSL_GUARDED_BY(mu_);
  // (kind, id) of every plan queued or being evaluated.
  std::set<std::pair<rl::PlanKind, uint64_t>> known_ ABSL_GUARDED_BY(mu_);
  std::string evaluator_id_ ABSL_GUARDED_BY(mu_);
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
