#include "evaluator/evaluation_queue.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/checked_file.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/metrics/metric_names.h"
#include "common/rl/episode.h"
#include "windquant/v1/types.pb.h"

namespace windquant::evaluator {
namespace {

// Backoff after a failed calibration or evaluation: doubles up to 2 s, back to this on success.
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(100);

const char* KindName(rl::PlanKind kind) {
  return kind == rl::PlanKind::kCandidate ? "candidate" : "episode";
}

std::string RandomId() {
  std::random_device rd;
  return absl::StrCat(absl::Hex(rd(), absl::kZeroPad8), absl::Hex(rd(), absl::kZeroPad8));
}

// What RandomId makes: 16 lowercase hex digits.
bool IsEvaluatorId(absl::string_view id) {
  return id.size() == 16 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// At most this many resends of one report rewarded again for the learner's
// batch (one suffices: the learner's batch moves only with this queue's reports).
constexpr int kMaxResends = 3;

std::string Serialize(const QueuedPlan& q) {
  v1::Plan p;
  p.set_plan_id(q.plan.plan_id);
  p.set_model_fingerprint(q.plan.model_fingerprint);
  for (int a : q.plan.actions) p.add_actions(static_cast<uint32_t>(a));
  p.set_effective_bits(q.effective_bits);
  p.set_target_bits(q.plan.target_bits);
  p.set_policy_version(q.plan.policy_version);
  p.set_episode_id(q.plan.episode_id);
  p.set_source(q.actor_id);  // the submitting actor, for logs
  p.set_charged_bits(q.charged_bits);
  return p.SerializeAsString();
}

}  // namespace

EvaluationQueue::EvaluationQueue(ReplicaEvaluator* evaluator,
                                 std::vector<std::vector<transport::ActivationTransport*>> replicas,
                                 const rl::EnvironmentOptions& env,
                                 const rl::LagrangeOptions& lagrange, std::string queue_dir,
                                 size_t max_queue, ReportFn report, metrics::Registry* registry,
                                 base::LogSink log)
    : log_(std::move(log)),
      evaluator_(evaluator),
      replicas_(std::move(replicas)),
      queue_dir_(std::move(queue_dir)),
      max_queue_(max_queue),
      report_(std::move(report)),
      rewarder_(env, lagrange),
      evaluator_id_(RandomId()) {
  calibrated_.assign(replicas_.size(), false);
  if (registry != nullptr) {
    auto duration =
        metrics::HistogramFamily(*registry, metrics::kEvaluatorEvaluationDurationSeconds);
    auto depth = metrics::GaugeFamily(*registry, metrics::kEvaluatorQueueDepth);
    auto lambda = metrics::GaugeFamily(*registry, metrics::kEvaluatorLambda);
    if (duration.ok()) duration_ = &(*duration)->Get();
    if (depth.ok()) depth_ = &(*depth)->Get();
    if (lambda.ok()) {
      lambda_gauge_ = &(*lambda)->Get();
      lambda_gauge_->Set(rewarder_.lambda().batch_lambda());
    }
  }
}

void EvaluationQueue::PublishDepthLocked() {
  if (depth_ != nullptr) depth_->Set(static_cast<double>(queue_.size()));
}

bool EvaluationQueue::WaitOrStop(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
  mu_.AwaitWithTimeout(absl::Condition(&stopped), d);
  return stop_;
}

EvaluationQueue::~EvaluationQueue() { Stop(); }

double EvaluationQueue::lambda() const {
  absl::MutexLock lock(&mu_);
  return rewarder_.lambda().batch_lambda();
}

void EvaluationQueue::SaveLambdaLocked() {
  if (lambda_gauge_ != nullptr) lambda_gauge_->Set(rewarder_.lambda().batch_lambda());
  if (queue_dir_.empty()) return;
  // Best effort: a lost write costs the g's since the last one (DESIGN.md
  // section 6: a restarted evaluator loses no finished plan; λ follows the
  // learner's batch again, EpisodeRewarder::Settle).
  absl::Status s =
      base::WriteCheckedFile(queue_dir_ + "/lambda.txt", rewarder_.lambda().Serialize());
  if (!s.ok()) log_(absl::StrCat("evaluator: lambda state: ", s.message()));
}

// Ids are unique per kind: the kind is in the file's name.
std::string EvaluationQueue::PathOf(const QueuedPlan& q) const {
  return absl::StrCat(queue_dir_, "/", KindName(q.kind), "-", q.plan.episode_id, ".plan.pb");
}

std::string EvaluationQueue::evaluator_id() const {
  absl::MutexLock lock(&mu_);
  return evaluator_id_;
}

absl::Status EvaluationQueue::LoadEvaluatorId(bool renew) {
  const std::string path = queue_dir_ + "/evaluator_id.txt";
  std::error_code ec;
  std::string id;
  if (!renew && std::filesystem::exists(path, ec)) {
    WQ_ASSIGN_OR_RETURN(id, base::ReadFile(path));
    if (!id.empty() && !IsEvaluatorId(id)) {
      log_(absl::StrCat("evaluator: ", path, ": not an evaluator id (corrupt); a new one"));
      id.clear();
    }
  }
  if (id.empty()) {  // a new directory (or one of an evaluator before the id)
    id = RandomId();
    WQ_RETURN_IF_ERROR(base::WriteFileAtomic(path, id));
  }
  absl::MutexLock lock(&mu_);
  evaluator_id_ = id;
  return absl::OkStatus();
}

void EvaluationQueue::LoadLambda() {
  const std::string path = queue_dir_ + "/lambda.txt";
  absl::StatusOr<std::string> text = base::ReadCheckedFile(path);
  absl::Status s = text.status();
  absl::MutexLock lock(&mu_);
  rl::BatchLambda lambda = rewarder_.lambda();  // as constructed: lagrange.lambda_init
  if (s.ok()) s = lambda.Parse(*text);
  if (absl::IsNotFound(s)) return;
  if (s.ok()) {
    rewarder_.mutable_lambda() = lambda;
  } else {
    // Not trusted: λ starts again from lagrange.lambda_init and follows the
    // learner's batch (EpisodeRewarder::Settle), as after a lost write.
    log_(absl::StrCat("evaluator: ", s.message(), "; lambda starts again from lambda_init"));
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  if (lambda_gauge_ != nullptr) lambda_gauge_->Set(rewarder_.lambda().batch_lambda());
}

absl::Status EvaluationQueue::Start() {
  if (!queue_dir_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(queue_dir_, ec);
    LoadLambda();
    bool lost = false;  // a plan file not trusted: the learner sends its plan again
    for (const auto& entry : std::filesystem::directory_iterator(queue_dir_, ec)) {
      if (entry.path().extension() != ".pb") continue;
      absl::StatusOr<std::string> bytes = base::ReadCheckedFile(entry.path().string());
      v1::Plan p;
      if (!bytes.ok() || !p.ParseFromString(*bytes)) {
        log_(absl::StrCat("evaluator: ",
                          bytes.ok() ? absl::StrCat(entry.path().string(), ": not a plan")
                                     : std::string(bytes.status().message()),
                          "; removed, the learner sends the plan again"));
        std::filesystem::remove(entry.path(), ec);
        lost = true;
        continue;
      }
      QueuedPlan q;
      q.kind = absl::StartsWith(entry.path().filename().string(), "candidate-")
                   ? rl::PlanKind::kCandidate
                   : rl::PlanKind::kEpisode;
      q.plan = plan::Plan::FromProto(p);
      q.effective_bits = p.effective_bits();
      q.charged_bits = p.charged_bits();
      q.actor_id = p.source();
      absl::MutexLock lock(&mu_);
      known_.emplace(q.kind, q.plan.episode_id);
      queue_.push_back(std::move(q));
      PublishDepthLocked();
    }
    // Another identity when a plan was lost: PlanSender sends every pending
    // plan the old one had accepted again (those still queued are not queued twice).
    WQ_RETURN_IF_ERROR(LoadEvaluatorId(/*renew=*/lost));
    absl::MutexLock lock(&mu_);
    if (!queue_.empty()) {
      log_(absl::StrCat("evaluator: ", queue_.size(), " plans pending from before the restart"));
    }
  }
  for (size_t r = 0; r < replicas_.size(); ++r) {
    workers_.emplace_back([this, r] { Worker(r); });
  }
  return absl::OkStatus();
}

absl::StatusOr<int> EvaluationQueue::Submit(QueuedPlan q) {
  {
    absl::MutexLock lock(&mu_);
    if (known_.count({q.kind, q.plan.episode_id}) > 0) return static_cast<int>(queue_.size());
    if (queue_.size() >= max_queue_) {
      return absl::ResourceExhaustedError(absl::StrCat("queue full (", queue_.size(), " plans)"));
    }
  }
  if (!queue_dir_.empty()) {
    WQ_RETURN_IF_ERROR(base::WriteCheckedFile(PathOf(q), Serialize(q)));
  }
  absl::MutexLock lock(&mu_);
  if (!known_.emplace(q.kind, q.plan.episode_id).second) return static_cast<int>(queue_.size());
  queue_.push_back(std::move(q));
  PublishDepthLocked();
  return static_cast<int>(queue_.size());
}

absl::StatusOr<PlanEvaluation> EvaluationQueue::EvaluateNow(const plan::Plan& plan) {
  return evaluator_->Evaluate(replicas_.at(0), plan);
}

absl::StatusOr<PlanEvaluation> EvaluationQueue::HeldOutNow(const plan::Plan& plan) {
  return evaluator_->HeldOutPerplexity(replicas_.at(0), plan);
}

int EvaluationQueue::depth() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

int64_t EvaluationQueue::evaluated() const {
  absl::MutexLock lock(&mu_);
  return evaluated_;
}

void EvaluationQueue::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (auto& w : workers_) w.join();
  workers_.clear();
}

void EvaluationQueue::Worker(size_t r) {
  const auto& stages = replicas_[r];
  absl::Duration backoff = kFirstBackoff;
  auto back_off = [&] {  // true when stopping
    const bool stopping = WaitOrStop(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(2));
    return stopping;
  };
  while (true) {
    bool calibrated;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      calibrated = calibrated_[r];
    }
    if (!calibrated) {
      if (!CalibrateReplica(r)) {
        if (back_off()) return;
        continue;
      }
      backoff = kFirstBackoff;
      continue;
    }
    std::optional<QueuedPlan> q = PopPlan();
    if (!q.has_value()) continue;  // none yet, or stopping (checked above)
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<PlanEvaluation> e = evaluator_->Evaluate(stages, q->plan);
    if (!e.ok()) {
      Requeue(r, *std::move(q), e.status());
      if (back_off()) return;
      continue;
    }
    if (duration_ != nullptr) {
      duration_->Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    backoff = kFirstBackoff;
    // Stopped before the learner answered: the plan's file stays, so the next
    // start evaluates and reports it again.
    if (!Deliver(*q, Record(*q, *e), r)) return;
    Forget(*q);
  }
}

bool EvaluationQueue::CalibrateReplica(size_t r) {
  absl::StatusOr<std::vector<plan::UnitTable>> tables =
      evaluator_->Calibrate(replicas_[r], evaluator_->CalibrationFingerprint());
  if (!tables.ok()) {
    log_(absl::StrCat("evaluator: replica ", r, " calibration: ", tables.status().message(),
                      " (retrying)"));
    return false;
  }
  log_(absl::StrCat("evaluator: replica ", r, " calibrated"));
  absl::MutexLock lock(&mu_);
  calibrated_[r] = true;
  return true;
}

std::optional<QueuedPlan> EvaluationQueue::PopPlan() {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1));
  if (stop_ || queue_.empty()) return std::nullopt;
  QueuedPlan q = std::move(queue_.front());
  queue_.pop_front();
  PublishDepthLocked();
  return q;
}

void EvaluationQueue::Requeue(size_t r, QueuedPlan q, const absl::Status& error) {
  log_(absl::StrCat("evaluator: replica ", r, " plan ", q.plan.plan_id, ": ", error.message(),
                    " (requeued)"));
  const bool lost_fits =
      absl::IsFailedPrecondition(error) || absl::StrContains(error.message(), "not fitted");
  const bool bad_plan = absl::IsInvalidArgument(error) && !lost_fits;
  if (bad_plan) {
    Forget(q);
    return;
  }
  absl::MutexLock lock(&mu_);
  if (lost_fits) calibrated_[r] = false;  // a restarted actor without cached fits
  queue_.push_back(std::move(q));
  PublishDepthLocked();
}

Report EvaluationQueue::Record(const QueuedPlan& q, const PlanEvaluation& e) {
  Report report;
  report.kind = q.kind;
  report.episode_id = q.plan.episode_id;
  report.plan_id = q.plan.plan_id;
  report.evaluation = e;
  report.evaluation.effective_bits = q.effective_bits;
  absl::MutexLock lock(&mu_);
  ++evaluated_;
  return report;
}

void EvaluationQueue::Forget(const QueuedPlan& q) {
  if (!queue_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove(PathOf(q), ec);
  }
  absl::MutexLock lock(&mu_);
  known_.erase({q.kind, q.plan.episode_id});
}

bool EvaluationQueue::Deliver(const QueuedPlan& q, Report report, size_t r) {
  absl::MutexLock deliver(&deliver_mu_);
  // A learner's candidate plan (no episode behind it) is not rewarded and leaves λ as it is.
  const bool episode = q.kind == rl::PlanKind::kEpisode;
  rl::PlanEvaluation charged = report.evaluation;
  if (q.charged_bits > 0) charged.effective_bits = q.charged_bits;
  for (int resends = 0;; ++resends) {
    {
      absl::MutexLock lock(&mu_);
      report.grant.reset();
      if (episode) report.grant = rewarder_.Reward(charged, q.plan.target_bits);
      report.lambda = rewarder_.lambda().batch_lambda();
    }
    std::optional<ReportAnswer> answer;
    if (!Send(report, r, &answer)) return false;
    if (!answer.has_value()) return true;  // refused for good
    absl::MutexLock lock(&mu_);
    const bool again = rewarder_.Settle(report.grant.has_value() ? &*report.grant : nullptr,
                                        answer->accepted, answer->updates, answer->lambda);
    SaveLambdaLocked();
    if (!again || resends >= kMaxResends) return true;
    log_(absl::StrCat("evaluator: report of episode ", report.episode_id,
                      " rewarded again for the learner's PPO batch ", answer->updates));
  }
}

bool EvaluationQueue::Send(const Report& report, size_t r, std::optional<ReportAnswer>* answer) {
  absl::Duration backoff = absl::Milliseconds(100);
  for (int attempt = 1;; ++attempt) {
    const absl::StatusOr<ReportAnswer> a = report_(report);
    if (a.ok()) {
      *answer = *a;
      return true;
    }
    const absl::Status& s = a.status();
    // CANCELLED: the caller is shutting down (Stop() follows); keep the plan.
    const bool transient =
        absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsCancelled(s);
    if (!transient) {
      // The learner refused it (e.g. INVALID_ARGUMENT naming a field): sending
      // it again cannot help.
      log_(absl::StrCat("evaluator: report of episode ", report.episode_id,
                        " refused: ", s.message(), " (dropped)"));
      answer->reset();
      return true;
    }
    if (!absl::IsCancelled(s) && (attempt == 1 || attempt % 10 == 0)) {
      log_(absl::StrCat("evaluator: replica ", r, " report of episode ", report.episode_id, ": ",
                        s.message(), " (attempt ", attempt, ", retrying)"));
    }
    if (WaitOrStop(backoff)) return false;
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

}  // namespace windquant::evaluator
