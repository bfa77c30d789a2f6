// windquant-actor: stage s of replica r (service.stage/replica or the pod
// ordinal WQ_POD_ORDINAL): loads its layers, serves windquant.v1.Actor
// (Forward, Calibrate, FinishCalibration), registers its unit table with the
// learner and runs rollout workers (DESIGN.md section 5).
#include <cstdlib>
#include <iostream>

#include <ATen/Parallel.h>
#include <random>

#include "absl/strings/str_cat.h"
#include "actor/actor_node.h"
#include "common/metrics/http_server.h"
#include "common/net/channel.h"
#include "common/net/signal_waiter.h"
#include "common/service/service_flags.h"

namespace wq = windquant;

namespace {
int Fail(const absl::Status& s) {
  std::cerr << "windquant-actor: " << s.message() << "\n";
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  wq::net::SignalWaiter::BlockTerminationSignals();
  auto flags = wq::service::ParseServiceFlags(argc, argv);
  if (!flags.ok()) return Fail(flags.status());
  if (flags->help) {
    std::cout
        << "usage: windquant-actor --config run.yaml [--set key=value]... [--metrics-port N]\n"
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
  auto sr = wq::service::ResolveStageReplica(svc, ordinal ? ordinal : "");
  if (!sr.ok()) return Fail(sr.status());
  const int stage = sr->first, replica = sr->second;
  const int index = stage * svc.replicas + replica;
  if (index >= static_cast<int>(svc.actor_addresses.size())) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "service.actor_addresses: no entry ", index, " for stage ", stage, " replica ", replica)));
  }
  // The actor's metrics (forward latency, episodes) and the RPC ones.
  auto& registry = wq::metrics::Registry::Default();
  auto learner = wq::net::MakeChannelFromConfig(svc, svc.learner_address, &registry);
  if (!learner.ok()) return Fail(learner.status());
  auto evaluator = wq::net::MakeChannelFromConfig(svc, svc.evaluator_address, &registry);
  if (!evaluator.ok()) return Fail(evaluator.status());
  auto node = wq::actor::ActorNode::Create(
      c, stage, replica, svc.actor_addresses[index], &registry,
      [](const std::string& line) { std::cerr << line << std::endl; }, *learner);
  if (!node.ok()) return Fail(node.status());
  wq::metrics::MetricsServer metrics(&registry, flags->metrics);
  if (auto s = metrics.Start(); !s.ok()) return Fail(s);
  std::cout << "actor_port=" << (*node)->server().port() << "\nmetrics_port=" << metrics.port()
            << std::endl;
  std::cerr << (*node)->identity().actor_id << ": /metrics on port " << metrics.port() << std::endl;
  if (auto s = (*node)->Connect(*evaluator, std::random_device{}()); !s.ok()) {
    (*node)->Stop();
    return Fail(s);
  }
  wq::net::SignalWaiter::Wait();
  (*node)->Stop();
  metrics.Stop();
  return 0;
}
