// windquant-evaluator: owns the evaluation data, embeddings and head, drives
// calibration and plan evaluation through the actors, updates λ and reports
// to the learner (DESIGN.md section 5).
#include <cstdlib>
#include <iostream>

#include <ATen/Parallel.h>

#include "common/metrics/http_server.h"
#include "common/net/channel.h"
#include "common/net/signal_waiter.h"
#include "common/service/service_flags.h"
#include "evaluator/evaluator_node.h"

namespace wq = windquant;

namespace {

int Fail(const absl::Status& s) {
  std::cerr << "windquant-evaluator: " << s.message() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  wq::net::SignalWaiter::BlockTerminationSignals();
  auto flags = wq::service::ParseServiceFlags(argc, argv);
  if (!flags.ok()) return Fail(flags.status());
  if (flags->help) {
    std::cout
        << "usage: windquant-evaluator --config run.yaml [--set key=value]... [--metrics-port N]\n"
           "Serves windquant.v1.Evaluator on service.evaluator_address; drives the\n"
           "actors of service.actor_addresses (stage-major). Prints metrics_port=<port>.\n"
           "/metrics (Prometheus text) on service.metrics_address, its port\n"
           "overridden by --metrics-port (0 = a free one).\n";
    return 0;
  }
  const wq::config::RunConfig& c = flags->config;
  if (c.model.threads > 0) at::set_num_threads(c.model.threads);  // 0: torch's default
  const auto& svc = c.service;
  // The evaluator's metrics: its own (queue, latency, λ) and the RPC ones.
  auto& registry = wq::metrics::Registry::Default();
  std::vector<std::shared_ptr<grpc::Channel>> actors;
  for (const std::string& addr : svc.actor_addresses) {
    auto ch = wq::net::MakeChannelFromConfig(svc, addr, &registry);
    if (!ch.ok()) return Fail(ch.status());
    actors.push_back(*ch);
  }
  auto learner = wq::net::MakeChannelFromConfig(svc, svc.learner_address, &registry);
  if (!learner.ok()) return Fail(learner.status());
  auto node = wq::evaluator::EvaluatorNode::Create(c, svc.evaluator_address, &registry, *learner,
                                                   actors, svc.actor_addresses);
  if (!node.ok()) return Fail(node.status());
  wq::metrics::MetricsServer metrics(&registry, flags->metrics);
  if (auto s = metrics.Start(); !s.ok()) return Fail(s);
  if (auto s = (*node)->Start(); !s.ok()) return Fail(s);
  wq::net::GrpcServer& server = (*node)->server();
  std::cout << "evaluator_port=" << server.port() << "\nmetrics_port=" << metrics.port()
            << std::endl;
  std::cerr << "windquant-evaluator: serving on " << server.address() << ", /metrics on port "
            << metrics.port() << std::endl;
  wq::net::SignalWaiter::Wait();
  (*node)->Stop();
  metrics.Stop();
  return 0;
}
