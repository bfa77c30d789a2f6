// windquant-evaluator: owns the evaluation data, embeddings and head, drives
// calibration and plan evaluation through the actors, updates λ and reports
// to the learner (DESIGN.md section 5). The process's skeleton (flags,
// /metrics, signals, exit codes) is common/service/service_main.h.
#include <vector>

#include "common/base/status_macros.h"
#include "common/net/channel.h"
#include "common/service/service_main.h"
#include "evaluator/evaluator_node.h"
#include "job/node_options.h"
#include "job/service_run_config.h"

namespace wq = windquant;

namespace {

constexpr char kUsage[] =
    "usage: windquant-evaluator --config run.yaml [--set key=value]... [--metrics-port N]\n"
    "Serves windquant.v1.Evaluator on service.evaluator_address; drives the\n"
    "actors of service.actor_addresses (stage-major).\n"
    "Prints evaluator_port=<port> and metrics_port=<port>.\n";

class EvaluatorService : public wq::service::Service {
 public:
  static absl::StatusOr<std::unique_ptr<wq::service::Service>> Create(
      const wq::config::RunConfig& c, wq::metrics::Registry* registry,
      const wq::base::LogSink& log) {
    const auto& svc = c.service;
    std::vector<std::shared_ptr<grpc::Channel>> actors;
    for (const std::string& addr : svc.actor_addresses) {
      WQ_ASSIGN_OR_RETURN(auto ch, wq::net::MakeChannelFromConfig(svc, addr, registry));
      actors.push_back(std::move(ch));
    }
    WQ_ASSIGN_OR_RETURN(auto learner,
                        wq::net::MakeChannelFromConfig(svc, svc.learner_address, registry));
    auto s = std::make_unique<EvaluatorService>();
    WQ_ASSIGN_OR_RETURN(s->node_, wq::evaluator::EvaluatorNode::Create(
                                      wq::job::EvaluatorNodeOptionsFrom(c), svc.evaluator_address,
                                      registry, log, learner, actors, svc.actor_addresses));
    return s;
  }
  absl::Status Start() override { return node_->Start(); }
  int port() const override { return node_->server().port(); }
  void Stop() override { node_->Stop(); }

 private:
  std::unique_ptr<wq::evaluator::EvaluatorNode> node_;
};

}  // namespace

int main(int argc, char** argv) {
  return wq::service::RunServiceMain(argc, argv,
                                     {"windquant-evaluator", "evaluator_port", kUsage,
                                      wq::job::RunConfigLoader(&EvaluatorService::Create)});
}
