// windquant-learner: merges the unit table, runs PPO, publishes policies,
// keeps the best plan and checkpoints (DESIGN.md section 5).
#include <cstdlib>
#include <iostream>

#include <ATen/Parallel.h>

#include "actor/service_flags.h"
#include "common/metrics/http_server.h"
#include "common/metrics/metric_names.h"
#include "common/net/server.h"
#include "common/net/signal_waiter.h"
#include "learner/learner_core.h"
#include "learner/learner_service.h"

namespace wq = windquant;

int main(int argc, char** argv) {
  wq::net::SignalWaiter::BlockTerminationSignals();
  auto flags = wq::actor::ParseServiceFlags(argc, argv);
  if (!flags.ok()) {
    std::cerr << "windquant-learner: " << flags.status().message() << "\n";
    return 2;
  }
  if (flags->help) {
    std::cout << "usage: windquant-learner --config run.yaml [--set key=value]... [--metrics-port N]\n"
                 "Serves windquant.v1.Learner on service.learner_address; resumes from\n"
                 "output.dir/checkpoint when present. Prints metrics_port=<port>.\n"
                 "/metrics (Prometheus text) on service.metrics_address, its port\n"
                 "overridden by --metrics-port (0 = a free one).\n";
    return 0;
  }
  const wq::config::RunConfig& c = flags->config;
  if (c.model.threads > 0) at::set_num_threads(c.model.threads);  // 0: torch's default
  wq::metrics::MetricsServerOptions mo;
  if (auto s = wq::metrics::ParseMetricsAddress(c.service.metrics_address,
                                                "service.metrics_address", &mo);
      !s.ok()) {
    std::cerr << "windquant-learner: " << s.message() << "\n";
    return 2;
  }
  // The learner's metrics (windquant_learner_*) and the RPC ones.
  auto& registry = wq::metrics::Registry::Default();
  auto core = wq::learner::LearnerCore::Create(
      c, [](const std::string& line) { std::cerr << line << std::endl; }, &registry);
  if (!core.ok()) {
    std::cerr << "windquant-learner: " << core.status().message() << "\n";
    return 1;
  }
  wq::learner::LearnerService service(core->get(), &registry);
  auto options = wq::net::ServerOptionsFromConfig(c.service, c.service.learner_address);
  if (!options.ok()) {
    std::cerr << "windquant-learner: " << options.status().message() << "\n";
    return 2;
  }
  options->registry = &registry;
  wq::net::GrpcServer server(*options);
  server.AddService(&service, wq::v1::Learner::service_full_name());
  if (auto s = server.Start(); !s.ok()) {
    std::cerr << "windquant-learner: " << s.message() << "\n";
    return 1;
  }
  wq::metrics::MetricsServer metrics(&registry, mo);
  if (auto s = metrics.Start(); !s.ok()) {
    std::cerr << "windquant-learner: " << s.message() << "\n";
    return 1;
  }
  std::cerr << "windquant-learner: serving on " << server.address() << ", /metrics on port "
            << metrics.port() << std::endl;
  std::cout << "learner_port=" << server.port() << "\nmetrics_port=" << metrics.port()
            << std::endl;
  wq::net::SignalWaiter::Wait();
  service.BeginShutdown();
  server.Drain(absl::Now() + absl::Seconds(5));
  metrics.Stop();
  return 0;
}
