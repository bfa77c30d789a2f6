// windquant-learner's role (service_roles.h).
#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/base/status_macros.h"
#include "common/net/channel.h"
#include "common/quant/table_fingerprint.h"
#include "common/store/s3_environment.h"
#include "job/learner_options.h"
#include "job/service_roles.h"
#include "job/service_run_config.h"
#include "learner/learner_node.h"
#include "learner/run_publisher.h"

namespace windquant::job {
namespace {

// What the store has not taken yet gets most of the grace period
// (terminationGracePeriodSeconds 60 in deploy/k8s).
constexpr absl::Duration kStoreDrain = absl::Seconds(40);

constexpr char kUsage[] =
    "usage: windquant-learner --config run.yaml [--set key=value]... [--metrics-port N]\n"
    "Serves windquant.v1.Learner on service.learner_address; resumes from\n"
    "output.dir/checkpoint when present. Sends its candidate plans (the\n"
    "stage's Lagrangian reference, the greedy plan after each update) to the\n"
    "evaluator at service.evaluator_address. When the run is done, writes its\n"
    "result (plan, report and, with output.export, the quantized model) to\n"
    "output.dir/final. With output.store (file:// or s3://; S3 credentials from\n"
    "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION), pushes\n"
    "every checkpoint, every new best plan and the result under the run's id, and\n"
    "on an empty output.dir resumes from the run's newest checkpoint there.\n"
    "In the quality-target mode (lagrange.prices: target) the run first bisects\n"
    "over bits to lagrange.epsilon with the Lagrangian plan through the evaluator\n"
    "and starts RL there (kept in output.dir/rl_start.json).\n"
    "Prints learner_port=<port> and metrics_port=<port>.\n";

// The run's table fingerprint from the config; "" (any) when it cannot be
// computed. Actors may hold fits of another calibration or build in their
// cache: with the run's fingerprint known, those are refused, not merged.
std::string ExpectedTableFingerprint(const config::RunConfig& c, const base::LogSink& log) {
  absl::StatusOr<std::string> fp = quant::RunTableFingerprint(c.model.dir, c.quant, c.calibration);
  if (fp.ok()) return *fp;
  log(absl::StrCat("windquant-learner: stage tables not checked against the run's fingerprint: ",
                   fp.status().message()));
  return "";
}

class LearnerRoleService : public service::Service {
 public:
  static absl::StatusOr<std::unique_ptr<service::Service>> Create(const config::RunConfig& c,
                                                                  const std::string& commit,
                                                                  metrics::Registry* registry,
                                                                  const base::LogSink& log) {
    auto s = std::make_unique<LearnerRoleService>();
    // The artifact store: the run's results, and its checkpoint when this disk is lost.
    if (!c.output.store.empty()) {
      learner::RunPublisherOptions po = RunPublisherOptionsFrom(c);
      po.s3 = store::S3OptionsFromEnvironment();
      po.log = log;
      WQ_ASSIGN_OR_RETURN(s->publisher_, learner::RunPublisher::Open(std::move(po)));
    }
    WQ_ASSIGN_OR_RETURN(s->evaluator_, net::MakeChannelFromConfig(
                                           c.service, c.service.evaluator_address, registry));
    learner::LearnerNodeOptions node_options = LearnerNodeOptionsFrom(c, /*write_final=*/true);
    node_options.publisher = s->publisher_.get();
    node_options.expected_table_fingerprint = ExpectedTableFingerprint(c, log);
    node_options.build_commit = commit;
    // The export of the result is pulled from the actors (service.actor_addresses,
    // stage-major).
    for (size_t i = 0; i < c.service.actor_addresses.size(); ++i) {
      const size_t stage = i / static_cast<size_t>(std::max(1, c.service.replicas));
      if (node_options.export_actors.size() <= stage) node_options.export_actors.emplace_back();
      const std::string& address = c.service.actor_addresses[i];
      WQ_ASSIGN_OR_RETURN(auto channel, net::MakeChannelFromConfig(c.service, address, registry));
      node_options.export_actors[stage].channels.push_back(std::move(channel));
      node_options.export_actors[stage].names.push_back(absl::StrCat("actor ", address));
    }
    WQ_ASSIGN_OR_RETURN(
        s->node_, learner::LearnerNode::Create(std::move(node_options), c.service.learner_address,
                                               registry, log));
    return s;
  }
  absl::Status Start() override {
    node_->Connect(evaluator_);
    return absl::OkStatus();
  }
  int port() const override { return node_->server().port(); }
  void Stop() override {
    node_->Stop();
    if (publisher_ != nullptr) publisher_->Stop(kStoreDrain);
  }

 private:
  std::unique_ptr<learner::RunPublisher> publisher_;
  std::shared_ptr<grpc::Channel> evaluator_;
  std::unique_ptr<learner::LearnerNode> node_;
};

}  // namespace

service::ServiceMainOptions LearnerRole(const std::string& build_commit) {
  return {"windquant-learner", "learner_port", kUsage,
          RunConfigLoader([build_commit](const config::RunConfig& c, metrics::Registry* registry,
                                         const base::LogSink& log) {
            return LearnerRoleService::Create(c, build_commit, registry, log);
          })};
}

}  // namespace windquant::job
