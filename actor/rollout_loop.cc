#include "actor/rollout_loop.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/metrics/metric_names.h"
#include "common/rl/environment.h"
#include "common/rl/state_features.h"
#include "common/rl/transition_codec.h"

namespace windquant::actor {

RolloutLoop::RolloutLoop(RolloutLoopOptions options, std::unique_ptr<LearnerClient> learner,
                         metrics::Registry* registry)
    : options_(std::move(options)), learner_(std::move(learner)) {
  if (registry != nullptr) {
    auto family = metrics::CounterFamily(*registry, metrics::kActorEpisodesTotal);
    if (family.ok()) episodes_ = &(*family)->Get();
  }
}

RolloutLoop::RolloutLoop(RolloutLoopOptions options, std::shared_ptr<grpc::Channel> learner,
                         metrics::Registry* registry)
    : RolloutLoop(std::move(options), std::make_unique<GrpcLearnerClient>(std::move(learner)),
                  registry) {}

RolloutLoop::~RolloutLoop() { Stop(); }

absl::Status RolloutLoop::Start() {
  auto policy = rl::Policy::Create(options_.policy);
  if (!policy.ok()) return policy.status();
  {
    absl::MutexLock lock(&mu_);
    policy_ = *std::move(policy);
  }
  watcher_ = std::thread([this] { WatchPolicy(); });
  roller_ = std::thread([this] { Rollouts(); });
  return absl::OkStatus();
}

void RolloutLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  cancel_.Cancel();
  learner_->Cancel();
  if (watcher_.joinable()) watcher_.join();
  if (roller_.joinable()) roller_.join();
}

bool RolloutLoop::Sleep(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || done_; };
  mu_.AwaitWithTimeout(absl::Condition(&stopping), d);
  return !(stop_ || done_);
}

void RolloutLoop::Log(absl::string_view line) const {
  options_.log(absl::StrCat(options_.actor_id, line));
}

bool RolloutLoop::stopping() {
  absl::MutexLock lock(&mu_);
  return stop_ || done_;
}

bool RolloutLoop::EnsureTableRegistered() {
  absl::Duration backoff = absl::Milliseconds(100);
  while (!stopping()) {
    absl::StatusOr<v1::RunStatus> run =
        learner_->GetRunStatus(std::min(options_.deadline, absl::Seconds(5)));
    if (run.ok()) {
      if (run->done()) {
        absl::MutexLock lock(&mu_);
        done_ = true;
        Log(": run done");
        return false;
      }
      // Fails while this actor has no table yet (calibration registers it then).
      if (!run->unit_table_complete() && options_.register_table &&
          options_.register_table().ok()) {
        Log(": registered its unit table again (the learner had none)");
      }
      return true;
    }
    if (cancel_.cancelled() || !Sleep(backoff)) return false;
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
  return false;
}

void RolloutLoop::OnSnapshot(const v1::PolicySnapshot& snap, bool* first) {
  rl::PolicySnapshot s;
  s.version = snap.version();
  s.bytes = snap.parameters();
  s.sha256 = snap.sha256();
  absl::MutexLock lock(&mu_);
  absl::Status st = policy_->LoadSnapshot(s);
  if (!st.ok()) {
    Log(absl::StrCat(": policy ", s.version, " rejected: ", st.message()));
    return;
  }
  if (*first) {
    // A new subscription (first connect, or a learner back from a crash):
    // this actor's share of episodes starts afresh.
    ++subscription_;
    if (subscription_ > 1) {
      Log(absl::StrCat(": re-subscribed at policy version ", s.version));
    }
    *first = false;
  }
  version_ = s.version;
  target_bits_ = snap.target_bits();
  reward_model_ = rl::RewardModel{};
  if (snap.has_reward_model()) {
    absl::StatusOr<rl::RewardModel> m = rl::RewardModel::FromProto(snap.reward_model());
    if (m.ok()) {
      reward_model_ = *std::move(m);
    } else {
      Log(absl::StrCat(": policy ", s.version, " reward model ignored: ", m.status().message()));
    }
  }
}

bool RolloutLoop::RunDone(absl::Duration deadline) {
  absl::StatusOr<v1::RunStatus> run = learner_->GetRunStatus(deadline);
  if (!run.ok() || !run->done()) return false;
  absl::MutexLock lock(&mu_);
  done_ = true;
  Log(": run done");
  return true;
}

void RolloutLoop::WatchPolicy() {
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    // A restarted learner may have come back without the unit table.
    if (!EnsureTableRegistered()) return;
    // Always the current snapshot first (-1): a restarted learner may be back
    // at an older checkpoint, and a version number alone does not identify weights.
    bool first = true;
    const absl::Status status = learner_->WatchPolicy(
        options_.actor_id, -1, [&](const v1::PolicySnapshot& snap) { OnSnapshot(snap, &first); });
    if (!first) backoff = absl::Milliseconds(100);
    if (cancel_.cancelled()) return;
    // A clean end means the run is done (the learner closes streams then).
    if (RunDone(std::min(options_.deadline, absl::Seconds(5)))) return;
    if (!status.ok()) {
      Log(absl::StrCat(": policy stream: ", status.message()));
    }
    if (!Sleep(backoff)) return;
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

std::unique_ptr<rl::RolloutWorker> RolloutLoop::FetchWorker() {
  // The global unit table (UNAVAILABLE until every stage registered).
  absl::Duration backoff = absl::Milliseconds(200);
  while (true) {
    absl::StatusOr<plan::UnitTable> table = learner_->GetUnitTable(options_.deadline);
    if (table.ok()) {
      // Screening samples are drawn in batches of up to screen_batch_steps transitions.
      const int64_t samples = int64_t{options_.envs} * (screening() ? options_.screen_samples : 1);
      const int64_t batch = std::min<int64_t>(
          samples, std::max<int64_t>(options_.envs, options_.screen_batch_steps /
                                                        std::max<int64_t>(1, table->units.size())));
      auto w =
          rl::RolloutWorker::Create(*table, options_.env, options_.actor_id, options_.actor_index,
                                    options_.incarnation, static_cast<int>(batch), options_.seed);
      if (w.ok()) {
        Log(absl::StrCat(": unit table of ", (*w)->table().units.size(), " units"));
        return *std::move(w);
      }
      Log(absl::StrCat(": ", w.status().message()));
    }
    if (!Sleep(backoff)) return nullptr;
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

bool RolloutLoop::WaitForPolicy(Produced* p) {
  while (true) {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || done_ ||
             (version_ >= 0 && (version_ != p->version || subscription_ != p->subscription ||
                                p->count < options_.episodes_per_version));
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1));
    if (stop_ || done_) return false;
    if (!ready()) {
      if (absl::Now() - p->since < std::max(options_.stall_timeout, learner_wait_)) continue;
      p->count = 0;  // stalled: produce more at this version
      p->since = absl::Now();
      continue;
    }
    if (version_ != p->version || subscription_ != p->subscription) {
      p->version = version_;
      p->subscription = subscription_;
      p->count = 0;
      p->since = absl::Now();
    }
    return true;
  }
}

bool RolloutLoop::Deliver(const rl::Episode& e, const plan::UnitTable& table) {
  v1::TransitionBatch batch;
  rl::EncodeEpisode(e, table, &batch);
  for (int attempt = 0; attempt < 50 && !cancel_.cancelled(); ++attempt) {
    absl::StatusOr<v1::TransitionAck> ack = learner_->SendTransitions(batch);
    if (ack.ok()) {
      absl::MutexLock lock(&mu_);
      learner_wait_ = absl::Milliseconds(ack->evaluation_wait_ms());
      return ack->accepted();  // not accepted: stale
    }
    if (cancel_.cancelled()) return false;
    Log(absl::StrCat(": transitions stream: ", ack.status().message()));
    if (absl::IsInvalidArgument(ack.status())) return false;
    if (!Sleep(absl::Milliseconds(200))) return false;
  }
  return false;  // lost with its learner
}

absl::StatusOr<std::vector<rl::Episode>> RolloutLoop::RunScreened(rl::RolloutWorker& worker) {
  absl::MutexLock lock(&mu_);
  const size_t keep = static_cast<size_t>(options_.envs);
  const bool screen =
      screening() && !reward_model_.empty() &&
      reward_model_.correction.size() == worker.table().units.size() * plan::kNumActions;
  if (!screen) {  // no model yet: the first samples, as drawn
    WQ_ASSIGN_OR_RETURN(std::vector<rl::Episode> drawn, worker.Run(*policy_, target_bits_));
    drawn.resize(std::min(drawn.size(), keep));
    return drawn;
  }
  // envs x screen_samples samples, in batches of the worker's size (FetchWorker).
  const int64_t samples = int64_t{options_.envs} * options_.screen_samples;
  WQ_ASSIGN_OR_RETURN(std::vector<rl::Episode> best, rl::RunScreened(worker, *policy_, target_bits_,
                                                                     samples, keep, reward_model_));
  if (!screened_) {
    Log(absl::StrCat(": screening: the best ", keep, " of ", samples,
                     " samples by a reward model of ", reward_model_.plans, " measured plans"));
    screened_ = true;
  }
  return best;
}

void RolloutLoop::Rollouts() {
  std::unique_ptr<rl::RolloutWorker> worker = FetchWorker();
  if (worker == nullptr) return;
  Produced produced;
  while (WaitForPolicy(&produced)) {
    absl::StatusOr<std::vector<rl::Episode>> run = RunScreened(*worker);
    if (!run.ok()) {
      Log(absl::StrCat(": rollout: ", run.status().message()));
      break;
    }
    std::vector<rl::Episode> episodes = *std::move(run);
    const auto measured = std::count_if(episodes.begin(), episodes.end(),
                                        [](const rl::Episode& e) { return !e.screened_out; });
    produced.count += static_cast<int>(measured);
    if (episodes_ != nullptr) episodes_->Inc(static_cast<double>(measured));
    // The screened-out samples first: they are in the learner before the
    // measured ones' evaluations can complete its batch, so they join it.
    for (const rl::Episode& e : episodes) {
      if (e.screened_out) Deliver(e, worker->table());
    }
    for (const rl::Episode& e : episodes) {
      if (e.screened_out) continue;
      if (Deliver(e, worker->table())) ++sent_;  // else stale or lost with its learner
    }
  }
  learner_->CloseTransitions();
}

}  // namespace windquant::actor
