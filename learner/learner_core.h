// LearnerCore: the learner's domain object (DESIGN.md section 5). It takes
// the pipeline stages' unit tables, the actors' finished episodes and the
// evaluator's measurements, trains the policy with PPO through the curriculum
// and keeps the run's results in output.dir; a restarted learner resumes from
// its checkpoint there. It wires these parts:
//   TableMerger          the stages' unit tables -> the global table
//   HeldEpisodes, UpdateBatch        episodes until evaluated, then PPO batches
//   CandidateQueue       the learner's own plans out for evaluation
//   the outbox           every plan to evaluate, episodes' and candidates', in
//                        the order accepted: one path to the evaluator (PlanSender)
//   CurriculumProgress   the curriculum step, its warm start, self-imitation
//   PolicyPublisher      the policy, its updates and what actors get of it
//   (λ and the episode-end reward are the evaluator's: rl::EpisodeRewarder;
//   the learner adds the reward it is sent and keeps the λ it was pushed)
//   BestPlans, RunRecords            the best plans, plans.jsonl, the curve
//   RunLifecycle         running, stopped (stop_after_updates) or done
//   RunStart             the quality-target mode's start (run_start.h):
//                        with options.await_start the first step waits
//                        for StartAt, kept in output.dir/rl_start.json
//   StatusBoard          the status snapshot readers get without the lock
// and writes rl::RunCheckpoint (output.dir/checkpoint, CheckpointWriter: a
// failed write keeps the last good one and the run going), status.txt and
// LearnerMetrics. The contracts are at the methods.
// Thread-safety: all methods are thread-safe: one mutex, under which even the
// PPO update of the small policy runs; Status(), version() and done() read the
// StatusBoard instead, so they never wait for an update.
// Memory: no model weights; the merged unit table, the policy (see
// PolicyPublisher), the episodes held and batched until the next update, and
// the candidate plans out (one action per unit each). The outbox holds ids.
// Disk: the held episodes are journaled in output.dir/held-episodes until
// recorded (HeldEpisodes, EpisodeJournal), so that no acknowledged episode
// dies with the learner; SubmitEpisode waits for the journal's sync without
// mu_ (learner_core_intake.cc).
#ifndef WINDQUANT_LEARNER_LEARNER_CORE_H_
#define WINDQUANT_LEARNER_LEARNER_CORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/log.h"
#include "common/metrics/registry.h"
#include "common/plan/unit_table.h"
#include "common/rl/curriculum_options.h"
#include "common/rl/episode.h"
#include "common/rl/lagrange_options.h"
#include "common/rl/plan_evaluation.h"
#include "common/rl/ppo.h"
#include "common/rl/run_result.h"
#include "learner/best_plans.h"
#include "learner/candidate_queue.h"
#include "learner/checkpoint_writer.h"
#include "learner/curriculum_progress.h"
#include "learner/held_episodes.h"
#include "learner/learner_metrics.h"
#include "learner/policy_publisher.h"
#include "learner/run_lifecycle.h"
#include "learner/run_observer.h"
#include "learner/run_records.h"
#include "learner/run_start.h"
#include "learner/status_board.h"
#include "learner/table_merger.h"
#include "learner/update_batch.h"

namespace windquant::learner {

// A plan for the evaluator (v1::SubmitPlanRequest), as LearnerCore::TakeOutbox
// hands it out.
struct OutgoingPlan {
  rl::PlanKind kind = rl::PlanKind::kEpisode;
  plan::Plan plan;  // episode_id and plan_id set
  // v1::Plan.charged_bits: the bits an episode's reward is charged with (0 =
  // the plan's; only env.budget_mode = repair differs).
  double charged_bits = 0;
  std::string actor_id;  // the episode's actor; "learner" for a candidate
};

struct EvaluationInput {
  rl::PlanKind kind = rl::PlanKind::kEpisode;
  uint64_t episode_id = 0;
  std::string plan_id;
  // As the evaluator measured it (cached: it had measured an identical plan before).
  rl::PlanEvaluation evaluation;
  // An episode's reward, computed by the evaluator, λ's owner
  // (rl::EpisodeRewarder): meant for the PPO batch `batch` (the learner's
  // updates), with that batch's `lambda`; `lambda_after` is the next batch's λ
  // when this episode completes the batch. A candidate's report: `lambda` only.
  double reward = 0;
  double lambda = 0;
  double lambda_after = 0;
  int64_t batch = 0;
};

class LearnerCore {
 public:
  // What the learner reads, with the keys it is built from (job/learner_options.h).
  struct Options {
    // output.dir: unit_table.pb, checkpoint/, best/, plans.jsonl, status.txt,
    // held-episodes/, rl_start.json (with await_start).
    std::string dir = "runs/default";
    int stages = 1;                    // service.stages: the stage tables that make the table
    int replicas = 1;                  // service.replicas: replicas of each stage (they must agree)
    int chunk_size = 256;              // quant.chunk_size: the stage tables' chunk size
    rl::CurriculumOptions curriculum;  // curriculum.*
    rl::LagrangeOptions lagrange;      // lagrange.*
    // ppo.*, env.*, training.seed, training.warm_start_steps and
    // training.screen_samples; the learner also reads ppo.max_policy_lag (stale
    // episodes), env.* (episode-end rewards) and the seed (checkpoint).
    PolicyPublisher::Options policy;
    int episodes_per_update = 16;      // training.episodes_per_update
    bool warm_start = true;            // training.warm_start: lagrange (true) or none
    bool self_imitation = false;       // training.self_imitation
    double self_imitation_prob = 0.9;  // training.self_imitation_prob
    int checkpoint_every_updates = 5;  // training.checkpoint_every_updates
    // service.evaluation_timeout_ms: how long actors wait for a new policy,
    // per plan out for evaluation (EvaluationWait).
    absl::Duration evaluation_allowance = absl::Milliseconds(120000);
    // config::RunDefiningText of the run: with the table's fingerprint the
    // run fingerprint a checkpoint must match (config::RunFingerprint).
    std::string run_config_text;
    // The quality-target mode's start (run_start.h) is decided after the
    // table is complete, by StartAt (LearnerNode's start search through the
    // evaluator); until then the first step waits. false: the step starts
    // when the table is complete, under curriculum.target_bits as given.
    bool await_start = false;
  };

  // Restores the merged table and the checkpoint found in options.dir. `log`
  // gets one line per event; every checkpoint write logs "learner:
  // checkpoint: update N written to DIR" (a failed one "... NOT written to
  // DIR: why; the last good checkpoint is update M"). `registry`:
  // LearnerMetrics and CheckpointWriter's metrics when given. `observer` (borrowed, may be null)
  // hears of every checkpoint, new best plan and the end of the run.
  static absl::StatusOr<std::unique_ptr<LearnerCore>> Create(const Options& options,
                                                             base::LogSink log,
                                                             metrics::Registry* registry = nullptr,
                                                             RunObserver* observer = nullptr);

  // Stage tables of another fingerprint are refused from now on
  // (TableMerger::set_expected_fingerprint); "" = any.
  void ExpectTableFingerprint(std::string fingerprint);
  // A stage's table (any order, any replica; replicas must agree). The last
  // one completes the table (kept in output.dir/unit_table.pb): the
  // checkpoint is restored and the curriculum step started (its reference
  // candidate queued, the warm start run). INVALID_ARGUMENT naming the field
  // for a table inconsistent with the run.
  absl::StatusOr<RegisterResult> RegisterTable(int stage, int replica,
                                               const plan::UnitTable& table);
  // With options.await_start: the table is complete and the run's start not
  // decided yet (nothing of the run has started: no policy is published, no
  // episode accepted).
  bool AwaitingStart() const;
  // Decides the run's start: every curriculum target above start.cap_bits
  // (and the best plan's target) comes down to it, the start is kept in
  // output.dir/rl_start.json (a restarted learner of the same run reads it
  // there instead of waiting again), then the table's completion goes on: the
  // checkpoint restored, the step started (the warm start clones the
  // Lagrangian plan at the new cap). FAILED_PRECONDITION when not
  // AwaitingStart, INVALID_ARGUMENT for a cap that is not positive, the file's
  // errors; the errors of the checkpoint's restore and the step's start leave
  // the run waiting.
  absl::Status StartAt(const RunStart& start);
  // The start decided (nullopt without options.await_start, or not yet).
  std::optional<RunStart> start() const;
  // UNAVAILABLE until every stage registered.
  absl::StatusOr<plan::UnitTable> Table() const;
  // The merged table without a copy; nullptr until every stage registered.
  std::shared_ptr<const plan::UnitTable> SharedTable() const;

  // A finished episode, held (and journaled) until its evaluation arrives, its
  // plan queued in the outbox; UNAVAILABLE when the journal cannot be written
  // (not acknowledged: the actor sends it again). Returns accepted = false when dropped as stale
  // (older than ppo.max_policy_lag versions, or newer than this learner's policy), for an id seen
  // before in this run (plans.jsonl's ids after a restart too) and when the run is done or stopped.
  // UNAVAILABLE before the table is complete. A screened-out sample (episode.screened_out) is not
  // held: it joins the PPO batch at once, rewarded with the batch λ from its predicted perplexity
  // (rl::PredictedEvaluation; the full-precision perplexity from the evaluations
  // so far: refused before any), and neither counts towards episodes_per_update
  // nor moves λ nor competes for the best plan. (The one reward the learner
  // computes: nothing was measured, so the evaluator never sees the sample.)
  absl::StatusOr<bool> SubmitEpisode(rl::Episode episode);
  // The evaluation of a held episode or of a candidate plan (input.kind);
  // false for an unknown or duplicate one and when stopped,
  // and for an episode's reward meant for another batch than the open one
  // (input.batch != the updates so far: the episode stays held, the evaluator
  // rewards it again). Every evaluated plan goes to plans.jsonl and competes
  // for the best plan. An episode also gets its episode-end reward
  // (input.reward) and joins the PPO batch; the λ pushed with it
  // (input.lambda_after) becomes the λ shown and checkpointed when it
  // completes the batch. Every training.episodes_per_update episodes a PPO
  // update runs, the greedy plan of the new policy is queued as a candidate
  // and the curriculum may step. INVALID_ARGUMENT for a non-finite reward
  // (the episode is given up: the evaluator does not send it again).
  absl::StatusOr<bool> ReportEvaluation(const EvaluationInput& input);

  // The plans to send to the evaluator (Evaluator.SubmitPlan), episodes' and
  // candidates', in the order they were accepted and queued; blocks until
  // there is one, the run is done or `timeout` passes; nothing when stopped.
  // A plan no longer pending when its turn comes is left out.
  std::vector<OutgoingPlan> TakeOutbox(absl::Duration timeout);
  // Whether plan `id` of `kind` still waits for its evaluation.
  bool Pending(rl::PlanKind kind, uint64_t id) const;
  // Queues pending plan `id` of `kind` in the outbox again (the evaluator
  // that accepted it lost it: restarted on an empty queue directory); false
  // when it is no longer pending.
  bool Resend(rl::PlanKind kind, uint64_t id);
  // The evaluator refused the plan for good: stop waiting for it (an
  // episode is given up: it never joins a batch). `why` is logged.
  void Drop(rl::PlanKind kind, uint64_t id, const std::string& why);

  // Latest policy; blocks until its version differs from `known_version`,
  // the run is done, or `timeout` passes. Nothing new (the snapshot's version
  // is `known_version`) before the table is complete and the step started,
  // and at once when stopped (the last update's policy is in the checkpoint).
  PublishedPolicy WaitForPolicy(int64_t known_version, absl::Duration timeout);
  int64_t version() const { return Status().policy_version; }
  LearnerStatus Status() const;
  // How long actors wait for a new policy before they produce more episodes
  // at the old one: evaluation_allowance x (1 + the plans out for
  // evaluation). Nothing out is lost (the evaluator persists its queue, and
  // PlanSender resends what a restarted evaluator lost), so this only bounds
  // how long a batch short of episodes (a stale or refused one) waits.
  absl::Duration EvaluationWait() const;
  // The curriculum finished and no candidate is out (after the final
  // checkpoint); false when stopped.
  bool done() const { return Status().done; }

  // The run so far: `best` and `reference` as BestPlans keeps them; `curve`
  // and `stages` as RunRecords; `evaluations` counts the episode and candidate
  // evaluations this process accepted, cached ones included, `cache_hits`
  // those whose report said cached; `seconds` is the wall time since Create;
  // `lambda` is the λ of the open batch as the evaluator pushed it (the checkpointed one);
  // `real_evaluations` includes the run's start's (RunStart::evaluations), as quantize counts it.
  rl::RunResult Result() const;
  // After `n` PPO updates run by this process (0 = never; reached already:
  // now) the checkpoint is written and the learner stops: SubmitEpisode and
  // ReportEvaluation answer false, TakeOutbox hands out nothing,
  // WaitForPolicy returns at once with nothing new, Status().stopped is true
  // and done() stays false (`windquant quantize --stop-after-updates`).
  void set_stop_after_updates(int64_t n);

 private:
  // Counts of this run for LearnerStatus and the result.
  struct Counts {
    int64_t updates = 0;  // PPO updates of the run (restored from the checkpoint)
    int64_t resumed_from_update = -1;
    int64_t episodes = 0, evaluations = 0, candidate_evaluations = 0;
    int64_t dropped_stale = 0;
    int64_t given_up = 0;   // episodes whose plan the evaluator refused for good
    int64_t predicted = 0;  // screened-out samples learned from
  };

  LearnerCore(const Options& options, std::unique_ptr<PolicyPublisher> policy);
  // The table is complete: with options.await_start the start kept in
  // output.dir is applied (none: the run waits for StartAt), then BeginRun.
  absl::Status CompleteTable() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The checkpoint (if any) is restored and the curriculum step started.
  absl::Status BeginRun() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The curriculum's targets and the best plan's capped at start.cap_bits.
  void ApplyStart(const RunStart& start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RestoreCheckpoint(const rl::RunCheckpoint& ckpt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<bool> ReportCandidateLocked(const EvaluationInput& input)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<bool> ReportEpisodeLocked(const EvaluationInput& input)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Update() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SubmitEpisode of a screened-out sample.
  absl::StatusOr<bool> LearnPredictedLocked(rl::Episode e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SubmitEpisode's checks: nullopt when `episode` is to be journaled and
  // held (its id reserved), else the answer (a screened-out episode learned).
  std::optional<absl::StatusOr<bool>> AdmitLocked(rl::Episode& episode)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Holds `episode` once Journal returned `journaled` (its error, if any).
  absl::StatusOr<bool> HoldJournaledLocked(rl::Episode episode, const absl::Status& journaled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps the full-precision perplexity an evaluation implies (eval_ppl / (1 + d)).
  void NoteFullPrecision(const rl::PlanEvaluation& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After an update: the curve record, the curriculum criterion (and the
  // next step's start). `batch_lambda`: the λ the batch was rewarded with.
  absl::Status AfterUpdate(const UpdateBatch::Taken& batch, const rl::PpoStats& stats,
                           double batch_lambda) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // training.self_imitation: clones the best plan into the policy if new.
  absl::Status SelfImitate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The current step's reference candidate (+ warm start when `warm_start`
  // and training.warm_start = lagrange, behaviour-cloning the reference).
  absl::Status StartStep(bool warm_start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueCandidate(std::vector<int> actions, const std::string& source, double target,
                      int64_t policy_version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool PendingLocked(rl::PlanKind kind, uint64_t id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The outbox entry of pending plan `id` of `kind`; nullopt when no longer pending.
  std::optional<OutgoingPlan> OutgoingLocked(rl::PlanKind kind, uint64_t id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Offers a measured plan to BestPlans; logs and publishes a new best.
  absl::Status ConsiderLocked(const rl::CandidatePlan& candidate, plan::Plan plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Curriculum finished and no candidate out: done (final checkpoint).
  absl::Status MaybeFinish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the checkpoint (CheckpointWriter: a failed write is logged and
  // counted, the last good file kept, and is no error); errors only for a
  // policy state that cannot be saved.
  absl::Status WriteCheckpoint() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // stop_after_updates reached: checkpoint (unless `checkpointed`), then stopped.
  absl::Status StopLocked(bool checkpointed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // output.dir/status.txt (StatusFileText), rewritten atomically after each
  // update, best effort.
  void WriteStatusFile() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  LearnerStatus StatusLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes the current state: the status snapshot and the gauges.
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Log(const std::string& line) const;

  class PublishOnReturn;

  const Options options_;
  base::LogSink log_;
  RunObserver* observer_ = nullptr;  // borrowed; may be null
  LearnerMetrics metrics_;           // all nullptr without a registry
  mutable absl::Mutex mu_;
  TableMerger tables_ ABSL_GUARDED_BY(mu_);
  std::string run_fingerprint_ ABSL_GUARDED_BY(mu_);  // of the complete table and config
  const std::unique_ptr<PolicyPublisher> policy_ ABSL_GUARDED_BY(mu_);
  bool policy_ready_ ABSL_GUARDED_BY(mu_) = false;      // table complete, step started
  std::optional<RunStart> start_ ABSL_GUARDED_BY(mu_);  // with options.await_start
  CurriculumProgress curriculum_ ABSL_GUARDED_BY(mu_);
  // λ as the evaluator (its owner) pushed it: of the open PPO batch (for the
  // status, the checkpoint and screened-out samples' rewards), and the one the
  // last accepted episode would make the next batch's.
  double lambda_ ABSL_GUARDED_BY(mu_);
  double next_lambda_ ABSL_GUARDED_BY(mu_);
  HeldEpisodes held_ ABSL_GUARDED_BY(mu_);
  UpdateBatch batch_ ABSL_GUARDED_BY(mu_);
  CandidateQueue candidates_ ABSL_GUARDED_BY(mu_);
  // Plans to send, by kind and id, in order (OutgoingLocked makes the plan).
  std::deque<std::pair<rl::PlanKind, uint64_t>> outbox_ ABSL_GUARDED_BY(mu_);
  BestPlans best_ ABSL_GUARDED_BY(mu_);
  RunRecords records_ ABSL_GUARDED_BY(mu_);
  RunLifecycle run_ ABSL_GUARDED_BY(mu_);
  Counts counts_ ABSL_GUARDED_BY(mu_);
  CheckpointWriter checkpoints_ ABSL_GUARDED_BY(mu_);
  double fp_eval_ppl_ ABSL_GUARDED_BY(mu_) = 0;  // 0 until an evaluation implied it
  StatusBoard board_;                            // thread-safe; written under mu_ (PublishLocked)
};

}  // namespace windquant::learner

#endif  // WINDQUANT_LEARNER_LEARNER_CORE_H_
