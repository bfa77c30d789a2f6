// windquant-actor: stage s of replica r (service.stage/replica or the pod
// ordinal WQ_POD_ORDINAL): loads its layers, serves windquant.v1.Actor
// (Forward, Calibrate, FinishCalibration), registers its unit table with the
// learner and runs rollout workers (DESIGN.md section 5). The process's
// skeleton (flags, /metrics, signals, exit codes) is common/service/service_main.h.
#include <cstdlib>
#include <random>

#include "absl/strings/str_cat.h"
#include "actor/actor_node.h"
#include "common/base/status_macros.h"
#include "common/net/channel.h"
#include "common/service/service_main.h"
#include "job/node_options.h"
#include "job/service_run_config.h"

namespace wq = windquant;

namespace {

constexpr char kUsage[] =
    "usage: windquant-actor --config run.yaml [--set key=value]... [--metrics-port N]\n"
    "Stage/replica from service.stage + service.replica, or from WQ_POD_ORDINAL\n"
    "(stage = ordinal % stages, replica = ordinal / stages). Serves on\n"
    "service.actor_addresses[stage * replicas + replica].\n"
    "Prints actor_port=<port> and metrics_port=<port>.\n";

class ActorService : public wq::service::Service {
 public:
  static absl::StatusOr<std::unique_ptr<wq::service::Service>> Create(
      const wq::config::RunConfig& c, wq::metrics::Registry* registry,
      const wq::base::LogSink& log) {
    const auto& svc = c.service;
    const char* ordinal = std::getenv("WQ_POD_ORDINAL");
    WQ_ASSIGN_OR_RETURN(auto sr, wq::job::ResolveStageReplica(svc, ordinal ? ordinal : ""));
    const int stage = sr.first, replica = sr.second;
    const int index = stage * svc.replicas + replica;
    if (index >= static_cast<int>(svc.actor_addresses.size())) {
      return absl::InvalidArgumentError(absl::StrCat("service.actor_addresses: no entry ", index,
                                                     " for stage ", stage, " replica ", replica));
    }
    auto s = std::make_unique<ActorService>();
    WQ_ASSIGN_OR_RETURN(auto learner,
                        wq::net::MakeChannelFromConfig(svc, svc.learner_address, registry));
    WQ_ASSIGN_OR_RETURN(s->evaluator_,
                        wq::net::MakeChannelFromConfig(svc, svc.evaluator_address, registry));
    WQ_ASSIGN_OR_RETURN(
        s->node_, wq::actor::ActorNode::Create(wq::job::ActorNodeOptionsFrom(c), stage, replica,
                                               svc.actor_addresses[index], registry, log, learner));
    return s;
  }
  absl::Status Start() override { return node_->Connect(evaluator_, std::random_device{}()); }
  int port() const override { return node_->server().port(); }
  void Stop() override { node_->Stop(); }

 private:
  std::shared_ptr<grpc::Channel> evaluator_;
  std::unique_ptr<wq::actor::ActorNode> node_;
};

}  // namespace

int main(int argc, char** argv) {
  return wq::service::RunServiceMain(
      argc, argv,
      {"windquant-actor", "actor_port", kUsage, wq::job::RunConfigLoader(&ActorService::Create)});
}
