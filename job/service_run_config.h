// The run config of a service main (windquant-actor, -evaluator, -learner): the `load`
// of the service-main skeleton (common/service/service_main.h) for a role built from a
// config::RunConfig, and the actor's stage and replica. The skeleton itself knows no
// run config; this is where the three mains' config handling lives, once.
// Thread-compatible.
#ifndef WINDQUANT_JOB_SERVICE_RUN_CONFIG_H_
#define WINDQUANT_JOB_SERVICE_RUN_CONFIG_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/config/run_config.h"
#include "common/metrics/registry.h"
#include "common/service/service_main.h"

namespace windquant::job {

// Builds a role's node from the run config (ServiceSettings::create's contract).
using RoleFactory = std::function<absl::StatusOr<std::unique_ptr<service::Service>>(
    const config::RunConfig& config, metrics::Registry* registry, const base::LogSink& log)>;

// The skeleton's `load`: --config with the --set overrides (config::LoadRunConfig), then,
// before any work, model.device and model.threads against this machine, model.dir (an
// existing folder), output.dir's parent, and service.metrics_address (the /metrics
// address; the skeleton applies --metrics-port). Torch's threads are model.threads;
// `create` gets the loaded config. Errors name the file or the key.
service::ServiceLoader RunConfigLoader(RoleFactory create);

// Stage and replica of an actor: from service.stage/replica when both are set
// (>= 0), else from `pod_ordinal` (the env var WQ_POD_ORDINAL; empty = unset):
// stage = ordinal % stages, replica = ordinal / stages. INVALID_ARGUMENT with
// one line when missing, malformed or out of range.
absl::StatusOr<std::pair<int, int>> ResolveStageReplica(const config::ServiceConfig& service,
                                                        const std::string& pod_ordinal);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_SERVICE_RUN_CONFIG_H_
