// windquant-learner: merges the unit table, runs PPO, publishes policies,
// keeps the best plan and checkpoints (DESIGN.md section 5).
#include <cstdlib>
#include <iostream>

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
    std::cout << "usage: windquant-learner --config run.yaml [--set key=value]...\n"
                 "Serves windquant.v1.Learner on service.learner_address; resumes from\n"
                 "output.dir/checkpoint when present. Prints metrics_port=<port>.\n";
    return 0;
  }
  const wq::config::RunConfig& c = flags->config;
  auto& registry = wq::metrics::Registry::Default();
  (void)wq::metrics::RegisterWindquantMetrics(registry);
  auto core = wq::learner::LearnerCore::Create(
      c, [](const std::string& line) { std::cerr << line << std::endl; });
  if (!core.ok()) {
    std::cerr << "windquant-learner: " << core.status().message() << "\n";
    return 1;
  }
  wq::learner::LearnerService service(core->get());
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
  wq::metrics::MetricsServerOptions mo;
  const std::string& ma = c.service.metrics_address;
  mo.address = ma.substr(0, ma.rfind(':'));
  mo.port = std::atoi(ma.substr(ma.rfind(':') + 1).c_str());
  wq::metrics::MetricsServer metrics(&registry, mo);
  // /metrics is best effort: a run goes on without it (the line says why).
  if (auto s = metrics.Start(); !s.ok()) {
    std::cerr << "windquant-learner: metrics disabled: " << s.message() << "\n";
  }
  std::cout << "learner_port=" << server.port() << "\nmetrics_port=" << metrics.port()
            << std::endl;
  wq::net::SignalWaiter::Wait();
  server.Drain(absl::Now() + absl::Seconds(10));
  metrics.Stop();
  return 0;
}
