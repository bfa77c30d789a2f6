#include "learner/learner_core.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/metrics/metric_names.h"
#include "common/quant/baselines.h"
#include "common/quant/plan_io.h"
#include "common/rl/episode_evaluator.h"
#include "common/rl/state_features.h"
#include "common/rl/training.h"
#include "windquant/v1/types.pb.h"

namespace windquant::learner {
namespace {

std::string TablePath(const config::RunConfig& c) { return c.output.dir + "/unit_table.pb"; }
std::string PlansPath(const config::RunConfig& c) { return c.output.dir + "/plans.jsonl"; }
std::string CheckpointDir(const config::RunConfig& c) { return c.output.dir + "/checkpoint"; }

template <typename T>
void SetIf(T* metric, double v) {
  if (metric != nullptr) metric->Set(v);
}

double Mean(const std::vector<double>& v) {
  double mean = 0;
  for (double x : v) mean += x / static_cast<double>(v.size());
  return mean;
}

// Pops the entries of `order` (insertion order, so the expired ones are a
// prefix) inserted before `cutoff`; returns, in id order, the ids still held
// in `held` with that insertion time (the others left already: evaluated,
// dropped).
template <typename Held>
std::vector<uint64_t> PopExpired(std::deque<std::pair<absl::Time, uint64_t>>& order,
                                 const std::map<uint64_t, Held>& held, absl::Time cutoff) {
  std::vector<uint64_t> ids;
  while (!order.empty() && order.front().first < cutoff) {
    const auto [since, id] = order.front();
    order.pop_front();
    auto it = held.find(id);
    if (it != held.end() && it->second.since == since) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

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

LearnerCore::LearnerCore(const config::RunConfig& config)
    : config_(config), curriculum_(config.curriculum), lambda_(config.lagrange) {
  // Candidate ids: the candidate bit, a random incarnation (so that a report
  // of a candidate of an earlier learner process never matches one of this
  // process), a counter.
  std::random_device rd;
  const uint64_t incarnation = (static_cast<uint64_t>(rd()) & 0x7fffffffu) | 1u;
  next_candidate_id_ = rl::kCandidateEpisodeBit | (incarnation << 32);
}

void LearnerCore::Log(const std::string& line) const {
  if (log_) log_(line);
}

absl::StatusOr<LearnerCore::Metrics> LearnerCore::MakeMetrics(metrics::Registry& r) {
  Metrics m;
  WQ_ASSIGN_OR_RETURN(auto* episodes, metrics::CounterFamily(r, metrics::kLearnerEpisodesTotal));
  WQ_ASSIGN_OR_RETURN(auto* transitions,
                      metrics::CounterFamily(r, metrics::kLearnerTransitionsTotal));
  WQ_ASSIGN_OR_RETURN(auto* updates, metrics::CounterFamily(r, metrics::kLearnerPpoUpdatesTotal));
  WQ_ASSIGN_OR_RETURN(auto* version, metrics::GaugeFamily(r, metrics::kLearnerPolicyVersion));
  WQ_ASSIGN_OR_RETURN(auto* lag, metrics::HistogramFamily(r, metrics::kLearnerPolicyLagVersions));
  WQ_ASSIGN_OR_RETURN(auto* reward, metrics::GaugeFamily(r, metrics::kLearnerMeanEpisodeReward));
  WQ_ASSIGN_OR_RETURN(auto* target, metrics::GaugeFamily(r, metrics::kLearnerTargetBits));
  WQ_ASSIGN_OR_RETURN(auto* best_bits,
                      metrics::GaugeFamily(r, metrics::kLearnerBestPlanEffectiveBits));
  WQ_ASSIGN_OR_RETURN(auto* best_ppl, metrics::GaugeFamily(r, metrics::kLearnerBestPlanPerplexity));
  WQ_ASSIGN_OR_RETURN(auto* lambda, metrics::GaugeFamily(r, metrics::kLearnerLambda));
  m.episodes = &episodes->Get();
  m.transitions = &transitions->Get();
  m.updates = &updates->Get();
  m.version = &version->Get();
  m.lag = &lag->Get();
  m.mean_reward = &reward->Get();
  m.target_bits = &target->Get();
  m.best_bits = &best_bits->Get();
  m.best_ppl = &best_ppl->Get();
  m.lambda = &lambda->Get();
  return m;
}

void LearnerCore::PublishLocked() {
  {
    LearnerStatus status = StatusLocked();
    absl::MutexLock lock(&status_mu_);
    published_ = std::move(status);
  }
  SetIf(metrics_.version, static_cast<double>(ppo_->version()));
  SetIf(metrics_.target_bits, curriculum_.target_bits());
  SetIf(metrics_.lambda, lambda_.lambda());
  if (!best_.actions.empty()) {
    SetIf(metrics_.best_bits, best_.evaluation.effective_bits);
    SetIf(metrics_.best_ppl, best_.evaluation.eval_ppl);
  }
}

absl::StatusOr<std::unique_ptr<LearnerCore>> LearnerCore::Create(
    const config::RunConfig& config, std::function<void(const std::string&)> log,
    metrics::Registry* registry) {
  if (config.curriculum.target_bits.empty()) {
    return absl::InvalidArgumentError("curriculum.target_bits: must not be empty");
  }
  std::unique_ptr<LearnerCore> core(new LearnerCore(config));
  core->log_ = std::move(log);
  if (registry != nullptr) {
    WQ_ASSIGN_OR_RETURN(core->metrics_, MakeMetrics(*registry));
  }
  absl::MutexLock lock(&core->mu_);
  WQ_ASSIGN_OR_RETURN(core->ppo_, rl::CreatePpoLearner(config));
  std::error_code ec;
  std::filesystem::create_directories(config.output.dir, ec);
  {  // Episodes recorded before a restart are never accepted again.
    std::ifstream plans(PlansPath(config));
    std::string line;
    const std::string key = "{\"episode_id\":";
    while (std::getline(plans, line)) {
      if (line.rfind(key, 0) != 0) continue;
      core->seen_.insert(std::strtoull(line.c_str() + key.size(), nullptr, 10));
    }
  }
  if (std::filesystem::exists(TablePath(config))) {
    WQ_ASSIGN_OR_RETURN(std::string bytes, base::ReadFile(TablePath(config)));
    v1::UnitTable proto;
    if (!proto.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat(TablePath(config), ": not a UnitTable"));
    }
    WQ_ASSIGN_OR_RETURN(quant::UnitTable table, quant::UnitTable::FromProto(proto));
    core->stage_tables_[0] = table;
    core->table_ = std::make_shared<const quant::UnitTable>(std::move(table));
    WQ_RETURN_IF_ERROR(core->CompleteTable());
  }
  core->PublishLocked();
  return core;
}

absl::Status LearnerCore::CompleteTable() {
  run_fingerprint_ = rl::RunFingerprint(*table_, config_);
  WQ_ASSIGN_OR_RETURN(costs_, rl::UnitCosts::Create(*table_));
  absl::StatusOr<rl::RunCheckpoint> ckpt =
      rl::ReadRunCheckpoint(CheckpointDir(config_), run_fingerprint_);
  if (!ckpt.ok() && !absl::IsNotFound(ckpt.status())) return ckpt.status();
  if (ckpt.ok()) {
    WQ_RETURN_IF_ERROR(ppo_->LoadState(ckpt->learner_state));
    updates_ = ckpt->update;
    curriculum_.Restore(ckpt->stage, ckpt->updates_in_stage, ckpt->curriculum_finished);
    lambda_.Restore(ckpt->lambda);
    best_ = ckpt->best;
    best_stage_ = ckpt->best_stage;
    stage_reference_ppl_ = ckpt->stage_reference_ppl;
    warm_started_stage_ = ckpt->warm_started_stage;
    curve_ = ckpt->curve;
    stages_ = ckpt->stages;
    resumed_from_update_ = ckpt->update;
    done_ = ckpt->curriculum_finished;
    Log(absl::StrCat("learner: resumed from checkpoint at update ", updates_, ", policy version ",
                     ppo_->version()));
  }
  // A resumed stage whose warm start ran before is not cloned again (the
  // checkpointed policy has it); its reference is evaluated again (the
  // evaluator caches it), a report in flight at a restart being lost.
  if (!curriculum_.finished()) {
    WQ_RETURN_IF_ERROR(StartStage(warm_started_stage_ < curriculum_.stage()));
  }
  stage_started_ = true;
  WriteStatusFile();
  PublishLocked();
  return absl::OkStatus();
}

absl::Status LearnerCore::StartStage(bool warm_start) {
  const double target = curriculum_.target_bits();
  if (warm_started_stage_ < curriculum_.stage()) {  // a new stage, not a resumed one
    best_stage_ = rl::CandidatePlan{};
    stage_reference_ppl_ = 0;
  }
  Log(absl::StrCat("learner: curriculum stage ", curriculum_.stage() + 1, "/",
                   curriculum_.num_stages(), ", target ", target, " bits"));
  absl::StatusOr<quant::Plan> ref = quant::LagrangePlan(*table_, target);
  if (!ref.ok()) {
    // Without a reference, warm_start = lagrange cannot run.
    Log(absl::StrCat("learner: no reference (lagrange) plan at ", target,
                     " bits: ", ref.status().message(), "; no warm start"));
    warm_started_stage_ = curriculum_.stage();
    return config_.training.warm_start == "lagrange"
               ? absl::FailedPreconditionError(
                     absl::StrCat("training.warm_start: lagrange needs a reference plan at ",
                                  target, " bits: ", ref.status().message()))
               : absl::OkStatus();
  }
  if (warm_start && config_.training.warm_start == "lagrange") {
    WQ_ASSIGN_OR_RETURN(double prob,
                        rl::WarmStartOnPlan(ppo_->policy(), costs_, config_, target, ref->actions));
    Log(absl::StrCat("learner: warm start: behaviour-cloned the lagrange plan, mean p(action) ",
                     absl::SixDigits(prob)));
  }
  warm_started_stage_ = curriculum_.stage();
  QueueCandidate(std::move(ref->actions), "lagrange", target, -1);
  return absl::OkStatus();
}

void LearnerCore::QueueCandidate(std::vector<int> actions, const std::string& source, double target,
                                 int64_t policy_version) {
  quant::Plan p;
  p.episode_id = next_candidate_id_++;
  p.plan_id = absl::StrCat("learner-", source, "-", p.episode_id & ~rl::kCandidateEpisodeBit);
  p.model_fingerprint = table_->fingerprint;
  p.actions = std::move(actions);
  p.target_bits = target;
  p.policy_version = policy_version;
  p.source = source;
  const absl::Time now = absl::Now();
  candidates_[p.episode_id] = Candidate{p, now};
  candidate_order_.emplace_back(now, p.episode_id);
  outbox_.push_back(std::move(p));
}

std::vector<quant::Plan> LearnerCore::TakeCandidates(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  PublishOnReturn publish(this);
  // A stopped learner hands out nothing (and waits the timeout: no busy loop).
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (!outbox_.empty() && !stopped_) || done_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  ExpireLocked();
  std::vector<quant::Plan> out;
  if (stopped_) return out;
  out.swap(outbox_);
  return out;
}

void LearnerCore::DropCandidate(uint64_t episode_id) {
  absl::MutexLock lock(&mu_);
  PublishOnReturn publish(this);
  if (candidates_.erase(episode_id) == 0) return;
  Log(absl::StrCat("learner: candidate ", episode_id & ~rl::kCandidateEpisodeBit, " dropped"));
  if (absl::Status s = MaybeFinish(); !s.ok()) Log(absl::StrCat("learner: ", s.message()));
}

bool LearnerCore::CandidatePending(uint64_t episode_id) const {
  absl::MutexLock lock(&mu_);
  return candidates_.count(episode_id) > 0;
}

absl::Status LearnerCore::MaybeFinish() {
  if (done_ || stopped_ || !curriculum_.finished() || !candidates_.empty()) return absl::OkStatus();
  done_ = true;
  Log("learner: done");
  WQ_RETURN_IF_ERROR(WriteCheckpoint());
  WriteStatusFile();
  return absl::OkStatus();
}

absl::Status LearnerCore::ConsiderLocked(const rl::CandidatePlan& candidate, quant::Plan plan) {
  // Only plans made for the current stage compete for its best (a late
  // evaluation of an earlier stage's plan does not).
  const bool this_stage =
      !curriculum_.finished() && candidate.target_bits == curriculum_.target_bits();
  if (this_stage && candidate.source == "lagrange") {
    stage_reference_ppl_ = candidate.evaluation.eval_ppl;
  }
  if (!rl::ConsiderCandidate(candidate, config_.curriculum.target_bits.back(), &best_,
                             this_stage ? &best_stage_ : nullptr)) {
    return absl::OkStatus();
  }
  const std::string plan_id = plan.plan_id;
  plan.plan_id = "best";
  plan.source = candidate.source;
  WQ_RETURN_IF_ERROR(quant::WritePlanFiles(plan, *table_, config_.output.dir + "/best"));
  Log(absl::StrCat("learner: best plan ", plan_id, " (", candidate.source, ") bits ",
                   candidate.evaluation.effective_bits, " ppl ", candidate.evaluation.eval_ppl));
  PublishLocked();
  return absl::OkStatus();
}

absl::StatusOr<RegisterResult> LearnerCore::RegisterTable(int stage, int replica,
                                                          const quant::UnitTable& table) {
  const int stages = config_.service.stages;
  if (stage < 0 || stage >= stages) {
    return absl::InvalidArgumentError(absl::StrCat("stage: ", stage, " outside [0, ", stages, ")"));
  }
  if (replica < 0 || replica >= config_.service.replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica: ", replica, " outside [0, ", config_.service.replicas, ")"));
  }
  WQ_RETURN_IF_ERROR(table.Validate());
  if (table.chunk_size != config_.quant.chunk_size) {
    return absl::InvalidArgumentError(absl::StrCat("table.chunk_size: ", table.chunk_size,
                                                   ", the run's is ", config_.quant.chunk_size));
  }
  absl::MutexLock lock(&mu_);
  PublishOnReturn publish(this);
  RegisterResult r;
  r.expected_stages = stages;
  if (table_ != nullptr) {
    // Complete already (e.g. a restarted actor): it must agree.
    if (table.fingerprint != table_->fingerprint) {
      return absl::InvalidArgumentError("table.model_fingerprint: differs from the run's table");
    }
    r.registered_stages = stages;
    r.complete = true;
    r.total_units = static_cast<uint32_t>(table_->units.size());
    return r;
  }
  for (const auto& [s, t] : stage_tables_) {
    if (t.fingerprint != table.fingerprint) {
      return absl::InvalidArgumentError(
          absl::StrCat("table.model_fingerprint: differs from stage ", s, "'s"));
    }
  }
  auto it = stage_tables_.find(stage);
  if (it != stage_tables_.end()) {
    if (it->second.first_layer != table.first_layer || it->second.end_layer != table.end_layer ||
        it->second.units.size() != table.units.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("table: replica ", replica, " of stage ", stage,
                       " disagrees with the table registered before"));
    }
  } else {
    stage_tables_[stage] = table;
  }
  r.registered_stages = static_cast<int>(stage_tables_.size());
  if (r.registered_stages == stages) {
    std::vector<quant::UnitTable> parts;
    for (const auto& [s, t] : stage_tables_) parts.push_back(t);
    WQ_ASSIGN_OR_RETURN(quant::UnitTable merged, quant::UnitTable::Merge(std::move(parts)));
    v1::UnitTable proto;
    merged.ToProto(&proto);
    WQ_RETURN_IF_ERROR(base::WriteFileAtomic(TablePath(config_), proto.SerializeAsString()));
    table_ = std::make_shared<const quant::UnitTable>(std::move(merged));
    WQ_RETURN_IF_ERROR(CompleteTable());
    Log(absl::StrCat("learner: unit table complete, ", table_->units.size(), " units"));
  }
  r.complete = table_ != nullptr;
  if (table_ != nullptr) r.total_units = static_cast<uint32_t>(table_->units.size());
  return r;
}

absl::StatusOr<quant::UnitTable> LearnerCore::Table() const {
  absl::MutexLock lock(&mu_);
  if (table_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("unit table incomplete: ", stage_tables_.size(),
                                               " of ", config_.service.stages, " stages"));
  }
  return *table_;
}

std::shared_ptr<const quant::UnitTable> LearnerCore::SharedTable() const {
  absl::MutexLock lock(&mu_);
  return table_;
}

void LearnerCore::ExpireLocked() {
  const absl::Time cutoff = absl::Now() - absl::Milliseconds(config_.service.evaluation_timeout_ms);
  for (uint64_t id : PopExpired(pending_order_, pending_, cutoff)) {
    ++expired_;
    Log(absl::StrCat("learner: episode ", id, " expired without evaluation"));
    pending_.erase(id);
  }
  const std::vector<uint64_t> gone = PopExpired(candidate_order_, candidates_, cutoff);
  for (uint64_t id : gone) {
    auto it = candidates_.find(id);
    Log(absl::StrCat("learner: candidate ", it->second.plan.plan_id,
                     " expired without evaluation"));
    candidates_.erase(it);
  }
  if (!gone.empty()) {
    if (absl::Status s = MaybeFinish(); !s.ok()) Log(absl::StrCat("learner: ", s.message()));
  }
}

void LearnerCore::ExpirePending() {
  absl::MutexLock lock(&mu_);
  PublishOnReturn publish(this);
  ExpireLocked();
}

absl::StatusOr<bool> LearnerCore::SubmitEpisode(rl::Episode episode) {
  absl::MutexLock lock(&mu_);
  PublishOnReturn publish(this);
  if (table_ == nullptr) return absl::UnavailableError("unit table incomplete");
  ExpireLocked();
  if (done_ || stopped_ || curriculum_.finished()) return false;
  const int64_t v = ppo_->version();
  if (episode.policy_version > v) {
    // From a policy this learner never had (it restarted from an older checkpoint).
    ++dropped_stale_;
    return false;
  }
  if (episode.policy_version < v - config_.ppo.max_policy_lag) {
    ++dropped_stale_;
    return false;
  }
  if (pending_.count(episode.episode_id) || seen_.count(episode.episode_id)) return false;
  ++episodes_;
  const uint64_t id = episode.episode_id;
  seen_.insert(id);
  if (metrics_.episodes != nullptr) {
    metrics_.episodes->Inc();
    metrics_.transitions->Inc(static_cast<double>(episode.steps.size()));
    metrics_.lag->Observe(static_cast<double>(v - episode.policy_version));
  }
  const absl::Time now = absl::Now();
  pending_[id] = Held{std::move(episode), now};
  pending_order_.emplace_back(now, id);
  return true;
}

absl::StatusOr<bool> LearnerCore::ReportEvaluation(const EvaluationInput& in) {
  absl::MutexLock lock(&mu_);
  PublishOnReturn publish(this);
  if (stopped_) return false;
  const rl::PlanEvaluation& pe = in.evaluation;
  if (rl::IsCandidateEpisode(in.episode_id)) {
    // A candidate plan: it competes for the best plan, nothing else.
    auto c = candidates_.find(in.episode_id);
    if (c == candidates_.end() || c->second.plan.plan_id != in.plan_id) return false;
    quant::Plan plan = std::move(c->second.plan);
    candidates_.erase(c);
    ++candidate_evaluations_;
    ++process_evaluations_;
    if (pe.cached) ++cache_hits_;
    {
      std::ofstream out(PlansPath(config_), std::ios::app);
      out << "{\"episode_id\":" << in.episode_id << ",\"plan_id\":\"" << in.plan_id
          << "\",\"actor_id\":\"learner\",\"source\":\"" << plan.source
          << "\",\"policy_version\":" << plan.policy_version
          << ",\"effective_bits\":" << pe.effective_bits << ",\"perplexity\":" << pe.eval_ppl
          << "}\n";
    }
    Log(absl::StrCat("learner: candidate ", in.plan_id, " bits ", pe.effective_bits, " ppl ",
                     pe.eval_ppl));
    rl::CandidatePlan cand{plan.actions, pe,       plan.target_bits,
                           plan.source,  updates_, plan.policy_version};
    if (plan.source == "lagrange" && plan.target_bits == config_.curriculum.target_bits.back()) {
      reference_ = cand;  // the final stage's reference (rl::RunResult::reference)
    }
    WQ_RETURN_IF_ERROR(ConsiderLocked(cand, std::move(plan)));
    WQ_RETURN_IF_ERROR(MaybeFinish());
    return true;
  }
  auto it = pending_.find(in.episode_id);
  if (it == pending_.end()) return false;
  rl::Episode e = std::move(it->second.episode);
  pending_.erase(it);
  ++evaluations_;
  ++process_evaluations_;
  if (pe.cached) ++cache_hits_;
  const double target = e.plan.target_bits > 0 ? e.plan.target_bits : curriculum_.target_bits();
  // The batch's λ (rl::BatchLambda), not the evaluator's in.lambda.
  const rl::EpisodeReward reward =
      rl::EpisodeEndReward(config_.env, pe, lambda_.batch_lambda(), target);
  lambda_.Observe(pe.relative_ppl_increase);
  double ret = reward.total;
  for (const auto& t : e.steps) ret += t.reward;
  e.steps.back().reward += static_cast<float>(reward.total);
  // Every evaluated plan is recorded; the best feasible one is kept as plan files.
  {
    std::ofstream out(PlansPath(config_), std::ios::app);
    out << "{\"episode_id\":" << e.episode_id << ",\"plan_id\":\"" << in.plan_id
        << "\",\"actor_id\":\"" << e.actor_id << "\",\"policy_version\":" << e.policy_version
        << ",\"effective_bits\":" << pe.effective_bits << ",\"perplexity\":" << pe.eval_ppl
        << ",\"reward\":" << ret << "}\n";
  }
  {
    rl::CandidatePlan cand{e.plan.actions, pe, target, "rl", updates_, e.policy_version};
    quant::Plan plan = e.plan;
    plan.plan_id = in.plan_id;
    WQ_RETURN_IF_ERROR(ConsiderLocked(cand, std::move(plan)));
  }
  ready_.push_back(std::move(e.steps));
  ready_rewards_.push_back(ret);
  ready_ppl_.push_back(pe.eval_ppl);
  ready_bits_.push_back(pe.effective_bits);
  if (static_cast<int>(ready_.size()) >= config_.training.episodes_per_update &&
      !curriculum_.finished()) {
    WQ_RETURN_IF_ERROR(Update());
  }
  return true;
}

absl::Status LearnerCore::Update() {
  std::vector<rl::Transition> batch;
  for (auto& ep : ready_) batch.insert(batch.end(), ep.begin(), ep.end());
  rl::UpdateRecord rec;
  rec.mean_reward = Mean(ready_rewards_);
  rec.mean_ppl = Mean(ready_ppl_);
  rec.mean_bits = Mean(ready_bits_);
  rec.lambda = lambda_.batch_lambda();  // the λ this batch was rewarded with
  const double mean = rec.mean_reward;
  ready_.clear();
  ready_rewards_.clear();
  ready_ppl_.clear();
  ready_bits_.clear();
  const auto start = std::chrono::steady_clock::now();
  WQ_ASSIGN_OR_RETURN(rl::PpoStats stats, ppo_->Update(batch));
  lambda_.EndBatch();  // the next batch's λ
  ++updates_;
  ++updates_here_;
  if (metrics_.updates != nullptr) metrics_.updates->Inc();
  SetIf(metrics_.mean_reward, mean);
  {  // The greedy plan of the updated policy is a candidate too.
    const double target = curriculum_.target_bits();
    WQ_ASSIGN_OR_RETURN(std::vector<int> greedy,
                        rl::PolicyGreedyPlan(ppo_->policy(), costs_, config_, target));
    QueueCandidate(std::move(greedy), "rl-greedy", target, ppo_->version());
  }
  rec.update = updates_;
  rec.stage = curriculum_.stage();
  rec.target_bits = curriculum_.target_bits();
  rec.best_ppl = best_.actions.empty() ? 0 : best_.evaluation.eval_ppl;
  rec.best_bits = best_.actions.empty() ? 0 : best_.evaluation.effective_bits;
  rec.policy_loss = stats.policy_loss;
  rec.value_loss = stats.value_loss;
  rec.entropy = stats.entropy;
  rec.evaluations = process_evaluations_ - cache_hits_;  // cache misses
  rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - created_).count();
  curve_.push_back(rec);
  std::string reason;
  // The criterion: the stage's best policy plan against its reference.
  const double stage_best = best_stage_.actions.empty() ? std::numeric_limits<double>::infinity()
                                                        : best_stage_.evaluation.eval_ppl;
  if (curriculum_.OnUpdate(stage_best, stage_reference_ppl_, &reason)) {
    stages_.push_back(rl::StageEvent{rec.stage, rec.target_bits, updates_, reason});
    Log(absl::StrCat("learner: curriculum: ", reason));
    // A new stage: its reference candidate and warm start before the policy
    // of this update is published (the lock is held until then).
    if (!curriculum_.finished()) WQ_RETURN_IF_ERROR(StartStage(true));
  }
  bool checkpointed = false;
  if (curriculum_.finished() ||
      updates_ % std::max(1, config_.training.checkpoint_every_updates) == 0) {
    WQ_RETURN_IF_ERROR(WriteCheckpoint());
    checkpointed = true;
  }
  if (stop_after_updates_ > 0 && updates_here_ >= stop_after_updates_) {
    WQ_RETURN_IF_ERROR(StopLocked(checkpointed));
  }
  WQ_RETURN_IF_ERROR(MaybeFinish());
  WriteStatusFile();
  PublishLocked();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Log(absl::StrCat("learner: update ", updates_, " version ", ppo_->version(), " mean reward ",
                   mean, " used ", stats.samples_used, " stale ", stats.samples_dropped_stale,
                   " in ", absl::SixDigits(seconds), " s", done_ ? " (done)" : "",
                   stopped_ ? " (stopped)" : ""));
  return absl::OkStatus();
}

absl::Status LearnerCore::WriteCheckpoint() {
  rl::RunCheckpoint c;
  c.fingerprint = run_fingerprint_;
  c.update = updates_;
  c.stage = curriculum_.stage();
  c.updates_in_stage = curriculum_.updates_in_stage();
  c.curriculum_finished = curriculum_.finished();
  c.lambda = lambda_.batch_lambda();
  c.rng_seed = config_.training.seed;
  c.warm_started_stage = warm_started_stage_;
  WQ_ASSIGN_OR_RETURN(c.learner_state, ppo_->SaveState());
  c.best = best_;
  c.best_stage = best_stage_;
  c.stage_reference_ppl = stage_reference_ppl_;
  c.curve = curve_;
  c.stages = stages_;
  WQ_RETURN_IF_ERROR(rl::WriteRunCheckpoint(CheckpointDir(config_), c));
  Log(absl::StrCat("learner: checkpoint: update ", updates_, " written to ",
                   CheckpointDir(config_)));
  return absl::OkStatus();
}

absl::Status LearnerCore::StopLocked(bool checkpointed) {
  if (!checkpointed) WQ_RETURN_IF_ERROR(WriteCheckpoint());
  stopped_ = true;
  Log(absl::StrCat("learner: stopped after ", updates_here_,
                   " updates in this process (stop_after_updates), update ", updates_));
  WriteStatusFile();
  return absl::OkStatus();
}

void LearnerCore::set_stop_after_updates(int64_t n) {
  absl::MutexLock lock(&mu_);
  PublishOnReturn publish(this);
  stop_after_updates_ = std::max<int64_t>(0, n);
  // Reached already (set late): stop now. updates_here_ > 0 implies a complete table.
  if (stop_after_updates_ > 0 && !stopped_ && updates_here_ >= stop_after_updates_) {
    if (absl::Status s = StopLocked(false); !s.ok()) Log(absl::StrCat("learner: ", s.message()));
  }
}

rl::RunResult LearnerCore::Result() const {
  absl::MutexLock lock(&mu_);
  rl::RunResult r;
  r.best = best_;
  r.reference = reference_;
  r.curve = curve_;
  r.stages = stages_;
  r.lambda = lambda_.batch_lambda();
  r.updates = updates_;
  r.resumed_from_update = resumed_from_update_;
  r.evaluations = process_evaluations_;
  r.cache_hits = cache_hits_;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - created_).count();
  r.stopped_early = stopped_;
  return r;
}

PublishedPolicy LearnerCore::WaitForPolicy(int64_t known_version, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  // Nothing before the table is complete and the stage started (warm start).
  // A stopped learner answers at once, with nothing new.
  auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopped_ || (stage_started_ && (ppo_->version() != known_version || done_));
  };
  mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
  PublishedPolicy p;
  if (!stage_started_ || stopped_) {
    p.snapshot.version = known_version;  // nothing new
    return p;
  }
  p.snapshot = ppo_->Snapshot();
  p.curriculum_stage = curriculum_.stage();
  p.target_bits = curriculum_.target_bits();
  p.lambda = lambda_.batch_lambda();
  return p;
}

int64_t LearnerCore::version() const {
  absl::MutexLock lock(&status_mu_);
  return published_.policy_version;
}

bool LearnerCore::done() const {
  absl::MutexLock lock(&status_mu_);
  return published_.done;
}

LearnerStatus LearnerCore::Status() const {
  absl::MutexLock lock(&status_mu_);
  return published_;
}

void LearnerCore::WriteStatusFile() {
  const LearnerStatus s = StatusLocked();
  const std::string text = absl::StrCat(
      "done=", s.done ? "true" : "false",
      "\nunit_table_complete=", s.table_complete ? "true" : "false",
      "\ncurriculum_stage=", s.curriculum_stage, "/", s.curriculum_stages,
      "\ntarget_bits=", s.target_bits, "\nupdates=", s.updates, "\nepisodes=", s.episodes,
      "\nevaluations=", s.evaluations, "\npolicy_version=", s.policy_version, "\nlambda=", s.lambda,
      "\nbest_plan_id=", s.best_plan_id, "\nbest_plan_effective_bits=", s.best_bits,
      "\nbest_plan_perplexity=", s.best_perplexity, "\n");
  (void)base::WriteFileAtomic(config_.output.dir + "/status.txt", text);
}

LearnerStatus LearnerCore::StatusLocked() const {
  LearnerStatus s;
  s.curriculum_stage = curriculum_.stage();
  s.curriculum_stages = curriculum_.num_stages();
  s.target_bits = curriculum_.target_bits();
  s.updates = updates_;
  s.episodes = episodes_;
  s.evaluations = evaluations_;
  s.dropped_stale = dropped_stale_;
  s.expired = expired_;
  s.policy_version = ppo_->version();
  if (!best_.actions.empty()) {
    s.best_plan_id = "best";
    s.best_bits = best_.evaluation.effective_bits;
    s.best_perplexity = best_.evaluation.eval_ppl;
  }
  s.lambda = lambda_.batch_lambda();
  s.done = done_;
  s.stopped = stopped_;
  s.table_complete = table_ != nullptr;
  s.pending = static_cast<int>(pending_.size());
  s.pending_candidates = static_cast<int>(candidates_.size());
  s.candidate_evaluations = candidate_evaluations_;
  return s;
}

}  // namespace windquant::learner
