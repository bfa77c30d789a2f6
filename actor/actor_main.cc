// windquant-actor: stage s of replica r (service.stage/replica or the pod
// ordinal WQ_POD_ORDINAL): loads its layers, serves windquant.v1.Actor
// (Forward, Calibrate, FinishCalibration), registers its unit table with the
// learner and runs rollout workers (DESIGN.md section 5).
#include <cstdlib>
#include <iostream>

#include <ATen/Parallel.h>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "actor/actor_service.h"
#include "actor/rollout_loop.h"
#include "actor/service_flags.h"
#include "actor/stage_worker.h"
#include "common/base/files.h"
#include "common/metrics/http_server.h"
#include "common/metrics/metric_names.h"
#include "common/model/llama_config.h"
#include "common/net/canceller.h"
#include "common/net/channel.h"
#include "common/net/retry.h"
#include "common/net/server.h"
#include "common/net/signal_waiter.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace wq = windquant;

namespace {
int Fail(const absl::Status& s) {
  std::cerr << "windquant-actor: " << s.message() << "\n";
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  wq::net::SignalWaiter::BlockTerminationSignals();
  auto flags = wq::actor::ParseServiceFlags(argc, argv);
  if (!flags.ok()) return Fail(flags.status());
  if (flags->help) {
    std::cout << "usage: windquant-actor --config run.yaml [--set key=value]... [--metrics-port N]\n"
                 "Stage/replica from service.stage + service.replica, or from WQ_POD_ORDINAL\n"
                 "(stage = ordinal % stages, replica = ordinal / stages). Serves on\n"
                 "service.actor_addresses[stage * replicas + replica]. Prints metrics_port=<port>.\n"
                 "/metrics (Prometheus text) on service.metrics_address, its port\n"
                 "overridden by --metrics-port (0 = a free one).\n";
    return 0;
  }
  const wq::config::RunConfig& c = flags->config;
  if (c.model.threads > 0) at::set_num_threads(c.model.threads);  // 0: torch's default
  const auto& svc = c.service;
  const char* ordinal = std::getenv("WQ_POD_ORDINAL");
  auto sr = wq::actor::ResolveStageReplica(svc, ordinal ? ordinal : "");
  if (!sr.ok()) return Fail(sr.status());
  const int stage = sr->first, replica = sr->second;
  const int index = stage * svc.replicas + replica;
  if (index >= static_cast<int>(svc.actor_addresses.size())) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "service.actor_addresses: no entry ", index, " for stage ", stage, " replica ", replica)));
  }
  auto model_config = wq::model::LlamaConfig::FromDirectory(c.model.dir);
  if (!model_config.ok()) return Fail(model_config.status());
  const int64_t layers = model_config->num_hidden_layers;
  if (svc.stages > layers) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("service.stages: ", svc.stages, " > the model's ", layers, " layers")));
  }
  // Layers split as evenly as possible, earlier stages taking the remainder.
  const int64_t base = layers / svc.stages, extra = layers % svc.stages;
  wq::actor::StageWorkerOptions wo;
  wo.model_dir = c.model.dir;
  wo.first_layer = stage * base + std::min<int64_t>(stage, extra);
  wo.end_layer = wo.first_layer + base + (stage < extra ? 1 : 0);
  wo.chunk_size = c.quant.chunk_size;
  wo.salient_fraction = c.quant.salient_fraction;
  wo.cache_dir = c.quant.cache_dir;
  auto worker = wq::actor::StageWorker::Create(wo);
  if (!worker.ok()) return Fail(worker.status());
  auto key = wq::actor::ModelKey(c.model.dir, c.quant.chunk_size, c.quant.salient_fraction);
  if (!key.ok()) return Fail(key.status());
  wq::actor::ActorIdentity id;
  id.stage = stage;
  id.replica = replica;
  id.stages = svc.stages;
  id.replicas = svc.replicas;
  id.actor_id = absl::StrCat("actor-s", stage, "-r", replica);
  id.model_key = *key;

  // The actor's metrics (forward latency, episodes) and the RPC ones.
  auto& registry = wq::metrics::Registry::Default();
  (void)wq::metrics::HistogramFamily(registry, wq::metrics::kActorForwardDurationSeconds);
  // Shutdown cancels the calls to the learner in flight (registration retries).
  wq::net::Canceller stopping;
  auto lo = wq::net::ChannelOptionsFromConfig(svc, svc.learner_address);
  if (!lo.ok()) return Fail(lo.status());
  lo->registry = &registry;
  auto learner_channel = wq::net::MakeChannel(*lo);
  if (!learner_channel.ok()) return Fail(learner_channel.status());
  auto eo = wq::net::ChannelOptionsFromConfig(svc, svc.evaluator_address);
  if (!eo.ok()) return Fail(eo.status());
  eo->registry = &registry;
  auto evaluator_channel = wq::net::MakeChannel(*eo);
  if (!evaluator_channel.ok()) return Fail(evaluator_channel.status());
  auto learner = wq::v1::Learner::NewStub(*learner_channel);
  const std::string last_fp_path = c.quant.cache_dir.empty()
                                       ? std::string()
                                       : absl::StrCat(c.quant.cache_dir, "/last-fingerprint-",
                                                      wo.first_layer, "-", wo.end_layer);
  auto register_table = [&](const wq::quant::UnitTable& table) -> absl::Status {
    if (!last_fp_path.empty()) (void)wq::base::WriteFileAtomic(last_fp_path, table.fingerprint);
    wq::v1::RegisterUnitTableRequest req;
    req.set_stage(stage);
    req.set_replica(replica);
    req.set_actor_id(id.actor_id);
    table.ToProto(req.mutable_table());
    wq::v1::RegisterUnitTableReply reply;
    wq::net::RetryPolicy retry;
    retry.max_attempts = 30;
    return wq::net::FromGrpcStatus(wq::net::RetryWithBackoff(
        [&] {
          grpc::ClientContext ctx;
          wq::net::ConfigureContext(ctx, absl::Milliseconds(svc.rpc_deadline_ms), true);
          wq::net::Canceller::Scope scope(&stopping, &ctx);
          if (scope.cancelled()) return wq::net::CancelledStatus();
          return learner->RegisterUnitTable(&ctx, req, &reply);
        },
        retry, stopping.Sleeper()));
  };
  // A restarted actor reloads its fits (no new calibration pass needed).
  if (!last_fp_path.empty()) {
    auto fp = wq::base::ReadFile(last_fp_path);
    if (fp.ok() && (*worker)->LoadCachedFits(*fp).ok()) {
      std::cerr << id.actor_id << ": reloaded cached fits" << std::endl;
    }
  }
  wq::actor::ActorService service(worker->get(), id, register_table, &registry);
  auto options = wq::net::ServerOptionsFromConfig(svc, svc.actor_addresses[index]);
  if (!options.ok()) return Fail(options.status());
  options->registry = &registry;
  wq::net::GrpcServer server(*options);
  server.AddService(&service, wq::v1::Actor::service_full_name());
  if (auto s = server.Start(); !s.ok()) return Fail(s);
  wq::metrics::MetricsServer metrics(&registry, flags->metrics);
  if (auto s = metrics.Start(); !s.ok()) return Fail(s);
  std::cout << "actor_port=" << server.port() << "\nmetrics_port=" << metrics.port()
            << std::endl;
  std::cerr << id.actor_id << ": serving on " << server.address() << ", /metrics on port "
            << metrics.port() << std::endl;
  std::cerr << id.actor_id << ": layers [" << wo.first_layer << ", " << wo.end_layer << ")"
            << std::endl;

  wq::actor::RolloutLoopOptions ro;
  ro.actor_id = id.actor_id;
  ro.actor_index = index;
  ro.incarnation = std::random_device{}();
  const int actors = svc.stages * svc.replicas;
  ro.envs = std::max(1, (c.training.episodes_per_update + actors - 1) / actors);
  ro.episodes_per_version = ro.envs;
  ro.deadline = absl::Milliseconds(svc.rpc_deadline_ms);
  ro.stall_timeout = absl::Milliseconds(svc.evaluation_timeout_ms);
  wq::actor::RolloutLoop rollouts(c, ro, *learner_channel, *evaluator_channel, &registry);
  // A restarted actor with cached fits registers them again (in the
  // background: the learner may be down too, and SIGTERM must still work).
  std::thread registrar([&] {
    if (!(*worker)->fitted()) return;
    auto table = (*worker)->table();
    if (!table.ok()) return;
    absl::Status s = register_table(*table);
    if (!s.ok() && !stopping.cancelled()) {
      std::cerr << id.actor_id << ": registering the cached table: " << s.message() << std::endl;
    }
  });
  if (auto s = rollouts.Start(); !s.ok()) {
    stopping.Cancel();
    registrar.join();
    return Fail(s);
  }
  wq::net::SignalWaiter::Wait();
  // Outgoing work first (it may wait on peers that are going away too), then
  // the server drains its in-flight calls.
  stopping.Cancel();
  rollouts.Stop();
  registrar.join();
  server.Drain(absl::Now() + absl::Seconds(10));
  metrics.Stop();
  return 0;
}
