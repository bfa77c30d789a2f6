// windquant-learner: merges the unit table, runs PPO, publishes policies,
// keeps the best plan and checkpoints (DESIGN.md section 5).
#include <cstdlib>
#include <iostream>

#include <ATen/Parallel.h>

#include "common/metrics/http_server.h"
#include "common/net/channel.h"
#include "common/net/signal_waiter.h"
#include "common/service/service_flags.h"
#include "learner/learner_node.h"

namespace wq = windquant;

int main(int argc, char** argv) {
  wq::net::SignalWaiter::BlockTerminationSignals();
  auto flags = wq::service::ParseServiceFlags(argc, argv);
  if (!flags.ok()) {
    std::cerr << "windquant-learner: " << flags.status().message() << "\n";
    return 2;
  }
  if (flags->help) {
    std::cout
        << "usage: windquant-learner --config run.yaml [--set key=value]... [--metrics-port N]\n"
           "Serves windquant.v1.Learner on service.learner_address; resumes from\n"
           "output.dir/checkpoint when present. Sends its candidate plans (the\n"
           "stage's Lagrangian reference, the greedy plan after each update) to the\n"
           "evaluator at service.evaluator_address. Prints metrics_port=<port>.\n"
           "/metrics (Prometheus text) on service.metrics_address, its port\n"
           "overridden by --metrics-port (0 = a free one).\n";
    return 0;
  }
  const wq::config::RunConfig& c = flags->config;
  if (c.model.threads > 0) at::set_num_threads(c.model.threads);  // 0: torch's default
  // The learner's metrics (windquant_learner_*) and the RPC ones.
  auto& registry = wq::metrics::Registry::Default();
  auto node = wq::learner::LearnerNode::Create(
      c, c.service.learner_address, &registry,
      [](const std::string& line) { std::cerr << line << std::endl; });
  if (!node.ok()) {
    std::cerr << "windquant-learner: " << node.status().message() << "\n";
    return 1;
  }
  auto evaluator_channel =
      wq::net::MakeChannelFromConfig(c.service, c.service.evaluator_address, &registry);
  if (!evaluator_channel.ok()) {
    std::cerr << "windquant-learner: " << evaluator_channel.status().message() << "\n";
    return 2;
  }
  wq::metrics::MetricsServer metrics(&registry, flags->metrics);
  if (auto s = metrics.Start(); !s.ok()) {
    std::cerr << "windquant-learner: " << s.message() << "\n";
    return 1;
  }
  wq::net::GrpcServer& server = (*node)->server();
  std::cerr << "windquant-learner: serving on " << server.address() << ", /metrics on port "
            << metrics.port() << std::endl;
  (*node)->Connect(*evaluator_channel);
  std::cout << "learner_port=" << server.port() << "\nmetrics_port=" << metrics.port() << std::endl;
  wq::net::SignalWaiter::Wait();
  (*node)->Stop();
  metrics.Stop();
  return 0;
}
