// Flags shared by the windquant-actor/-evaluator/-learner mains:
//   --config FILE      the run's YAML (required)
//   --set key=value    override (repeatable)
//   --metrics-port N   port of /metrics (overrides the port of service.metrics_address;
//                      0 = a free one, printed as metrics_port=<port>)
//   --help
// Thread-compatible.
#ifndef WINDQUANT_COMMON_SERVICE_SERVICE_FLAGS_H_
#define WINDQUANT_COMMON_SERVICE_SERVICE_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/config/run_config.h"
#include "common/metrics/http_server.h"

namespace windquant::service {

struct ServiceFlags {
  bool help = false;
  config::RunConfig config;
  // service.metrics_address, its port replaced by --metrics-port when given.
  metrics::MetricsServerOptions metrics;
};

// INVALID_ARGUMENT naming the flag or the config key.
absl::StatusOr<ServiceFlags> ParseServiceFlags(int argc, char** argv);

// Stage and replica of an actor: from service.stage/replica when both are set
// (>= 0), else from `pod_ordinal` (the env var WQ_POD_ORDINAL; empty = unset):
// stage = ordinal % stages, replica = ordinal / stages. INVALID_ARGUMENT with
// one line when missing, malformed or out of range.
absl::StatusOr<std::pair<int, int>> ResolveStageReplica(const config::ServiceConfig& service,
                                                        const std::string& pod_ordinal);

}  // namespace windquant::service

#endif  // WINDQUANT_COMMON_SERVICE_SERVICE_FLAGS_H_
