// ActorNode: the actor process's parts wired together (DESIGN.md section 5):
// the StageWorker of stage s (its layers only; cached fits reloaded after a
// restart), the Actor service on a started server (Forward, calibration; the
// fitted table is registered with the learner) and the rollout loop
// (episodes to the learner, which sends their plans to the evaluator).
// windquant-actor runs one over TCP; `windquant quantize` runs one per stage
// and replica beside the learner and evaluator nodes with in-process channels.
//
//   auto node = ActorNode::Create(job::ActorNodeOptionsFrom(config), stage, replica, address,
//                                 &registry, log, learner);
//   WQ_RETURN_IF_ERROR((*node)->StartRollouts(incarnation));
//   ...
//   (*node)->Stop();
//
// Thread-safety: Create/Connect/Stop from one thread.
#ifndef WINDQUANT_ACTOR_ACTOR_NODE_H_
#define WINDQUANT_ACTOR_ACTOR_NODE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "actor/actor_service.h"
#include "actor/rollout_loop.h"
#include "common/base/log.h"
#include "common/metrics/registry.h"
#include "common/net/canceller.h"
#include "common/net/peer_options.h"
#include "common/net/server.h"
#include "common/stage/stage_worker.h"
#include "grpcpp/channel.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant::actor {

// Layers [first, end) of `stage` when `layers` are split over `stages` as
// evenly as possible, earlier stages taking the remainder. INVALID_ARGUMENT
// (naming service.stages) when there are more stages than layers.
absl::StatusOr<std::pair<int64_t, int64_t>> StageLayers(int64_t layers, int stages, int stage);

// What an actor node reads (the run config's keys beside each field; built from the
// config by job::ActorNodeOptionsFrom).
struct ActorNodeOptions {
  // The stage's worker: model.dir, model.device (worker.compute), quant.chunk_size,
  // quant.salient_fraction, quant.cache_dir (its layer range is the node's stage of `stages`).
  stage::StageWorkerOptions worker;
  int stages = 1;    // service.stages
  int replicas = 1;  // service.replicas
  // The server and the calls to the learner: service.tls.*, service.max_message_bytes,
  // service.rpc_deadline_ms.
  net::PeerOptions peer;
  int64_t evaluation_timeout_ms = 120000;  // service.evaluation_timeout_ms (rollout stalls)
  int episodes_per_update = 16;            // training.episodes_per_update (split over actors)
  // What every rollout loop of the run shares: policy (ppo.hidden), env.*, training.seed,
  // training.screen_samples. Connect sets the per-actor fields (id, index, envs, ...).
  RolloutLoopOptions rollouts;
};

class ActorNode {
 public:
  using Options = ActorNodeOptions;

  // Loads the stage's layers, reloads its cached fits (worker.cache_dir) and
  // serves on `address` (port 0 = a free one). `learner` receives the fitted
  // table (RegisterUnitTable, retried with backoff). With `shared_weights`
  // (weights of at least the stage's layers, already loaded by the caller, who
  // keeps them alive) the stage uses those tensors instead of loading its own
  // copy: in one process every node holds the same weights once.
  static absl::StatusOr<std::unique_ptr<ActorNode>> Create(
      const Options& options, int stage, int replica, const std::string& address,
      metrics::Registry* registry, base::LogSink log, std::shared_ptr<grpc::Channel> learner,
      const model::LlamaWeights* shared_weights = nullptr);
  ~ActorNode();

  // Starts the rollout workers (episodes to the learner) and, when cached
  // fits were reloaded, registers them again in the
  // background (the learner may be down too). `incarnation` (its low 16 bits)
  // goes into every episode id and the sampling seed: a restarted actor must
  // use a new one (the learner refuses an episode id it has seen).
  absl::Status StartRollouts(uint32_t incarnation);
  // Cancels calls in flight and stops the rollouts and the registrar; the
  // server still serves. Idempotent.
  void StopClients();
  // StopClients, then drains the server. Idempotent.
  void Stop();

  const ActorIdentity& identity() const { return id_; }
  net::GrpcServer& server() { return *server_; }
  const stage::StageWorker& worker() const { return *worker_; }

 private:
  ActorNode() = default;
  absl::Status RegisterTable(const plan::UnitTable& table);

  Options options_;
  ActorIdentity id_;
  base::LogSink log_;
  metrics::Registry* registry_ = nullptr;
  std::string last_fp_path_;  // fingerprint of the last fitted table ("" = no cache)
  std::unique_ptr<stage::StageWorker> worker_;
  std::shared_ptr<grpc::Channel> learner_channel_;
  std::unique_ptr<v1::Learner::Stub> learner_;
  // Shutdown cancels the calls to the learner in flight (registration retries).
  net::Canceller stopping_;
  std::unique_ptr<ActorService> service_;
  std::unique_ptr<net::GrpcServer> server_;
  std::unique_ptr<RolloutLoop> rollouts_;
  std::thread registrar_;
  bool running_ = false;  // Create succeeded, Stop not called
};

}  // namespace windquant::actor

#endif  // WINDQUANT_ACTOR_ACTOR_NODE_H_
