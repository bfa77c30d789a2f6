// The skeleton of the three service mains (windquant-actor, -evaluator, -learner): a
// main names its role, how to read its config and how to build its node, and
// RunServiceMain does the rest, in this order: block SIGTERM/SIGINT (before any thread),
// parse the flags (service_flags.h; --help prints the usage), `load` the config (the
// mains' is job/service_run_config.h: the run config), torch's thread count, build the
// service with the default metrics registry, start /metrics, start the service, print
// `<port_key>=<port>` and `metrics_port=<port>` on stdout, wait for SIGTERM or SIGINT,
// stop the service, stop /metrics. The skeleton knows no run config: what it needs of
// one comes back from `load` as ServiceSettings.
//
// Exit codes, the same for every service:
//   0  after SIGTERM or SIGINT (the service drained), or after --help;
//   2  bad flags or config: nothing was started;
//   1  a failure while starting (loading, binding, connecting).
// Every error is one line on stderr, "<name>: <message>".
// Health (grpc.health.v1) is served by each role's GrpcServer (common/net/server.h).
#ifndef WINDQUANT_COMMON_SERVICE_SERVICE_MAIN_H_
#define WINDQUANT_COMMON_SERVICE_SERVICE_MAIN_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/metrics/http_server.h"
#include "common/metrics/registry.h"
#include "common/service/service_flags.h"

namespace windquant::service {

// A role's running node, as the skeleton drives it. Called from the main thread only.
class Service {
 public:
  virtual ~Service() = default;
  // Starts serving and connects to the peers, once /metrics is up.
  virtual absl::Status Start() = 0;
  // The port the service listens on (printed after Start).
  virtual int port() const = 0;
  // Stops serving and drains; returns when the service has stopped.
  virtual void Stop() = 0;
};

// What a role's config gives the skeleton, from ServiceMainOptions::load.
struct ServiceSettings {
  int threads = 0;  // torch's intra-op threads; 0 = torch's default
  // /metrics; --metrics-port, when given, replaces its port.
  metrics::MetricsServerOptions metrics;
  // Builds the role's node from the loaded config (nothing served yet). An error exits
  // 1, an INVALID_ARGUMENT one (a config value the role cannot use) exits 2.
  std::function<absl::StatusOr<std::unique_ptr<Service>>(metrics::Registry* registry,
                                                         const base::LogSink& log)>
      create;
};

// Reads the config the flags name (--config, --set). Any error exits 2: nothing started.
using ServiceLoader = std::function<absl::StatusOr<ServiceSettings>(const ServiceFlags& flags)>;

struct ServiceMainOptions {
  std::string name;      // "windquant-learner": the binary, the prefix of every error
  std::string port_key;  // "learner_port": printed as <port_key>=<port>
  std::string usage;     // --help text
  ServiceLoader load;
};

// The whole main; returns the process's exit code (above).
int RunServiceMain(int argc, char** argv, const ServiceMainOptions& options);

}  // namespace windquant::service

#endif  // WINDQUANT_COMMON_SERVICE_SERVICE_MAIN_H_
