// RolloutLoop: the network side of an actor's rollouts. One thread follows
// the learner's policy (WatchPolicy; a snapshot is used only when its sha256
// matches), another fetches the global unit table, runs RolloutWorker
// episodes, streams them to the learner (StreamTransitions, one ack each) and
// submits the accepted ones' plans to the evaluator (retrying while it is
// down). It produces `episodes_per_version` episodes per policy version, then
// waits for a newer policy (or `stall_timeout`, so lost episodes never stall
// the run). Both threads reconnect with backoff; every (re)subscription asks
// for the learner's current snapshot (a restarted learner may be back at an
// older version) and starts a fresh share of episodes. They stop when the
// learner says the run is done or on Stop(), which cancels the calls in
// flight (net::Canceller) and so returns promptly even while a peer is down.
// Metrics (when given a registry): windquant_actor_episodes_total.
// Thread-safety: Start/Stop from one thread.
#ifndef WINDQUANT_ACTOR_ROLLOUT_LOOP_H_
#define WINDQUANT_ACTOR_ROLLOUT_LOOP_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config/run_config.h"
#include "common/metrics/registry.h"
#include "common/net/canceller.h"
#include "common/rl/rollout_worker.h"
#include "windquant/v1/evaluator.grpc.pb.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant::actor {

struct RolloutLoopOptions {
  std::string actor_id;
  int actor_index = 0;
  uint32_t incarnation = 0;
  int envs = 1;                  // episodes per rollout
  int episodes_per_version = 1;  // then wait for a new policy
  absl::Duration deadline = absl::Seconds(30);
  absl::Duration stall_timeout = absl::Seconds(60);
};

class RolloutLoop {
 public:
  RolloutLoop(const config::RunConfig& config, RolloutLoopOptions options,
              std::shared_ptr<grpc::Channel> learner, std::shared_ptr<grpc::Channel> evaluator,
              metrics::Registry* registry = nullptr);
  ~RolloutLoop();
  absl::Status Start();
  void Stop();
  int64_t episodes_sent() const { return sent_; }

 private:
  void WatchPolicy();
  void Rollouts();
  bool Sleep(absl::Duration d);  // false when stopping

  const config::RunConfig config_;
  const RolloutLoopOptions options_;
  std::unique_ptr<v1::Learner::Stub> learner_;
  std::unique_ptr<v1::Evaluator::Stub> evaluator_;
  absl::Mutex mu_;
  std::unique_ptr<rl::Policy> policy_ ABSL_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = -1;
  double target_bits_ ABSL_GUARDED_BY(mu_) = 0;
  // Incremented by each policy subscription's first snapshot.
  int64_t subscription_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  net::Canceller cancel_;
  metrics::Counter* episodes_ = nullptr;
  std::atomic<int64_t> sent_{0};
  std::thread watcher_, roller_;
};

}  // namespace windquant::actor

#endif  // WINDQUANT_ACTOR_ROLLOUT_LOOP_H_
