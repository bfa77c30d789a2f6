#include "learner/learner_core.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/rl/environment.h"
#include "common/rl/episode_reward.h"
#include "common/rl/reward_model.h"
#include "common/rl/run_checkpoint.h"
#include "common/search/baselines.h"

namespace windquant::learner {
namespace {

std::string TablePath(const LearnerCore::Options& o) { return o.dir + "/unit_table.pb"; }
std::string CheckpointDir(const LearnerCore::Options& o) { return o.dir + "/checkpoint"; }

}  // namespace

// Declared right after a MutexLock on mu_: publishes the state when the
// method returns, before the lock is released.
class LearnerCore::PublishOnReturn {
 public:
  explicit PublishOnReturn(LearnerCore* core) : core_(core) {}
  ~PublishOnReturn() ABSL_NO_THREAD_SAFETY_ANALYSIS { core_->PublishLocked(); }

 private:
  LearnerCore* const core_;
};

LearnerCore::LearnerCore(const Options& options, std::unique_ptr<PolicyPublisher> policy)
    : options_(options),
      tables_(options.stages, options.replicas, options.chunk_size, TablePath(options)),
      policy_(std::move(policy)),
      curriculum_(options.curriculum),
      lambda_(options.lagrange.lambda_init),
      next_lambda_(options.lagrange.lambda_init),
      held_(options.dir + "/held-episodes", [this](const std::string& line) { Log(line); }),
      best_(options.curriculum.target_bits.back(), options.dir + "/best",
            options.lagrange.max_ppl_increase()),
      records_(options.dir),
      checkpoints_(CheckpointDir(options), options.checkpoint_every_updates,
                   [this](const std::string& line) { Log(line); }) {}

void LearnerCore::Log(const std::string& line) const {
  if (log_) log_(line);
}

void LearnerCore::PublishLocked() {
  board_.Publish(StatusLocked());
  metrics_.SetState(static_cast<double>(policy_->version()), curriculum_.target_bits(), lambda_,
                    options_.lagrange.max_ppl_increase());
  if (!best_.best().actions.empty()) metrics_.SetBest(best_.best().evaluation);
}

absl::StatusOr<std::unique_ptr<LearnerCore>> LearnerCore::Create(const Options& options,
                                                                 base::LogSink log,
                                                                 metrics::Registry* registry,
                                                                 RunObserver* observer) {
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<PolicyPublisher> policy,
                      PolicyPublisher::Create(options.policy));
  std::unique_ptr<LearnerCore> core(new LearnerCore(options, std::move(policy)));
  core->log_ = std::move(log);
  core->observer_ = observer;
  if (registry != nullptr) {
    WQ_ASSIGN_OR_RETURN(core->metrics_, LearnerMetrics::Create(*registry));
  }
  absl::MutexLock lock(&core->mu_);
  if (registry != nullptr) WQ_RETURN_IF_ERROR(core->checkpoints_.Register(*registry));
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  // Episodes recorded before a restart are never accepted again.
  for (uint64_t id : core->records_.RecordedEpisodeIds()) core->held_.MarkSeen(id);
  const Options* run = &core->options_;  // lives as long as tables_
  core->tables_.set_validator([run](const plan::UnitTable& table) {
    return CurriculumProgress::CheckTable(run->curriculum, run->warm_start, table);
  });
  // The saved table is the actors' tables merged: one not trusted is removed,
  // and they register theirs again (actor/rollout_loop.cc: the learner has none).
  if (absl::Status saved = core->tables_.LoadSaved(); absl::IsDataLoss(saved)) {
    core->Log(absl::StrCat("learner: ", saved.message(), "; removed, the actors register again"));
    std::filesystem::remove(TablePath(options), ec);
    std::filesystem::remove(core->tables_.ChecksumPath(), ec);
  } else {
    WQ_RETURN_IF_ERROR(saved);
  }
  if (core->tables_.table() != nullptr) WQ_RETURN_IF_ERROR(core->CompleteTable());
  core->PublishLocked();
  return core;
}

void LearnerCore::ExpectTableFingerprint(std::string fingerprint) {
  absl::MutexLock lock(&mu_);
  tables_.set_expected_fingerprint(std::move(fingerprint));
}

absl::Status LearnerCore::BeginRun() {
  const plan::UnitTable& table = *tables_.table();
  absl::StatusOr<rl::RunCheckpoint> ckpt = rl::ReadRunCheckpoint(
      CheckpointDir(options_), run_fingerprint_, options_.lagrange.max_ppl_increase());
  if (!ckpt.ok() && !absl::IsNotFound(ckpt.status())) return ckpt.status();
  if (ckpt.ok()) WQ_RETURN_IF_ERROR(RestoreCheckpoint(*ckpt));
  checkpoints_.Restored(ckpt.ok() ? &*ckpt : nullptr);
  // A resumed step whose warm start ran before is not cloned again (the
  // checkpointed policy has it); its reference is evaluated again (the
  // evaluator caches it), a report in flight at a restart being lost.
  if (!curriculum_.finished()) WQ_RETURN_IF_ERROR(StartStep(curriculum_.StepIsNew()));
  // Acknowledged before a crash (reads the journal under mu_: once, at start).
  WQ_ASSIGN_OR_RETURN(const std::vector<uint64_t> again, held_.Reload(table));
  for (uint64_t id : again) outbox_.emplace_back(rl::PlanKind::kEpisode, id);
  if (!again.empty()) Log(absl::StrCat("learner: ", again.size(), " episodes held again"));
  policy_ready_ = true;
  WriteStatusFile();
  PublishLocked();
  return absl::OkStatus();
}

absl::Status LearnerCore::RestoreCheckpoint(const rl::RunCheckpoint& ckpt) {
  WQ_RETURN_IF_ERROR(policy_->LoadState(ckpt.learner_state));
  counts_.updates = ckpt.update;
  curriculum_.Restore(ckpt);
  lambda_ = next_lambda_ = ckpt.lambda;
  best_.Restore(ckpt.best, ckpt.best_stage, ckpt.stage_reference_ppl);
  NoteFullPrecision(ckpt.best.evaluation);
  records_.Restore(ckpt.curve, ckpt.stages);
  counts_.resumed_from_update = ckpt.update;
  run_.Restore(ckpt.curriculum_finished);
  Log(absl::StrCat("learner: resumed from checkpoint at update ", counts_.updates,
                   ", policy version ", policy_->version()));
  return absl::OkStatus();
}

absl::Status LearnerCore::StartStep(bool warm_start) {
  const double target = curriculum_.target_bits();
  if (curriculum_.StepIsNew()) best_.StartStep();  // not a resumed one
  // The log keeps the user-facing word "stage" (as the config keys and status fields do).
  Log(absl::StrCat("learner: curriculum stage ", curriculum_.step() + 1, "/",
                   curriculum_.num_steps(), ", target ", target, " bits"));
  absl::StatusOr<plan::Plan> ref = search::LagrangePlan(*tables_.table(), target);
  if (!ref.ok()) {
    // Without a reference, warm_start = lagrange cannot run.
    Log(absl::StrCat("learner: no reference (lagrange) plan at ", target,
                     " bits: ", ref.status().message(), "; no warm start"));
    curriculum_.MarkStepStarted();
    return options_.warm_start ? absl::FailedPreconditionError(absl::StrCat(
                                     "training.warm_start: lagrange needs a reference plan at ",
                                     target, " bits: ", ref.status().message()))
                               : absl::OkStatus();
  }
  if (warm_start && options_.warm_start) {
    WQ_ASSIGN_OR_RETURN(double prob, policy_->ClonePlan(target, ref->actions));
    Log(absl::StrCat("learner: warm start: behaviour-cloned the lagrange plan, mean p(action) ",
                     absl::SixDigits(prob)));
  }
  curriculum_.MarkStepStarted();
  QueueCandidate(std::move(ref->actions), "lagrange", target, -1);
  return absl::OkStatus();
}

void LearnerCore::QueueCandidate(std::vector<int> actions, const std::string& source, double target,
                                 int64_t policy_version) {
  const plan::Plan& p = candidates_.Queue(std::move(actions), source, target, policy_version,
                                          tables_.table()->fingerprint);
  outbox_.emplace_back(rl::PlanKind::kCandidate, p.episode_id);
}

std::optional<OutgoingPlan> LearnerCore::OutgoingLocked(rl::PlanKind kind, uint64_t id) const {
  if (kind == rl::PlanKind::kCandidate) {
    const plan::Plan* p = candidates_.Find(id);
    if (p == nullptr) return std::nullopt;
    return OutgoingPlan{kind, *p, 0, "learner"};
  }
  const rl::Episode* e = held_.Find(id);
  if (e == nullptr) return std::nullopt;
  OutgoingPlan out;
  out.plan = e->plan;
  out.plan.episode_id = id;
  out.actor_id = e->actor_id;
  // The bits the evaluator charges the reward with (repair mode: the episode's).
  out.charged_bits =
      rl::ChargedEvaluation(options_.policy.env, *tables_.table(), e->steps, rl::PlanEvaluation())
          .effective_bits;
  return out;
}

std::vector<OutgoingPlan> LearnerCore::TakeOutbox(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  // A stopped learner hands out nothing (and waits the timeout: no busy loop).
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (!outbox_.empty() && !run_.stopped()) || run_.done();
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  std::vector<OutgoingPlan> out;
  if (run_.stopped()) return out;
  for (const auto& [kind, id] : outbox_) {
    std::optional<OutgoingPlan> p = OutgoingLocked(kind, id);
    if (p.has_value()) out.push_back(*std::move(p));
  }
  outbox_.clear();
  return out;
}

bool LearnerCore::PendingLocked(rl::PlanKind kind, uint64_t id) const {
  return kind == rl::PlanKind::kCandidate ? candidates_.Pending(id) : held_.Find(id) != nullptr;
}

bool LearnerCore::Pending(rl::PlanKind kind, uint64_t id) const {
  absl::MutexLock lock(&mu_);
  return PendingLocked(kind, id);
}

bool LearnerCore::Resend(rl::PlanKind kind, uint64_t id) {
  absl::MutexLock lock(&mu_);
  if (!PendingLocked(kind, id)) return false;
  outbox_.emplace_back(kind, id);
  return true;
}

void LearnerCore::Drop(rl::PlanKind kind, uint64_t id, const std::string& why) {
  absl::MutexLock lock(&mu_);
  PublishOnReturn publish(this);
  const bool episode = kind == rl::PlanKind::kEpisode;
  if (episode ? !held_.GiveUp(id) : !candidates_.Drop(id)) return;
  Log(absl::StrCat("learner: ", episode ? "episode " : "candidate ", id,
                   episode ? " given up: " : " dropped: ", why));
  counts_.given_up += episode;
  // The run's end waits for no dropped candidate.
  if (absl::Status s = MaybeFinish(); !s.ok()) Log(absl::StrCat("learner: ", s.message()));
}

absl::Status LearnerCore::MaybeFinish() {
  const auto out = static_cast<int64_t>(candidates_.pending() + held_.size());
  if (!run_.FinishDue(curriculum_.finished(), out)) {
    return absl::OkStatus();
  }
  run_.MarkDone();
  Log("learner: done");
  WQ_RETURN_IF_ERROR(WriteCheckpoint());
  WriteStatusFile();
  if (observer_ != nullptr) observer_->OnDone();
  return absl::OkStatus();
}

absl::Status LearnerCore::ConsiderLocked(const rl::CandidatePlan& candidate, plan::Plan plan) {
  policy_->AddMeasured(candidate.actions, candidate.evaluation);
  const bool this_step =
      !curriculum_.finished() && candidate.target_bits == curriculum_.target_bits();
  const std::string plan_id = plan.plan_id;
  WQ_ASSIGN_OR_RETURN(bool best,
                      best_.Consider(candidate, std::move(plan), this_step, *tables_.table()));
  if (!best) return absl::OkStatus();
  Log(absl::StrCat("learner: best plan ", plan_id, " (", candidate.source, ") bits ",
                   candidate.evaluation.effective_bits, " ppl ", candidate.evaluation.eval_ppl));
  if (observer_ != nullptr) observer_->OnBestPlan(best_.best(), *tables_.table());
  PublishLocked();
  return absl::OkStatus();
}

absl::StatusOr<RegisterResult> LearnerCore::RegisterTable(int stage, int replica,
                                                          const plan::UnitTable& table) {
  absl::MutexLock lock(&mu_);
  PublishOnReturn publish(this);
  bool completed = false;
  WQ_ASSIGN_OR_RETURN(RegisterResult r, tables_.Register(stage, replica, table, &completed));
  if (completed) {
    WQ_RETURN_IF_ERROR(CompleteTable());
    Log(absl::StrCat("learner: unit table complete, ", r.total_units, " units"));
  }
  return r;
}

absl::StatusOr<plan::UnitTable> LearnerCore::Table() const {
  absl::MutexLock lock(&mu_);
  WQ_RETURN_IF_ERROR(tables_.CompleteOrUnavailable());
  return *tables_.table();
}

std::shared_ptr<const plan::UnitTable> LearnerCore::SharedTable() const {
  absl::MutexLock lock(&mu_);
  return tables_.table();
}

absl::Duration LearnerCore::EvaluationWait() const {
  absl::MutexLock lock(&mu_);
  const int64_t out = static_cast<int64_t>(held_.size() + candidates_.pending());
  return options_.evaluation_allowance * (1 + out);
}

void LearnerCore::NoteFullPrecision(const rl::PlanEvaluation& e) {
  const double fp = e.eval_ppl / (1.0 + e.relative_ppl_increase);
  if (e.eval_ppl > 0 && std::isfinite(fp) && fp > 0) fp_eval_ppl_ = fp;
}

absl::StatusOr<bool> LearnerCore::ReportEvaluation(const EvaluationInput& in) {
  absl::MutexLock lock(&mu_);
  PublishOnReturn publish(this);
  if (run_.stopped()) return false;
  return in.kind == rl::PlanKind::kCandidate ? ReportCandidateLocked(in) : ReportEpisodeLocked(in);
}

// A candidate plan: it competes for the best plan, nothing else.
absl::StatusOr<bool> LearnerCore::ReportCandidateLocked(const EvaluationInput& in) {
  std::optional<plan::Plan> plan = candidates_.TakeEvaluated(in.episode_id, in.plan_id);
  if (!plan.has_value()) return false;
  const rl::PlanEvaluation& pe = in.evaluation;
  NoteFullPrecision(pe);
  ++counts_.candidate_evaluations;
  records_.CountEvaluation(pe.cached);
  records_.RecordCandidate(*plan, pe);
  Log(absl::StrCat("learner: candidate ", in.plan_id, " bits ", pe.effective_bits, " ppl ",
                   pe.eval_ppl));
  const rl::CandidatePlan cand{
      plan->actions, pe, plan->target_bits, plan->source, counts_.updates, plan->policy_version};
  WQ_RETURN_IF_ERROR(ConsiderLocked(cand, *std::move(plan)));
  WQ_RETURN_IF_ERROR(MaybeFinish());
  return true;
}

absl::StatusOr<bool> LearnerCore::ReportEpisodeLocked(const EvaluationInput& in) {
  const rl::Episode* peek = held_.Find(in.episode_id);
  if (peek == nullptr) return false;
  // Rewarded for another batch (the evaluator's λ state is behind or ahead,
  // e.g. after a restart): it stays held; the answer's updates say which.
  if (in.batch != counts_.updates) return false;
  const rl::PlanEvaluation& pe = in.evaluation;
  // The bits the episode chose (repair mode), for the batch's mean bits.
  const rl::PlanEvaluation charged =
      rl::ChargedEvaluation(options_.policy.env, *tables_.table(), peek->steps, pe);
  const double target =
      peek->plan.target_bits > 0 ? peek->plan.target_bits : curriculum_.target_bits();
  // Checked before anything changes. The evaluator does not send a refused
  // report again, so the episode is given up.
  if (!std::isfinite(in.reward)) {
    held_.GiveUp(in.episode_id);
    ++counts_.given_up;
    if (absl::Status s = MaybeFinish(); !s.ok()) Log(absl::StrCat("learner: ", s.message()));
    return absl::InvalidArgumentError(absl::StrCat("reward: not finite for episode ", in.episode_id,
                                                   " (perplexity ", pe.eval_ppl, ", bits ",
                                                   pe.effective_bits, ")"));
  }
  std::optional<rl::Episode> held = held_.Take(in.episode_id);
  rl::Episode& e = *held;
  NoteFullPrecision(pe);
  ++counts_.evaluations;
  records_.CountEvaluation(pe.cached);
  next_lambda_ = in.lambda_after;
  double ret = in.reward;
  for (const auto& t : e.steps) ret += t.reward;
  e.steps.back().reward += static_cast<float>(in.reward);
  // Every evaluated plan is recorded; the best feasible one is kept as plan files.
  records_.RecordEpisode(e, in.plan_id, pe, ret);
  held_.Release(e.episode_id);
  {
    rl::CandidatePlan cand{e.plan.actions, pe, target, "rl", counts_.updates, e.policy_version};
    plan::Plan plan = e.plan;
    plan.plan_id = in.plan_id;
    WQ_RETURN_IF_ERROR(ConsiderLocked(cand, std::move(plan)));
  }
  batch_.Add(std::move(e.steps), ret, pe.eval_ppl, charged.effective_bits);
  if (batch_.episodes() >= options_.episodes_per_update && !curriculum_.finished()) {
    WQ_RETURN_IF_ERROR(Update());
  }
  WQ_RETURN_IF_ERROR(MaybeFinish());  // the last episode out after the curriculum ended
  return true;
}

absl::Status LearnerCore::Update() {
  const UpdateBatch::Taken batch = batch_.Take();
  const double batch_lambda = lambda_;  // the λ this batch was rewarded with
  const auto start = std::chrono::steady_clock::now();
  WQ_ASSIGN_OR_RETURN(rl::PpoStats stats, policy_->Update(batch.transitions));
  lambda_ = next_lambda_;  // the next batch's, as the evaluator pushed it
  ++counts_.updates;
  run_.OnUpdate();
  metrics_.OnUpdate(batch.mean_reward);
  WQ_RETURN_IF_ERROR(SelfImitate());
  {  // The greedy plan of the updated policy is a candidate too.
    const double target = curriculum_.target_bits();
    WQ_ASSIGN_OR_RETURN(std::vector<int> greedy, policy_->GreedyPlan(target));
    QueueCandidate(std::move(greedy), "rl-greedy", target, policy_->version());
  }
  WQ_RETURN_IF_ERROR(AfterUpdate(batch, stats, batch_lambda));
  bool checkpointed = false;
  if (curriculum_.finished() || checkpoints_.Due(counts_.updates)) {
    WQ_RETURN_IF_ERROR(WriteCheckpoint());
    checkpointed = true;
  }
  if (run_.StopDue()) WQ_RETURN_IF_ERROR(StopLocked(checkpointed));
  WQ_RETURN_IF_ERROR(MaybeFinish());
  WriteStatusFile();
  PublishLocked();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Log(absl::StrCat("learner: update ", counts_.updates, " version ", policy_->version(),
                   " mean reward ", batch.mean_reward, " predicted ", batch.predicted, " used ",
                   stats.samples_used, " stale ", stats.samples_dropped_stale, " in ",
                   absl::SixDigits(seconds), " s", run_.done() ? " (done)" : "",
                   run_.stopped() ? " (stopped)" : ""));
  return absl::OkStatus();
}

absl::Status LearnerCore::SelfImitate() {
  if (!options_.self_imitation) return absl::OkStatus();
  const std::vector<int>* plan = curriculum_.SelfImitationPlan(best_.best(), best_.best_of_step());
  if (plan == nullptr) return absl::OkStatus();
  WQ_RETURN_IF_ERROR(
      policy_->ClonePlan(curriculum_.target_bits(), *plan, options_.self_imitation_prob).status());
  curriculum_.MarkImitated(*plan);
  return absl::OkStatus();
}

absl::Status LearnerCore::AfterUpdate(const UpdateBatch::Taken& batch, const rl::PpoStats& stats,
                                      double batch_lambda) {
  rl::UpdateRecord rec;
  rec.mean_reward = batch.mean_reward;
  rec.mean_ppl = batch.mean_ppl;
  rec.mean_bits = batch.mean_bits;
  rec.lambda = batch_lambda;
  rec.update = counts_.updates;
  rec.stage = curriculum_.step();
  rec.target_bits = curriculum_.target_bits();
  const rl::CandidatePlan& best = best_.best();
  rec.best_ppl = best.actions.empty() ? 0 : best.evaluation.eval_ppl;
  rec.best_bits = best.actions.empty() ? 0 : best.evaluation.effective_bits;
  rec.policy_loss = stats.policy_loss;
  rec.value_loss = stats.value_loss;
  rec.entropy = stats.entropy;
  rec.evaluations = records_.real_evaluations();  // cache misses, the whole run
  rec.seconds = records_.seconds();
  records_.AddUpdate(rec);
  std::string reason;
  // The criterion: the step's best policy plan against its reference.
  if (curriculum_.OnUpdate(best_.StepBestPpl(), best_.step_reference_ppl(), &reason)) {
    records_.AddStepEvent(rl::StageEvent{rec.stage, rec.target_bits, counts_.updates, reason});
    Log(absl::StrCat("learner: curriculum: ", reason));
    // A new step: its reference candidate and warm start before the policy
    // of this update is published (the lock is held until then).
    if (!curriculum_.finished()) WQ_RETURN_IF_ERROR(StartStep(true));
  }
  return absl::OkStatus();
}

absl::Status LearnerCore::WriteCheckpoint() {
  rl::RunCheckpoint c;
  c.fingerprint = run_fingerprint_;
  c.update = counts_.updates;
  curriculum_.SaveTo(&c);
  c.lambda = lambda_;
  c.rng_seed = options_.policy.seed;
  WQ_ASSIGN_OR_RETURN(c.learner_state, policy_->SaveState());
  c.best = best_.best();
  c.best_stage = best_.best_of_step();
  c.stage_reference_ppl = best_.step_reference_ppl();
  c.curve = records_.curve();
  c.stages = records_.steps();
  c.max_ppl_increase = options_.lagrange.max_ppl_increase();
  if (!checkpoints_.Write(c)) return absl::OkStatus();
  if (observer_ != nullptr) observer_->OnCheckpoint(counts_.updates, run_.done());
  return absl::OkStatus();
}

absl::Status LearnerCore::StopLocked(bool checkpointed) {
  if (!checkpointed) WQ_RETURN_IF_ERROR(WriteCheckpoint());
  run_.MarkStopped();
  Log(absl::StrCat("learner: stopped after ", run_.updates_here(),
                   " updates in this process (stop_after_updates), update ", counts_.updates));
  WriteStatusFile();
  return absl::OkStatus();
}

void LearnerCore::set_stop_after_updates(int64_t n) {
  absl::MutexLock lock(&mu_);
  PublishOnReturn publish(this);
  run_.set_stop_after_updates(n);
  // Reached already (set late): stop now. An update ran, so the table is complete.
  if (run_.StopDue()) {
    if (absl::Status s = StopLocked(false); !s.ok()) Log(absl::StrCat("learner: ", s.message()));
  }
}

rl::RunResult LearnerCore::Result() const {
  absl::MutexLock lock(&mu_);
  rl::RunResult r;
  r.best = best_.best();
  r.reference = best_.reference();
  records_.FillResult(&r);
  if (start_.has_value()) r.real_evaluations += start_->evaluations;  // as quantize counts them
  r.lambda = lambda_;
  r.updates = counts_.updates;
  r.resumed_from_update = counts_.resumed_from_update;
  r.stopped_early = run_.stopped();
  return r;
}

PublishedPolicy LearnerCore::WaitForPolicy(int64_t known_version, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  // Nothing before the table is complete and the step started (warm start).
  // A stopped learner answers at once, with nothing new.
  auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return run_.stopped() ||
           (policy_ready_ && (policy_->version() != known_version || run_.done()));
  };
  mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
  if (!policy_ready_ || run_.stopped()) {
    PublishedPolicy p;
    p.snapshot.version = known_version;  // nothing new
    return p;
  }
  return policy_->Publish(known_version, curriculum_.step(), curriculum_.target_bits(), lambda_);
}

LearnerStatus LearnerCore::Status() const { return board_.Get(); }

void LearnerCore::WriteStatusFile() {
  (void)base::WriteFileAtomic(options_.dir + "/status.txt", StatusFileText(StatusLocked()));
}

LearnerStatus LearnerCore::StatusLocked() const {
  LearnerStatus s;
  s.curriculum_stage = curriculum_.step();
  s.curriculum_stages = curriculum_.num_steps();
  s.target_bits = curriculum_.target_bits();
  s.updates = counts_.updates;
  s.episodes = counts_.episodes;
  s.evaluations = counts_.evaluations;
  s.dropped_stale = counts_.dropped_stale;
  s.given_up = counts_.given_up;
  s.policy_version = policy_->version();
  if (!best_.best().actions.empty()) {
    s.best_plan_id = "best";
    s.best_bits = best_.best().evaluation.effective_bits;
    s.best_perplexity = best_.best().evaluation.eval_ppl;
  }
  s.lambda = lambda_;
  s.done = run_.done();
  s.stopped = run_.stopped();
  s.table_complete = tables_.table() != nullptr;
  s.pending = static_cast<int>(held_.size());
  s.pending_candidates = static_cast<int>(candidates_.pending());
  s.candidate_evaluations = counts_.candidate_evaluations;
  return s;
}

}  // namespace windquant::learner
