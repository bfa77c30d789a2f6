// Flags shared by the windquant-actor/-evaluator/-learner mains, parsed as given:
//   --config FILE      the run's YAML (required)
//   --set key=value    override (repeatable)
//   --metrics-port N   port of /metrics (overrides the port of the run's metrics address;
//                      0 = a free one, printed as metrics_port=<port>)
//   --help
// What the config says is read by the main's `load` (service_main.h), not here: this
// library knows no run config. Thread-compatible.
#ifndef WINDQUANT_COMMON_SERVICE_SERVICE_FLAGS_H_
#define WINDQUANT_COMMON_SERVICE_SERVICE_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace windquant::service {

struct ServiceFlags {
  bool help = false;
  std::string config;                  // --config (non-empty unless help)
  std::vector<std::string> overrides;  // --set, in the order given
  int metrics_port = -1;               // --metrics-port in [0, 65535]; -1 = not given
};

// INVALID_ARGUMENT naming the flag. --help stops the parse (nothing else is checked).
absl::StatusOr<ServiceFlags> ParseServiceFlags(int argc, char** argv);

}  // namespace windquant::service

#endif  // WINDQUANT_COMMON_SERVICE_SERVICE_FLAGS_H_
