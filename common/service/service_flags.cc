#include "common/service/service_flags.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/location_check.h"
#include "common/base/status_macros.h"
#include "common/config/this_machine.h"

namespace windquant::service {

absl::StatusOr<ServiceFlags> ParseServiceFlags(int argc, char** argv) {
  ServiceFlags flags;
  std::string path;
  std::vector<std::string> overrides;
  int metrics_port = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const std::string& name) -> absl::StatusOr<std::string> {
      if (absl::StartsWith(a, name + "=")) return a.substr(name.size() + 1);
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(name, ": needs a value"));
      return std::string(argv[++i]);
    };
    if (a == "--help" || a == "-h") {
      flags.help = true;
      return flags;
    } else if (a == "--config" || absl::StartsWith(a, "--config=")) {
      if (!path.empty()) return absl::InvalidArgumentError("--config: given more than once");
      WQ_ASSIGN_OR_RETURN(path, value("--config"));
      if (path.empty()) return absl::InvalidArgumentError("--config: empty value");
    } else if (a == "--set" || absl::StartsWith(a, "--set=")) {
      WQ_ASSIGN_OR_RETURN(std::string o, value("--set"));
      overrides.push_back(o);
    } else if (a == "--metrics-port" || absl::StartsWith(a, "--metrics-port=")) {
      if (metrics_port >= 0) {
        return absl::InvalidArgumentError("--metrics-port: given more than once");
      }
      WQ_ASSIGN_OR_RETURN(std::string p, value("--metrics-port"));
      if (!absl::SimpleAtoi(p, &metrics_port) || metrics_port < 0 || metrics_port > 65535) {
        return absl::InvalidArgumentError(
            absl::StrCat("--metrics-port: '", p, "' is not a port in [0, 65535]"));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", a, " (see --help)"));
    }
  }
  if (path.empty()) return absl::InvalidArgumentError("--config: required");
  WQ_ASSIGN_OR_RETURN(flags.config, config::LoadRunConfig(path, overrides));
  // A device or more threads than the machine has: one line now, before any work.
  WQ_RETURN_IF_ERROR(config::CheckThisMachine(flags.config.model));
  // Every role opens the model folder and writes under output.dir: a mistyped path is
  // one line now, not a failure after the other services connected.
  WQ_RETURN_IF_ERROR(base::CheckInputDir(flags.config.model.dir, "model.dir"));
  WQ_RETURN_IF_ERROR(base::CheckOutputParent(flags.config.output.dir, "output.dir"));
  WQ_RETURN_IF_ERROR(metrics::ParseMetricsAddress(flags.config.service.metrics_address,
                                                  "service.metrics_address", &flags.metrics));
  if (metrics_port >= 0) flags.metrics.port = metrics_port;
  return flags;
}

absl::StatusOr<std::pair<int, int>> ResolveStageReplica(const config::ServiceConfig& service,
                                                        const std::string& pod_ordinal) {
  const int stages = service.stages, replicas = service.replicas;
  if (service.stage >= 0 && service.replica >= 0) {
    if (service.stage >= stages || service.replica >= replicas) {
      return absl::InvalidArgumentError(absl::StrCat("service.stage/replica: ", service.stage, "/",
                                                     service.replica, " outside ", stages,
                                                     " stages x ", replicas, " replicas"));
    }
    return std::make_pair(service.stage, service.replica);
  }
  if (pod_ordinal.empty()) {
    return absl::InvalidArgumentError(
        "actor: set service.stage and service.replica, or the env var WQ_POD_ORDINAL");
  }
  int ordinal = -1;
  if (!absl::SimpleAtoi(pod_ordinal, &ordinal) || ordinal < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("WQ_POD_ORDINAL: '", pod_ordinal, "' is not a non-negative integer"));
  }
  if (ordinal >= stages * replicas) {
    return absl::InvalidArgumentError(absl::StrCat("WQ_POD_ORDINAL: ", ordinal, " >= ", stages,
                                                   " stages x ", replicas, " replicas"));
  }
  return std::make_pair(ordinal % stages, ordinal / stages);
}

}  // namespace windquant::service
