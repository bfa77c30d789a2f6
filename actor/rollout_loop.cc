#include "actor/rollout_loop.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/net/channel.h"
#include "common/net/retry.h"
#include "common/net/status_convert.h"
#include "common/rl/state_features.h"

namespace windquant::actor {

RolloutLoop::RolloutLoop(const config::RunConfig& config, RolloutLoopOptions options,
                         std::shared_ptr<grpc::Channel> learner,
                         std::shared_ptr<grpc::Channel> evaluator)
    : config_(config), options_(std::move(options)),
      learner_(v1::Learner::NewStub(std::move(learner))),
      evaluator_(v1::Evaluator::NewStub(std::move(evaluator))) {}

RolloutLoop::~RolloutLoop() { Stop(); }

absl::Status RolloutLoop::Start() {
  rl::PolicyOptions po;
  po.state_dim = rl::kStateDim;
  po.num_actions = quant::kNumActions;
  po.hidden_sizes.assign(config_.ppo.hidden.begin(), config_.ppo.hidden.end());
  po.init_seed = config_.training.seed;
  auto policy = rl::Policy::Create(po);
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
      req.set_known_version(version_);
    }
    grpc::ClientContext ctx;
    // Long-lived stream: cancelled on Stop through the short read timeout below.
    net::ConfigureContext(ctx, absl::Hours(24), /*wait_for_ready=*/true);
    auto reader = learner_->WatchPolicy(&ctx, req);
    v1::PolicySnapshot snap;
    std::atomic<bool> reading{true};
    std::thread canceller([&] {
      while (reading) {
        {
          absl::MutexLock lock(&mu_);
          if (stop_) {
            ctx.TryCancel();
            return;
          }
        }
        absl::SleepFor(absl::Milliseconds(200));
      }
    });
    while (reader->Read(&snap)) {
      rl::PolicySnapshot s;
      s.version = snap.version();
      s.bytes = snap.parameters();
      s.sha256 = snap.sha256();
      absl::MutexLock lock(&mu_);
      absl::Status st = policy_->LoadSnapshot(s);
      if (!st.ok()) {
        std::cerr << options_.actor_id << ": policy " << s.version << " rejected: "
                  << st.message() << std::endl;
        continue;
      }
      version_ = s.version;
      target_bits_ = snap.target_bits();
      backoff = absl::Milliseconds(100);
    }
    reading = false;
    canceller.join();
    const grpc::Status status = reader->Finish();
    // A clean end means the run is done (the learner closes streams then).
    grpc::ClientContext sctx;
    net::ConfigureContext(sctx, options_.deadline);
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
  std::unique_ptr<RolloutWorker> worker;
  absl::Duration backoff = absl::Milliseconds(200);
  while (worker == nullptr) {
    grpc::ClientContext ctx;
    net::ConfigureContext(ctx, options_.deadline, /*wait_for_ready=*/true);
    v1::UnitTable proto;
    grpc::Status s = learner_->GetUnitTable(&ctx, v1::GetUnitTableRequest(), &proto);
    if (s.ok()) {
      auto table = quant::UnitTable::FromProto(proto);
      if (table.ok()) {
        auto w = RolloutWorker::Create(*table, config_.env, options_.actor_id,
                                       options_.actor_index, options_.incarnation,
                                       options_.envs, config_.training.seed);
        if (w.ok()) worker = *std::move(w);
      }
    }
    if (worker == nullptr && !Sleep(backoff)) return;
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
  std::cerr << options_.actor_id << ": unit table of " << worker->table().units.size()
            << " units" << std::endl;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::TransitionBatch, v1::TransitionAck>> stream;
  int64_t produced_version = -2;
  int produced = 0;
  absl::Time version_since = absl::Now();
  net::RetryPolicy retry;
  retry.max_attempts = 1000;
  retry.max_total_sleep = absl::Minutes(10);
  while (true) {
    // Wait for a policy, and for a new one once this version's share is done.
    int64_t version;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || done_ ||
               (version_ >= 0 &&
                (version_ != produced_version || produced < options_.episodes_per_version));
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1));
      if (stop_ || done_) break;
      if (!ready()) {
        if (absl::Now() - version_since < options_.stall_timeout) continue;
        produced = 0;  // stalled: produce more at this version
        version_since = absl::Now();
        continue;
      }
      if (version_ != produced_version) {
        produced_version = version_;
        produced = 0;
        version_since = absl::Now();
      }
      version = version_;
    }
    std::vector<Episode> episodes;
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
    for (const Episode& e : episodes) {
      v1::TransitionBatch batch;
      EncodeEpisode(e, worker->table(), &batch);
      v1::TransitionAck ack;
      bool delivered = false;
      for (int attempt = 0; attempt < 50 && !delivered; ++attempt) {
        if (stream == nullptr) {
          ctx = std::make_unique<grpc::ClientContext>();
          net::ConfigureContext(*ctx, absl::Hours(24), /*wait_for_ready=*/true);
          stream = learner_->StreamTransitions(ctx.get());
        }
        if (stream->Write(batch) && stream->Read(&ack)) {
          delivered = true;
          break;
        }
        grpc::Status s = stream->Finish();
        stream.reset();
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
            {
              absl::MutexLock lock(&mu_);
              if (stop_) return grpc::Status(grpc::StatusCode::CANCELLED, "stopping");
            }
            grpc::ClientContext c;
            net::ConfigureContext(c, options_.deadline, /*wait_for_ready=*/true);
            grpc::Status st = evaluator_->SubmitPlan(&c, req, &reply);
            // The evaluator answers UNAVAILABLE until it has the unit table.
            if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
              return grpc::Status(grpc::StatusCode::UNAVAILABLE, st.error_message());
            }
            return st;
          },
          retry);
      if (!s.ok()) {
        std::cerr << options_.actor_id << ": plan " << e.plan.plan_id << " not submitted: "
                  << s.error_message() << std::endl;
      }
    }
    (void)version;
  }
  if (stream != nullptr) {
    stream->WritesDone();
    ctx->TryCancel();
    stream->Finish();
  }
}

}  // namespace windquant::actor
