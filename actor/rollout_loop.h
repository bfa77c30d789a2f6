// RolloutLoop: the network side of an actor's rollouts. One thread follows
// the learner's policy (WatchPolicy; a snapshot is used only when its sha256
// matches), another fetches the global unit table, runs RolloutWorker
// episodes and streams them to the learner (one ack each), which sends their
// plans to the evaluator (learner/plan_sender.h). It
// produces `episodes_per_version` episodes per policy version, then waits for
// a newer policy (or, so a batch short of episodes never stalls the run, the
// longer of `stall_timeout` and the evaluation wait the learner's last ack
// named: it grows with the plans the learner has out for evaluation).
// Both threads reconnect with backoff; every (re)subscription asks for the
// learner's current snapshot (a restarted learner may be back at an older
// version) and starts a fresh share of episodes. Before every subscription
// the watcher asks the learner's run status; a learner without the unit
// table (restarted on an empty disk with nothing to restore) gets this
// actor's part again through `register_table`, so the run goes on. They stop
// when the learner says the run is done or on Stop(), which cancels the
// clients' calls in flight and so returns promptly even while a peer is down.
// The learner is reached through a LearnerClient (rollout_clients.h): the
// gRPC one from a channel, or a fake.
// Metrics (when given a registry): windquant_actor_episodes_total.
// Memory: one policy (a few KB) and the worker's copy of the unit table; while
// screening, every sample of a rollout until it is sent (envs x screen_samples
// episodes of ~200 bytes per unit: 4.6 MB for stories260k's 45 units at 4 x 128,
// but ~10 GB at LLaMA-70B's ~97k units, where screening would have to stream the
// screened-out samples to the learner as the running best-`envs` drops them).
// Thread-safety: Start/Stop from one thread.
#ifndef WINDQUANT_ACTOR_ROLLOUT_LOOP_H_
#define WINDQUANT_ACTOR_ROLLOUT_LOOP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "actor/rollout_clients.h"
#include "common/base/log.h"
#include "common/metrics/registry.h"
#include "common/net/canceller.h"
#include "common/rl/environment_options.h"
#include "common/rl/policy.h"
#include "common/rl/reward_model.h"
#include "common/rl/rollout_worker.h"

namespace windquant::actor {

struct RolloutLoopOptions {
  rl::PolicyOptions policy;    // the learner's policy shape (its snapshots load into it)
  rl::EnvironmentOptions env;  // the decision process the episodes run
  uint64_t seed = 0;           // training.seed: the rollout worker's sample stream
  // Samples drawn per episode sent (config::ScreenSamplesPerEpisode of
  // training.screen_samples): with K > 1 (screening on) and the snapshot's reward
  // model, the `envs` best-predicted of K x envs samples are sent for measurement
  // and every other sample to the learner only, with its predicted log
  // perplexity (rl::RunScreened), so PPO learns from all of them; 1 = no screening.
  int screen_samples = 1;
  std::string actor_id;
  int actor_index = 0;
  uint32_t incarnation = 0;
  int envs = 1;                  // episodes per rollout
  int episodes_per_version = 1;  // then wait for a new policy
  absl::Duration deadline = absl::Seconds(30);
  absl::Duration stall_timeout = absl::Seconds(60);
  // Screening (training.screen_samples) draws its samples in batches of at
  // most this many transitions (~200 bytes each: ~100 MB; at LLaMA-70B's ~97k
  // units at chunk 64, 5 episodes per batch).
  int64_t screen_batch_steps = int64_t{1} << 19;
  // Registers this actor's fitted table with the learner (retrying); an
  // error when there is none yet (not calibrated). Unset: never.
  std::function<absl::Status()> register_table;
  // Where the loop's lines go (each starts with actor_id).
  base::LogSink log = base::LogToStderr;
};

class RolloutLoop {
 public:
  RolloutLoop(RolloutLoopOptions options, std::unique_ptr<LearnerClient> learner,
              metrics::Registry* registry = nullptr);
  // The gRPC client over the channel.
  RolloutLoop(RolloutLoopOptions options, std::shared_ptr<grpc::Channel> learner,
              metrics::Registry* registry = nullptr);
  ~RolloutLoop();
  absl::Status Start();
  void Stop();
  // Episodes the learner accepted for measurement (screened-out samples not counted).
  int64_t episodes_sent() const { return sent_; }

 private:
  // What the rollout thread last produced for.
  struct Produced {
    int64_t version = -2;
    int64_t subscription = 0;
    int count = 0;
    absl::Time since = absl::Now();
  };

  void WatchPolicy();
  // Waits (with backoff) until the learner answers its run status; registers
  // the table when the learner lacks it. False when stopping or done.
  bool EnsureTableRegistered();
  // A snapshot of the stream; `first` of its subscription.
  void OnSnapshot(const v1::PolicySnapshot& snap, bool* first);
  // True (and done_ set) when the learner says the run is done.
  bool RunDone(absl::Duration deadline);
  void Rollouts();
  // One rollout at the current policy: `envs` episodes; when screening()
  // and with the snapshot's reward model, all K x envs, the `envs` best-predicted
  // first and the others marked screened_out (rl::RunScreened).
  absl::StatusOr<std::vector<rl::Episode>> RunScreened(rl::RolloutWorker& worker);
  // Screening is on: more than one sample per episode sent.
  bool screening() const { return options_.screen_samples > 1; }
  // The rollout worker on the learner's merged table; null when stopping.
  std::unique_ptr<rl::RolloutWorker> FetchWorker();
  // Waits for a policy to produce for; false when stopping or done.
  bool WaitForPolicy(Produced* produced);
  // Streams `e` to the learner; true when it was accepted.
  bool Deliver(const rl::Episode& e, const plan::UnitTable& table);
  bool Sleep(absl::Duration d);  // false when stopping
  bool stopping();
  void Log(absl::string_view line) const;  // actor_id + line to options_.log

  const RolloutLoopOptions options_;
  std::unique_ptr<LearnerClient> learner_;
  absl::Mutex mu_;
  std::unique_ptr<rl::Policy> policy_ ABSL_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = -1;
  double target_bits_ ABSL_GUARDED_BY(mu_) = 0;
  rl::RewardModel reward_model_ ABSL_GUARDED_BY(mu_);  // the snapshot's; empty: no screening
  bool screened_ ABSL_GUARDED_BY(mu_) = false;         // logged once
  // Incremented by each policy subscription's first snapshot.
  int64_t subscription_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration learner_wait_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();  // last ack's
  net::Canceller cancel_;  // the loop's own sleeps
  metrics::Counter* episodes_ = nullptr;
  std::atomic<int64_t> sent_{0};
  std::thread watcher_, roller_;
};

}  // namespace windquant::actor

#endif  // WINDQUANT_ACTOR_ROLLOUT_LOOP_H_
