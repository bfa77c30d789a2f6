// windquant-actor's role (service_roles.h).
#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "actor/actor_node.h"
#include "common/base/status_macros.h"
#include "common/net/channel.h"
#include "job/node_options.h"
#include "job/service_roles.h"
#include "job/service_run_config.h"

namespace windquant::job {
namespace {

constexpr char kUsage[] =
    "usage: windquant-actor --config run.yaml [--set key=value]... [--metrics-port N]\n"
    "Stage/replica from service.stage + service.replica, or from WQ_POD_ORDINAL\n"
    "(stage = ordinal % stages, replica = ordinal / stages). Serves on\n"
    "service.actor_addresses[stage * replicas + replica].\n"
    "Prints actor_port=<port> and metrics_port=<port>.\n";

class ActorRoleService : public service::Service {
 public:
  static absl::StatusOr<std::unique_ptr<service::Service>> Create(const config::RunConfig& c,
                                                                  metrics::Registry* registry,
                                                                  const base::LogSink& log) {
    const auto& svc = c.service;
    const char* ordinal = std::getenv("WQ_POD_ORDINAL");
    WQ_ASSIGN_OR_RETURN(auto sr, ResolveStageReplica(svc, ordinal ? ordinal : ""));
    const int stage = sr.first, replica = sr.second;
    const int index = stage * svc.replicas + replica;
    if (index >= static_cast<int>(svc.actor_addresses.size())) {
      return absl::InvalidArgumentError(absl::StrCat("service.actor_addresses: no entry ", index,
                                                     " for stage ", stage, " replica ", replica));
    }
    auto s = std::make_unique<ActorRoleService>();
    WQ_ASSIGN_OR_RETURN(auto learner,
                        net::MakeChannelFromConfig(svc, svc.learner_address, registry));
    WQ_ASSIGN_OR_RETURN(
        s->node_, actor::ActorNode::Create(ActorNodeOptionsFrom(c), stage, replica,
                                           svc.actor_addresses[index], registry, log, learner));
    return s;
  }
  absl::Status Start() override { return node_->StartRollouts(std::random_device{}()); }
  int port() const override { return node_->server().port(); }
  void Stop() override { node_->Stop(); }

 private:
  std::unique_ptr<actor::ActorNode> node_;
};

}  // namespace

service::ServiceMainOptions ActorRole() {
  return {"windquant-actor", "actor_port", kUsage, RunConfigLoader(&ActorRoleService::Create)};
}

}  // namespace windquant::job
