// windquant-learner: merges the unit table, runs PPO, publishes policies,
// keeps the best plan and checkpoints (DESIGN.md section 5).
#include <cstdlib>
#include <iostream>

#include <ATen/Parallel.h>

#include "common/metrics/http_server.h"
#include "common/net/channel.h"
#include "common/net/signal_waiter.h"
#include "common/quant/table_fingerprint.h"
#include "common/service/service_flags.h"
#include "common/store/s3_environment.h"
#include "learner/learner_node.h"
#include "learner/run_publisher.h"

namespace wq = windquant;

namespace {
constexpr absl::Duration kStoreDrain = absl::Seconds(40);

// The run's table fingerprint from the config; "" (any) when it cannot be
// computed. Actors may hold fits of another calibration or build in their
// cache: with the run's fingerprint known, those are refused, not merged.
std::string ExpectedTableFingerprint(const wq::config::RunConfig& c) {
  absl::StatusOr<std::string> fp = wq::quant::RunTableFingerprint(c);
  if (fp.ok()) return *fp;
  std::cerr << "windquant-learner: stage tables not checked against the run's fingerprint: "
            << fp.status().message() << std::endl;
  return "";
}
}  // namespace

int main(int argc, char** argv) {
  wq::net::SignalWaiter::BlockTerminationSignals();
  auto flags = wq::service::ParseServiceFlags(argc, argv);
  if (!flags.ok()) {
    std::cerr << "windquant-learner: " << flags.status().message() << "\n";
    return 2;
  }
  if (flags->help) {
    std::cout
        << "usage: windquant-learner --config run.yaml [--set key=value]... [--metrics-port N]\n"
           "Serves windquant.v1.Learner on service.learner_address; resumes from\n"
           "output.dir/checkpoint when present. Sends its candidate plans (the\n"
           "stage's Lagrangian reference, the greedy plan after each update) to the\n"
           "evaluator at service.evaluator_address. When the run is done, writes its\n"
           "result (plan, report and, with output.export, the quantized model) to\n"
           "output.dir/final. With output.store (file:// or s3://; S3 credentials from\n"
           "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION), pushes\n"
           "every checkpoint, every new best plan and the result under the run's id, and\n"
           "on an empty output.dir resumes from the run's newest checkpoint there.\n"
           "Prints metrics_port=<port>.\n"
           "/metrics (Prometheus text) on service.metrics_address, its port\n"
           "overridden by --metrics-port (0 = a free one).\n";
    return 0;
  }
  const wq::config::RunConfig& c = flags->config;
  if (c.model.threads > 0) at::set_num_threads(c.model.threads);  // 0: torch's default
  // The learner's metrics (windquant_learner_*) and the RPC ones.
  auto& registry = wq::metrics::Registry::Default();
  auto log = [](const std::string& line) { std::cerr << line << std::endl; };
  // The artifact store: the run's results, and its checkpoint when this disk is lost.
  std::unique_ptr<wq::learner::RunPublisher> publisher;
  if (!c.output.store.empty()) {
    wq::learner::RunPublisherOptions po;
    po.s3 = wq::store::S3OptionsFromEnvironment();
    po.log = log;
    auto opened = wq::learner::RunPublisher::Open(c, po);
    if (!opened.ok()) {
      std::cerr << "windquant-learner: " << opened.status().message() << "\n";
      return 1;
    }
    publisher = *std::move(opened);
  }
  wq::learner::LearnerNodeOptions node_options;
  node_options.publisher = publisher.get();
  node_options.finish_run = true;
  node_options.expected_table_fingerprint = ExpectedTableFingerprint(c);
  auto node =
      wq::learner::LearnerNode::Create(c, c.service.learner_address, &registry, log, node_options);
  if (!node.ok()) {
    std::cerr << "windquant-learner: " << node.status().message() << "\n";
    return 1;
  }
  auto evaluator_channel =
      wq::net::MakeChannelFromConfig(c.service, c.service.evaluator_address, &registry);
  if (!evaluator_channel.ok()) {
    std::cerr << "windquant-learner: " << evaluator_channel.status().message() << "\n";
    return 2;
  }
  wq::metrics::MetricsServer metrics(&registry, flags->metrics);
  if (auto s = metrics.Start(); !s.ok()) {
    std::cerr << "windquant-learner: " << s.message() << "\n";
    return 1;
  }
  wq::net::GrpcServer& server = (*node)->server();
  std::cerr << "windquant-learner: serving on " << server.address() << ", /metrics on port "
            << metrics.port() << std::endl;
  (*node)->Connect(*evaluator_channel);
  std::cout << "learner_port=" << server.port() << "\nmetrics_port=" << metrics.port() << std::endl;
  wq::net::SignalWaiter::Wait();
  (*node)->Stop();
  // What the store has not taken yet gets most of the grace period
  // (terminationGracePeriodSeconds 60 in deploy/k8s).
  if (publisher != nullptr) publisher->Stop(kStoreDrain);
  metrics.Stop();
  return 0;
}
