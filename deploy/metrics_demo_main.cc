// windquant-metrics-demo: a process that serves the windquant metric catalogue on /metrics,
// exactly as the learner, evaluator and actor processes do (RegisterWindquantMetrics +
// MetricsServer), and nothing else. deploy/grafana/check_dashboard.py scrapes it to prove
// that every metric the Grafana dashboard queries is really exported.
//
// Usage: windquant-metrics-demo [--address 127.0.0.1] [--port 0]
// Prints "metrics_port=<port>" on stdout once serving, then serves until SIGTERM/SIGINT.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "common/metrics/http_server.h"
#include "common/metrics/metric_names.h"
#include "common/metrics/registry.h"

namespace {

constexpr char kUsage[] =
    "usage: windquant-metrics-demo [--address ADDR] [--port PORT]\n"
    "Serves the windquant metric catalogue on http://ADDR:PORT/metrics (and /healthz)\n"
    "until SIGTERM or SIGINT. Prints \"metrics_port=<port>\" once serving.\n"
    "  --address ADDR  IPv4/IPv6 literal to bind (default 127.0.0.1)\n"
    "  --port PORT     port to bind; 0 = pick a free one (default 0)\n";

int Fail(const std::string& message) {
  std::cerr << "windquant-metrics-demo: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  windquant::metrics::MetricsServerOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    std::string name = arg, value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Fail("flag " + arg + " needs a value");
    }
    if (name == "--address") {
      options.address = value;
    } else if (name == "--port") {
      if (!absl::SimpleAtoi(value, &options.port) || options.port < 0 || options.port > 65535) {
        return Fail("--port: expected an integer in [0, 65535], got '" + value + "'");
      }
    } else {
      return Fail("unknown flag " + name + " (see --help)");
    }
  }

  // Block the stop signals before any thread starts so that only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  windquant::metrics::Registry registry;
  if (absl::Status s = windquant::metrics::RegisterWindquantMetrics(registry); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  windquant::metrics::MetricsServer server(&registry, options);
  if (absl::Status s = server.Start(); !s.ok()) return Fail(std::string(s.message()));
  std::cout << "metrics_port=" << server.port() << std::endl;

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server.Stop();
  return 0;
}
