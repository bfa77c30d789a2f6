#include "actor/actor_node.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/metrics/metric_names.h"
#include "common/model/llama_config.h"
#include "common/net/channel.h"
#include "common/net/retry.h"
#include "common/net/status_convert.h"
#include "common/quant/quantizer.h"
#include "common/quant/table_fingerprint.h"
#include "common/quant/unit_table_options.h"
#include "common/transport/work_deadline.h"

namespace windquant::actor {

absl::StatusOr<std::pair<int64_t, int64_t>> StageLayers(int64_t layers, int stages, int stage) {
  if (stages > layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("service.stages: ", stages, " > the model's ", layers, " layers"));
  }
  const int64_t base = layers / stages, extra = layers % stages;
  const int64_t first = stage * base + std::min<int64_t>(stage, extra);
  return std::make_pair(first, first + base + (stage < extra ? 1 : 0));
}

namespace {

// Layers [first, end) of `w`: the same tensors (no copy), no embeddings or head.
absl::StatusOr<model::LlamaWeights> LayerRange(const model::LlamaWeights& w, int64_t first,
                                               int64_t end) {
  const int64_t have_end = w.first_layer + static_cast<int64_t>(w.layers.size());
  if (first < w.first_layer || end > have_end) {
    return absl::InvalidArgumentError(absl::StrCat("shared weights hold layers [", w.first_layer,
                                                   ", ", have_end, "), the stage needs [", first,
                                                   ", ", end, ")"));
  }
  model::LlamaWeights out;
  out.config = w.config;
  out.first_layer = first;
  out.layers.assign(w.layers.begin() + (first - w.first_layer),
                    w.layers.begin() + (end - w.first_layer));
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ActorNode>> ActorNode::Create(
    const Options& options, int stage, int replica, const std::string& address,
    metrics::Registry* registry, base::LogSink log, std::shared_ptr<grpc::Channel> learner,
    const model::LlamaWeights* shared_weights) {
  std::unique_ptr<ActorNode> node(new ActorNode());
  node->options_ = options;
  node->log_ = std::move(log);
  node->registry_ = registry;
  stage::StageWorkerOptions wo = options.worker;
  WQ_ASSIGN_OR_RETURN(model::LlamaConfig model_config,
                      model::LlamaConfig::FromDirectory(wo.model_dir));
  WQ_ASSIGN_OR_RETURN(auto layers,
                      StageLayers(model_config.num_hidden_layers, options.stages, stage));
  wo.first_layer = layers.first;
  wo.end_layer = layers.second;
  if (shared_weights != nullptr) {
    WQ_ASSIGN_OR_RETURN(model::LlamaWeights mine,
                        LayerRange(*shared_weights, wo.first_layer, wo.end_layer));
    WQ_ASSIGN_OR_RETURN(node->worker_, stage::StageWorker::FromWeights(std::move(mine), wo));
  } else {
    WQ_ASSIGN_OR_RETURN(node->worker_, stage::StageWorker::Create(wo));
  }
  WQ_ASSIGN_OR_RETURN(std::string key, quant::ModelKey(wo.model_dir, wo.units.chunk_size,
                                                       quant::QuantizerFor(wo.units)));
  ActorIdentity& id = node->id_;
  id.stage = stage;
  id.replica = replica;
  id.stages = options.stages;
  id.replicas = options.replicas;
  id.actor_id = absl::StrCat("actor-s", stage, "-r", replica);
  id.model_key = key;
  if (registry != nullptr) {
    (void)metrics::HistogramFamily(*registry, metrics::kActorForwardDurationSeconds);
  }
  node->learner_channel_ = learner;
  node->learner_ = v1::Learner::NewStub(std::move(learner));
  if (!wo.cache_dir.empty()) {
    node->last_fp_path_ =
        absl::StrCat(wo.cache_dir, "/last-fingerprint-", wo.first_layer, "-", wo.end_layer);
    // A restarted actor reloads its fits (no new calibration pass needed). A
    // cache entry cut short or altered is DATA_LOSS (quant::UnitTableCache:
    // checksums in its manifest): never used; the calibration pass fits the
    // stage again and rewrites the entry.
    auto fp = base::ReadFile(node->last_fp_path_);
    const absl::Status loaded = fp.ok() ? node->worker_->LoadCachedFits(*fp) : fp.status();
    if (loaded.ok()) {
      node->log_(absl::StrCat(id.actor_id, ": reloaded cached fits"));
    } else if (!absl::IsNotFound(loaded)) {
      node->log_(absl::StrCat(id.actor_id, ": cached fits not used (", loaded.message(),
                              "); the calibration pass fits the stage again"));
    }
  }
  ActorNode* n = node.get();
  node->service_ = std::make_unique<ActorService>(
      node->worker_.get(), id, [n](const plan::UnitTable& t) { return n->RegisterTable(t); },
      registry);
  WQ_ASSIGN_OR_RETURN(node->server_,
                      net::StartServer(options.peer, address, registry, node->service_.get(),
                                       v1::Actor::service_full_name()));
  node->log_(absl::StrCat(id.actor_id, ": layers [", wo.first_layer, ", ", wo.end_layer,
                          ") computing in ", model::ComputeDtypeName(wo.compute.dtype), " on ",
                          node->worker_->device().str(), ", serving on ",
                          node->server_->address()));
  node->running_ = true;
  return node;
}

ActorNode::~ActorNode() { Stop(); }

absl::Status ActorNode::RegisterTable(const plan::UnitTable& table) {
  if (!last_fp_path_.empty()) (void)base::WriteFileAtomic(last_fp_path_, table.fingerprint);
  v1::RegisterUnitTableRequest req;
  req.set_stage(id_.stage);
  req.set_replica(id_.replica);
  req.set_actor_id(id_.actor_id);
  table.ToProto(req.mutable_table());
  v1::RegisterUnitTableReply reply;
  net::RetryPolicy retry;
  retry.max_attempts = 30;
  // The last stage's registration completes the learner's table (reference
  // plan, warm start) within the call: the deadline follows the units.
  const absl::Duration deadline = transport::RegisterTableDeadline(
      absl::Milliseconds(options_.peer.rpc_deadline_ms), static_cast<int64_t>(table.units.size()));
  return net::FromGrpcStatus(net::RetryWithBackoff(
      [&] {
        grpc::ClientContext ctx;
        net::ConfigureContext(ctx, deadline, /*wait_for_ready=*/true);
        net::Canceller::Scope scope(&stopping_, &ctx);
        if (scope.cancelled()) return net::CancelledStatus();
        return learner_->RegisterUnitTable(&ctx, req, &reply);
      },
      retry, stopping_.Sleeper()));
}

absl::Status ActorNode::StartRollouts(uint32_t incarnation) {
  RolloutLoopOptions ro = options_.rollouts;
  ro.actor_id = id_.actor_id;
  ro.actor_index = id_.stage * options_.replicas + id_.replica;
  ro.incarnation = incarnation;
  const int actors = options_.stages * options_.replicas;
  ro.envs = std::max(1, (options_.episodes_per_update + actors - 1) / actors);
  ro.episodes_per_version = ro.envs;
  ro.deadline = absl::Milliseconds(options_.peer.rpc_deadline_ms);
  ro.stall_timeout = absl::Milliseconds(options_.evaluation_timeout_ms);
  // A learner back without the unit table gets this stage's part again.
  ro.log = log_;
  ro.register_table = [this]() -> absl::Status {
    if (!worker_->fitted()) return absl::FailedPreconditionError("not calibrated yet");
    WQ_ASSIGN_OR_RETURN(plan::UnitTable table, worker_->table());
    return RegisterTable(table);
  };
  rollouts_ = std::make_unique<RolloutLoop>(ro, learner_channel_, registry_);
  // A restarted actor with cached fits registers them again.
  registrar_ = std::thread([this] {
    if (!worker_->fitted()) return;
    auto table = worker_->table();
    if (!table.ok()) return;
    absl::Status s = RegisterTable(*table);
    if (!s.ok() && !stopping_.cancelled()) {
      log_(absl::StrCat(id_.actor_id, ": registering the cached table: ", s.message()));
    }
  });
  return rollouts_->Start();
}

// Outgoing work first (it may wait on peers that are going away too), then the
// server drains its in-flight calls.
void ActorNode::StopClients() {
  stopping_.Cancel();
  if (rollouts_ != nullptr) rollouts_->Stop();
  if (registrar_.joinable()) registrar_.join();
}

void ActorNode::Stop() {
  if (!running_) return;
  running_ = false;
  StopClients();
  server_->Drain(absl::Now() + absl::Seconds(10));
}

}  // namespace windquant::actor
