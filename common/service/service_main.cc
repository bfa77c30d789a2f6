#include "common/service/service_main.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/model/torch_threads.h"
#include "common/net/signal_waiter.h"

namespace windquant::service {

int RunServiceMain(int argc, char** argv, const ServiceMainOptions& options) {
  net::SignalWaiter::BlockTerminationSignals();
  auto fail = [&](const absl::Status& s, int code) {
    std::cerr << options.name << ": " << s.message() << std::endl;
    return code;
  };
  absl::StatusOr<ServiceFlags> flags = ParseServiceFlags(argc, argv);
  if (!flags.ok()) return fail(flags.status(), 2);
  if (flags->help) {
    std::cout << options.usage
              << "/metrics (Prometheus text) on service.metrics_address, its port\n"
                 "overridden by --metrics-port (0 = a free one). Exit codes: 0 after\n"
                 "SIGTERM/SIGINT, 2 for bad flags or config, 1 when starting fails.\n";
    return 0;
  }
  absl::StatusOr<ServiceSettings> settings = options.load(*flags);
  if (!settings.ok()) return fail(settings.status(), 2);
  if (flags->metrics_port >= 0) settings->metrics.port = flags->metrics_port;
  model::SetTorchThreads(settings->threads);  // 0: torch's default
  metrics::Registry& registry = metrics::Registry::Default();
  const base::LogSink log = [](const std::string& line) { std::cerr << line << std::endl; };
  absl::StatusOr<std::unique_ptr<Service>> service = settings->create(&registry, log);
  if (!service.ok()) {
    return fail(service.status(), absl::IsInvalidArgument(service.status()) ? 2 : 1);
  }
  metrics::MetricsServer metrics(&registry, settings->metrics);
  if (absl::Status s = metrics.Start(); !s.ok()) return fail(s, 1);
  if (absl::Status s = (*service)->Start(); !s.ok()) {
    (*service)->Stop();
    return fail(s, 1);
  }
  std::cout << options.port_key << "=" << (*service)->port() << "\nmetrics_port=" << metrics.port()
            << std::endl;
  log(absl::StrCat(options.name, ": serving on port ", (*service)->port(), ", /metrics on port ",
                   metrics.port()));
  net::SignalWaiter::Wait();
  (*service)->Stop();
  metrics.Stop();
  return 0;
}

}  // namespace windquant::service
