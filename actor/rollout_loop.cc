#include "actor/rollout_loop.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/metrics/metric_names.h"
#include "common/net/channel.h"
#include "common/net/retry.h"
#include "common/net/status_convert.h"
#include "common/rl/state_features.h"
#include "common/rl/training.h"
#include "common/rl/transition_codec.h"

namespace windquant::actor {
RolloutLoop::RolloutLoop(const config::RunConfig& config, RolloutLoopOptions options,
                         std::shared_ptr<grpc::Channel> learner,
                         std::shared_ptr<grpc::Channel> evaluator, metrics::Registry* registry)
    : config_(config),
      options_(std::move(options)),
      learner_(v1::Learner::NewStub(std::move(learner))),
      evaluator_(v1::Evaluator::NewStub(std::move(evaluator))) {
  if (registry != nullptr) {
    auto family = metrics::CounterFamily(*registry, metrics::kActorEpisodesTotal);
    if (family.ok()) episodes_ = &(*family)->Get();
  }
}

RolloutLoop::~RolloutLoop() { Stop(); }

absl::Status RolloutLoop::Start() {
  auto policy = rl::Policy::Create(rl::PolicyOptionsFromConfig(config_));
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
  if (watcher_.joinable()) watcher_.join();
  if (roller_.joinable()) roller_.join();
}

bool RolloutLoop::Sleep(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || done_; };
  mu_.AwaitWithTimeout(absl::Condition(&stopping), d);
  return !(stop_ || done_);
}

void RolloutLoop::WatchPolicy() {
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    v1::WatchPolicyRequest req;
    req.set_actor_id(options_.actor_id);
    {
      absl::MutexLock lock(&mu_);
      if (stop_ || done_) return;
    }
    // Always the current snapshot first: a restarted learner may be back at an
    // older checkpoint, and a version number alone does not identify weights.
    req.set_known_version(-1);
    grpc::ClientContext ctx;
    // Long-lived stream: ended by the learner, or by Stop() through cancel_.
    net::ConfigureContext(ctx, absl::Hours(24), /*wait_for_ready=*/true);
    net::Canceller::Scope scope(&cancel_, &ctx);
    auto reader = learner_->WatchPolicy(&ctx, req);
    v1::PolicySnapshot snap;
    bool first = true;
    while (reader->Read(&snap)) {
      rl::PolicySnapshot s;
      s.version = snap.version();
      s.bytes = snap.parameters();
      s.sha256 = snap.sha256();
      absl::MutexLock lock(&mu_);
      absl::Status st = policy_->LoadSnapshot(s);
      if (!st.ok()) {
        std::cerr << options_.actor_id << ": policy " << s.version << " rejected: " << st.message()
                  << std::endl;
        continue;
      }
      if (first) {
        // A new subscription (first connect, or a learner back from a crash):
        // this actor's share of episodes starts afresh.
        ++subscription_;
        if (subscription_ > 1) {
          std::cerr << options_.actor_id << ": re-subscribed at policy version " << s.version
                    << std::endl;
        }
        first = false;
      }
      version_ = s.version;
      target_bits_ = snap.target_bits();
      backoff = absl::Milliseconds(100);
    }
    const grpc::Status status = reader->Finish();
    if (cancel_.cancelled()) return;
    // A clean end means the run is done (the learner closes streams then).
    grpc::ClientContext sctx;
    net::ConfigureContext(sctx, std::min(options_.deadline, absl::Seconds(5)));
    net::Canceller::Scope sscope(&cancel_, &sctx);
    v1::RunStatus run;
    if (learner_->GetRunStatus(&sctx, v1::RunStatusRequest(), &run).ok() && run.done()) {
      absl::MutexLock lock(&mu_);
      done_ = true;
      std::cerr << options_.actor_id << ": run done" << std::endl;
      return;
    }
    if (!status.ok()) {
      std::cerr << options_.actor_id << ": policy stream: " << status.error_message() << std::endl;
    }
    if (!Sleep(backoff)) return;
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

void RolloutLoop::Rollouts() {
  // The global unit table (UNAVAILABLE until every stage registered).
  std::unique_ptr<rl::RolloutWorker> worker;
  absl::Duration backoff = absl::Milliseconds(200);
  while (worker == nullptr) {
    grpc::ClientContext ctx;
    net::ConfigureContext(ctx, options_.deadline, /*wait_for_ready=*/true);
    net::Canceller::Scope scope(&cancel_, &ctx);
    v1::UnitTable proto;
    grpc::Status s = learner_->GetUnitTable(&ctx, v1::GetUnitTableRequest(), &proto);
    if (s.ok()) {
      auto table = quant::UnitTable::FromProto(proto);
      if (table.ok()) {
        auto w =
            rl::RolloutWorker::Create(*table, config_.env, options_.actor_id, options_.actor_index,
                                      options_.incarnation, options_.envs, config_.training.seed);
        if (w.ok()) worker = *std::move(w);
      }
    }
    if (worker == nullptr && !Sleep(backoff)) return;
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
  std::cerr << options_.actor_id << ": unit table of " << worker->table().units.size() << " units"
            << std::endl;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<net::Canceller::Scope> ctx_scope;
  std::unique_ptr<grpc::ClientReaderWriter<v1::TransitionBatch, v1::TransitionAck>> stream;
  auto close_stream = [&] {
    if (stream == nullptr) return;
    ctx->TryCancel();
    stream->Finish();
    stream.reset();
    ctx_scope.reset();
    ctx.reset();
  };
  int64_t produced_version = -2;
  int64_t produced_subscription = 0;
  int produced = 0;
  absl::Time version_since = absl::Now();
  // A plan is worth submitting while the learner still holds its episode.
  net::RetryPolicy retry;
  retry.max_attempts = 1 << 20;
  retry.max_backoff = absl::Seconds(2);
  retry.max_total_sleep = std::max(options_.stall_timeout, absl::Seconds(1));
  retry.retry_deadline_exceeded = true;  // a duplicate submission is evaluated, not recorded, twice
  while (true) {
    // Wait for a policy, and for a new one once this version's share is done.
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || done_ ||
               (version_ >= 0 &&
                (version_ != produced_version || subscription_ != produced_subscription ||
                 produced < options_.episodes_per_version));
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1));
      if (stop_ || done_) break;
      if (!ready()) {
        if (absl::Now() - version_since < options_.stall_timeout) continue;
        produced = 0;  // stalled: produce more at this version
        version_since = absl::Now();
        continue;
      }
      if (version_ != produced_version || subscription_ != produced_subscription) {
        produced_version = version_;
        produced_subscription = subscription_;
        produced = 0;
        version_since = absl::Now();
      }
    }
    std::vector<rl::Episode> episodes;
    {
      absl::MutexLock lock(&mu_);
      auto run = worker->Run(*policy_, target_bits_);
      if (!run.ok()) {
        std::cerr << options_.actor_id << ": rollout: " << run.status().message() << std::endl;
        break;
      }
      episodes = *std::move(run);
    }
    produced += static_cast<int>(episodes.size());
    if (episodes_ != nullptr) episodes_->Inc(static_cast<double>(episodes.size()));
    for (const rl::Episode& e : episodes) {
      v1::TransitionBatch batch;
      rl::EncodeEpisode(e, worker->table(), &batch);
      v1::TransitionAck ack;
      bool delivered = false;
      for (int attempt = 0; attempt < 50 && !delivered && !cancel_.cancelled(); ++attempt) {
        if (stream == nullptr) {
          ctx = std::make_unique<grpc::ClientContext>();
          // Long-lived stream: ended by a failure, or by Stop() through cancel_.
          net::ConfigureContext(*ctx, absl::Hours(24), /*wait_for_ready=*/true);
          ctx_scope = std::make_unique<net::Canceller::Scope>(&cancel_, ctx.get());
          stream = learner_->StreamTransitions(ctx.get());
        }
        if (stream->Write(batch) && stream->Read(&ack)) {
          delivered = true;
          break;
        }
        grpc::Status s = stream->Finish();
        stream.reset();
        ctx_scope.reset();
        ctx.reset();
        if (cancel_.cancelled()) break;
        std::cerr << options_.actor_id << ": transitions stream: " << s.error_message()
                  << std::endl;
        if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) break;
        if (!Sleep(absl::Milliseconds(200))) break;
      }
      if (!delivered || !ack.accepted()) continue;  // stale or lost with its learner
      ++sent_;
      v1::SubmitPlanRequest req;
      e.plan.ToProto(worker->table(), req.mutable_plan());
      req.set_episode_id(e.episode_id);
      req.set_actor_id(options_.actor_id);
      v1::SubmitPlanReply reply;
      grpc::Status s = net::RetryWithBackoff(
          [&] {
            grpc::ClientContext c;
            net::ConfigureContext(c, options_.deadline, /*wait_for_ready=*/true);
            net::Canceller::Scope scope(&cancel_, &c);
            if (scope.cancelled()) return net::CancelledStatus();
            grpc::Status st = evaluator_->SubmitPlan(&c, req, &reply);
            // The evaluator answers UNAVAILABLE until it has the unit table.
            if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
              return grpc::Status(grpc::StatusCode::UNAVAILABLE, st.error_message());
            }
            return st;
          },
          retry, cancel_.Sleeper());
      if (!s.ok() && !cancel_.cancelled()) {
        std::cerr << options_.actor_id << ": plan " << e.plan.plan_id
                  << " not submitted: " << s.error_message() << std::endl;
      }
    }
  }
  if (stream != nullptr) stream->WritesDone();
  close_stream();
}

}  // namespace windquant::actor
