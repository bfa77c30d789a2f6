#include "job/service_run_config.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/location_check.h"
#include "common/base/status_macros.h"
#include "common/config/this_machine.h"
#include "common/metrics/http_server.h"
#include "common/transport/tensor_pipes.h"

namespace windquant::job {

service::ServiceLoader RunConfigLoader(RoleFactory create) {
  return [create = std::move(create)](
             const service::ServiceFlags& flags) -> absl::StatusOr<service::ServiceSettings> {
    WQ_ASSIGN_OR_RETURN(config::RunConfig c, config::LoadRunConfig(flags.config, flags.overrides));
    // A device or more threads than the machine has: one line now, before any work.
    WQ_RETURN_IF_ERROR(config::CheckThisMachine(c.model));
    WQ_ASSIGN_OR_RETURN(
        const transport::PipeKind pipe,
        transport::ParseHiddenStates("service.hidden_states", c.service.hidden_states));
    WQ_RETURN_IF_ERROR(
        transport::CheckPipeKind("service.hidden_states", pipe, c.model.compute.device));
    // Every role opens the model folder and writes under output.dir: a mistyped path is
    // one line now, not a failure after the other services connected.
    WQ_RETURN_IF_ERROR(base::CheckInputDir(c.model.dir, "model.dir"));
    WQ_RETURN_IF_ERROR(base::CheckOutputParent(c.output.dir, "output.dir"));
    service::ServiceSettings settings;
    WQ_RETURN_IF_ERROR(metrics::ParseMetricsAddress(c.service.metrics_address,
                                                    "service.metrics_address", &settings.metrics));
    settings.threads = c.model.threads;
    settings.create = [create, config = std::make_shared<const config::RunConfig>(std::move(c))](
                          metrics::Registry* registry, const base::LogSink& log) {
      return create(*config, registry, log);
    };
    return settings;
  };
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

}  // namespace windquant::job
