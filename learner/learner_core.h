// LearnerCore: the learner's domain object (DESIGN.md section 5); it wires
// the learner's parts together:
// - TableMerger: the stage unit tables merged into the global table, kept in
//   output.dir/unit_table.pb;
// - rl::PpoLearner: the policy; UpdateBatch: the evaluated episodes of the
//   next PPO update (every training.episodes_per_update episodes);
// - HeldEpisodes: each finished episode held until its evaluation arrives (or
//   EvaluationClock's wait passes: service.evaluation_timeout_ms plus what the
//   evaluator's measured per-plan time and queue need); an episode id is accepted once per
//   run (ids already in plans.jsonl are refused after a restart too);
// - CandidateQueue: candidate plans for the evaluator: at the start of every
//   curriculum stage the Lagrangian reference plan of the stage's target
//   (quant::LagrangePlan) and after every PPO update the greedy (argmax) plan
//   of the new policy (TakeCandidates; ids with rl::kCandidateEpisodeBit);
//   their evaluations come back through ReportEvaluation and only compete for
//   the best plan (no PPO batch, no reward);
// - BestPlans: the best feasible plan (plan files under output.dir/best) and
//   the curriculum criterion (rl::Curriculum: the stage's best policy plan
//   against its reference plan);
// - RunRecords: plans.jsonl (every evaluated plan: no finished plan is lost),
//   the training curve and the stage history;
// - rl::RunCheckpoint under output.dir/checkpoint, LearnerMetrics.
// The episode-end reward is rl::EpisodeEndReward. With training.warm_start =
// lagrange the policy is behaviour-cloned on the reference plan
// (rl::WarmStartOnPlan) before the stage's first policy is published; no
// policy is published before the table is complete and the stage started.
// When the curriculum finishes, the run is done once the candidates still
// out are evaluated (or expired). A candidate in flight when the learner
// stops is lost; a restarted learner queues the stage's reference again.
// λ (rl::BatchLambda): every episode of one PPO batch
// is rewarded with the learner's λ at the previous PPO update (lambda_init
// before the first); each evaluated episode's d then moves λ, and the value at
// the PPO update is the next batch's (it is the checkpointed λ, so a restarted
// learner rewards with the same one). The λ an evaluation reports (the
// evaluator's, already moved by that very plan) is not used for rewards: with
// it the episodes of one batch got penalties of very different scale. The
// learner's λ goes back in every ReportEvaluationReply; the evaluator
// continues from it, so both processes show the same multiplier.
// Metrics (when given a registry): LearnerMetrics.
// Result() (rl::RunResult): `best` and `reference` as BestPlans keeps them;
// `curve` and `stages` as RunRecords; `evaluations` counts the episode and
// candidate evaluations this process accepted, cached ones included,
// `cache_hits` those whose report said cached; `seconds` is the wall time
// since Create; `lambda` is the batch λ (the checkpointed one).
// set_stop_after_updates(n): after n updates run by this process the
// checkpoint is written and the learner stops: SubmitEpisode and
// ReportEvaluation answer false, TakeCandidates hands out nothing,
// WaitForPolicy returns at once with nothing new (the policy of the last
// update is only in the checkpoint), Status().stopped is true and done()
// stays false (`windquant quantize --stop-after-updates`).
// Every checkpoint write logs "learner: checkpoint: update N written to DIR".
// A RunObserver (optional, borrowed) hears of every checkpoint, new best plan
// and the end of the run.
// Thread-safety: all methods are thread-safe (one mutex; the PPO update of a
// tiny policy runs under it). Status(), version() and done() read a snapshot
// published after every change, so they never wait for a PPO update (a
// status probe with a short deadline must not fail because the learner is
// busy).
#ifndef WINDQUANT_LEARNER_LEARNER_CORE_H_
#define WINDQUANT_LEARNER_LEARNER_CORE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config/run_config.h"
#include "common/metrics/registry.h"
#include "common/quant/unit_table.h"
#include "common/rl/curriculum.h"
#include "common/rl/environment.h"
#include "common/rl/episode.h"
#include "common/rl/lagrange.h"
#include "common/rl/plan_evaluation.h"
#include "common/rl/plan_surrogate.h"
#include "common/rl/ppo.h"
#include "common/rl/training.h"
#include "learner/best_plans.h"
#include "learner/candidate_queue.h"
#include "learner/evaluation_clock.h"
#include "learner/held_episodes.h"
#include "learner/learner_metrics.h"
#include "learner/run_observer.h"
#include "learner/run_records.h"
#include "learner/table_merger.h"
#include "learner/update_batch.h"

namespace windquant::learner {

struct EvaluationInput {
  uint64_t episode_id = 0;
  std::string plan_id;
  // As the evaluator measured it (cached: it had measured an identical plan before).
  rl::PlanEvaluation evaluation;
  double lambda = 0;  // the evaluator's λ (informational; rewards use the learner's)
};

struct LearnerStatus {
  int curriculum_stage = 0, curriculum_stages = 0;
  double target_bits = 0;
  int64_t updates = 0, episodes = 0, evaluations = 0, dropped_stale = 0, expired = 0;
  int64_t policy_version = 0;
  std::string best_plan_id;
  double best_bits = 0, best_perplexity = 0;
  double lambda = 0;
  bool done = false, table_complete = false;
  bool stopped = false;  // stop_after_updates reached (done stays false)
  int pending = 0;
  int pending_candidates = 0;         // candidate plans queued or at the evaluator
  int64_t candidate_evaluations = 0;  // candidate plans evaluated
};

struct PublishedPolicy {
  rl::PolicySnapshot snapshot;
  int curriculum_stage = 0;
  double target_bits = 0;
  double lambda = 0;
  rl::PlanModel plan_model;  // empty unless training.screen_samples > 1
};

class LearnerCore {
 public:
  // Restores the merged table and the checkpoint found in output.dir.
  static absl::StatusOr<std::unique_ptr<LearnerCore>> Create(
      const config::RunConfig& config, std::function<void(const std::string&)> log,
      metrics::Registry* registry = nullptr, RunObserver* observer = nullptr);

  // Stage tables of another fingerprint are refused from now on
  // (TableMerger::set_expected_fingerprint); "" = any.
  void ExpectTableFingerprint(std::string fingerprint);
  // A stage's table (any order, any replica; replicas must agree).
  // INVALID_ARGUMENT naming the field for a table inconsistent with the run.
  absl::StatusOr<RegisterResult> RegisterTable(int stage, int replica,
                                               const quant::UnitTable& table);
  // UNAVAILABLE until every stage registered.
  absl::StatusOr<quant::UnitTable> Table() const;
  // The merged table without a copy; nullptr until every stage registered.
  std::shared_ptr<const quant::UnitTable> SharedTable() const;

  // A finished episode. Returns accepted = false when dropped as stale
  // (older than max_policy_lag versions) or when the run is done.
  absl::StatusOr<bool> SubmitEpisode(rl::Episode episode);
  // The evaluation of a held episode or of a candidate plan. false for an
  // unknown or duplicate one.
  absl::StatusOr<bool> ReportEvaluation(const EvaluationInput& input);

  // Candidate plans not yet handed out, for Evaluator.SubmitPlan (episode_id
  // and plan_id set); blocks until there is one, the run is done or `timeout`
  // passes. Also expires old held episodes and candidates.
  std::vector<quant::Plan> TakeCandidates(absl::Duration timeout);
  // The evaluator refused a candidate for good: stop waiting for it.
  void DropCandidate(uint64_t episode_id);
  // Whether a candidate still waits for its evaluation (not dropped/expired).
  bool CandidatePending(uint64_t episode_id) const;

  // Latest policy; blocks until its version differs from `known_version`,
  // the run is done, or `timeout` passes.
  PublishedPolicy WaitForPolicy(int64_t known_version, absl::Duration timeout);
  int64_t version() const { return Status().policy_version; }
  LearnerStatus Status() const;
  // How long a plan out for evaluation now waits at most before it expires
  // (EvaluationClock::QueueBudget): actors wait this long for a new policy
  // before they produce more episodes at the old one.
  absl::Duration EvaluationWait() const;
  bool done() const { return Status().done; }
  // Drops held episodes older than the evaluation timeout (also done lazily).
  void ExpirePending();

  // The run so far (see the file comment for the fields' meaning).
  rl::RunResult Result() const;
  // Stop after `n` PPO updates run by this process (0 = never), see above.
  void set_stop_after_updates(int64_t n);

 private:
  explicit LearnerCore(const config::RunConfig& config);
  // The table is complete: the checkpoint (if any) is restored and the
  // stage started.
  absl::Status CompleteTable() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RestoreCheckpoint(const rl::RunCheckpoint& ckpt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<bool> ReportCandidateLocked(const EvaluationInput& input)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<bool> ReportEpisodeLocked(const EvaluationInput& input)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Update() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After an update: the curve record, the greedy candidate, the curriculum
  // step (and the next stage's start).
  // `batch_lambda`: the λ the batch was rewarded with.
  absl::Status AfterUpdate(const UpdateBatch::Taken& batch, const rl::PpoStats& stats,
                           double batch_lambda) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // training.self_imitation: clones the policy on the stage's best plan if new.
  absl::Status SelfImitate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reference candidate (+ warm start when `warm_start`) of the current stage.
  absl::Status StartStage(bool warm_start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueCandidate(std::vector<int> actions, const std::string& source, double target,
                      int64_t policy_version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Offers a measured plan to BestPlans; logs and publishes a new best.
  absl::Status ConsiderLocked(const rl::CandidatePlan& candidate, quant::Plan plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Curriculum finished and no candidate out: done (final checkpoint).
  absl::Status MaybeFinish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteCheckpoint() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // stop_after_updates reached: checkpoint (unless `checkpointed`), then stopped_.
  absl::Status StopLocked(bool checkpointed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Plans out for evaluation: held episodes and pending candidates.
  int64_t PendingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // output.dir/status.txt: the fields of `windquant status`, one key=value per
  // line, rewritten atomically after each update (for scripts without the CLI).
  void WriteStatusFile() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  LearnerStatus StatusLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes the current state: the status snapshot and the gauges.
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Log(const std::string& line) const;

  class PublishOnReturn;

  const config::RunConfig config_;
  std::function<void(const std::string&)> log_;
  RunObserver* observer_ = nullptr;  // borrowed; may be null
  LearnerMetrics metrics_;           // all nullptr without a registry
  mutable absl::Mutex mu_;
  TableMerger tables_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const rl::UnitCosts> costs_ ABSL_GUARDED_BY(mu_);
  // The reward model for screening (training.screen_samples > 1), fitted on
  // every plan measured since the table was completed; null when off.
  std::unique_ptr<rl::PlanModelFitter> fitter_ ABSL_GUARDED_BY(mu_);
  std::string run_fingerprint_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<rl::PpoLearner> ppo_ ABSL_GUARDED_BY(mu_);
  rl::Curriculum curriculum_ ABSL_GUARDED_BY(mu_);
  rl::BatchLambda lambda_ ABSL_GUARDED_BY(mu_);
  int warm_started_stage_ ABSL_GUARDED_BY(mu_) = -1;
  std::vector<int> imitated_ ABSL_GUARDED_BY(mu_);   // the plan self-imitation last cloned
  bool stage_started_ ABSL_GUARDED_BY(mu_) = false;  // a policy may be published
  HeldEpisodes held_ ABSL_GUARDED_BY(mu_);
  CandidateQueue candidates_ ABSL_GUARDED_BY(mu_);
  EvaluationClock clock_ ABSL_GUARDED_BY(mu_);
  UpdateBatch batch_ ABSL_GUARDED_BY(mu_);
  BestPlans best_ ABSL_GUARDED_BY(mu_);
  RunRecords records_ ABSL_GUARDED_BY(mu_);
  int64_t resumed_from_update_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t updates_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t updates_here_ ABSL_GUARDED_BY(mu_) = 0;  // PPO updates run by this process
  int64_t episodes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t evaluations_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t candidate_evaluations_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_stale_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t expired_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t stop_after_updates_ ABSL_GUARDED_BY(mu_) = 0;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // What PublishLocked published last (status_mu_ is taken after mu_, never before).
  mutable absl::Mutex status_mu_ ABSL_ACQUIRED_AFTER(mu_);
  LearnerStatus published_ ABSL_GUARDED_BY(status_mu_);
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_LEARNER_CORE_H_
