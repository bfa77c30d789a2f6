// windquant-evaluator's role (service_roles.h).
#include <memory>
#include <string>
#include <vector>

#include "common/base/status_macros.h"
#include "common/net/channel.h"
#include "evaluator/evaluator_node.h"
#include "job/node_options.h"
#include "job/service_roles.h"
#include "job/service_run_config.h"

namespace windquant::job {
namespace {

constexpr char kUsage[] =
    "usage: windquant-evaluator --config run.yaml [--set key=value]... [--metrics-port N]\n"
    "Serves windquant.v1.Evaluator on service.evaluator_address; drives the\n"
    "actors of service.actor_addresses (stage-major).\n"
    "Prints evaluator_port=<port> and metrics_port=<port>.\n";

class EvaluatorRoleService : public service::Service {
 public:
  static absl::StatusOr<std::unique_ptr<service::Service>> Create(const config::RunConfig& c,
                                                                  metrics::Registry* registry,
                                                                  const base::LogSink& log) {
    const auto& svc = c.service;
    std::vector<std::shared_ptr<grpc::Channel>> actors;
    for (const std::string& addr : svc.actor_addresses) {
      WQ_ASSIGN_OR_RETURN(auto ch, net::MakeChannelFromConfig(svc, addr, registry));
      actors.push_back(std::move(ch));
    }
    WQ_ASSIGN_OR_RETURN(auto learner,
                        net::MakeChannelFromConfig(svc, svc.learner_address, registry));
    auto s = std::make_unique<EvaluatorRoleService>();
    WQ_ASSIGN_OR_RETURN(s->node_, evaluator::EvaluatorNode::Create(
                                      EvaluatorNodeOptionsFrom(c), svc.evaluator_address, registry,
                                      log, learner, actors, svc.actor_addresses));
    return s;
  }
  absl::Status Start() override { return node_->Start(); }
  int port() const override { return node_->server().port(); }
  void Stop() override { node_->Stop(); }

 private:
  std::unique_ptr<evaluator::EvaluatorNode> node_;
};

}  // namespace

service::ServiceMainOptions EvaluatorRole() {
  return {"windquant-evaluator", "evaluator_port", kUsage,
          RunConfigLoader(&EvaluatorRoleService::Create)};
}

}  // namespace windquant::job
