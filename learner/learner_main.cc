// windquant-learner: merges the unit table, runs PPO, publishes policies,
// keeps the best plan and checkpoints (DESIGN.md section 5).
#include <cstdlib>
#include <iostream>

#include <ATen/Parallel.h>

#include "actor/service_flags.h"
#include "common/metrics/http_server.h"
#include "common/metrics/metric_names.h"
#include "common/net/canceller.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "common/net/signal_waiter.h"
#include "common/net/status_convert.h"
#include "learner/candidate_sender.h"
#include "learner/learner_core.h"
#include "learner/learner_service.h"
#include "windquant/v1/evaluator.grpc.pb.h"

namespace wq = windquant;

int main(int argc, char** argv) {
  wq::net::SignalWaiter::BlockTerminationSignals();
  auto flags = wq::actor::ParseServiceFlags(argc, argv);
  if (!flags.ok()) {
    std::cerr << "windquant-learner: " << flags.status().message() << "\n";
    return 2;
  }
  if (flags->help) {
    std::cout << "usage: windquant-learner --config run.yaml [--set key=value]... [--metrics-port N]\n"
                 "Serves windquant.v1.Learner on service.learner_address; resumes from\n"
                 "output.dir/checkpoint when present. Sends its candidate plans (the\n"
                 "stage's Lagrangian reference, the greedy plan after each update) to the\n"
                 "evaluator at service.evaluator_address. Prints metrics_port=<port>.\n"
                 "/metrics (Prometheus text) on service.metrics_address, its port\n"
                 "overridden by --metrics-port (0 = a free one).\n";
    return 0;
  }
  const wq::config::RunConfig& c = flags->config;
  if (c.model.threads > 0) at::set_num_threads(c.model.threads);  // 0: torch's default
  // The learner's metrics (windquant_learner_*) and the RPC ones.
  auto& registry = wq::metrics::Registry::Default();
  auto core = wq::learner::LearnerCore::Create(
      c, [](const std::string& line) { std::cerr << line << std::endl; }, &registry);
  if (!core.ok()) {
    std::cerr << "windquant-learner: " << core.status().message() << "\n";
    return 1;
  }
  // Candidate plans go to the evaluator (its report comes back through
  // Learner.ReportEvaluation like an episode's).
  auto eo = wq::net::ChannelOptionsFromConfig(c.service, c.service.evaluator_address);
  if (!eo.ok()) {
    std::cerr << "windquant-learner: " << eo.status().message() << "\n";
    return 2;
  }
  eo->registry = &registry;
  auto evaluator_channel = wq::net::MakeChannel(*eo);
  if (!evaluator_channel.ok()) {
    std::cerr << "windquant-learner: " << evaluator_channel.status().message() << "\n";
    return 2;
  }
  auto evaluator = wq::v1::Evaluator::NewStub(*evaluator_channel);
  const absl::Duration deadline = absl::Milliseconds(c.service.rpc_deadline_ms);
  wq::learner::CandidateSender sender(
      core->get(), [&](const wq::quant::Plan& plan, wq::net::Canceller* cancel) -> absl::Status {
        wq::v1::SubmitPlanRequest req;
        std::shared_ptr<const wq::quant::UnitTable> table = (*core)->SharedTable();
        if (table == nullptr) return absl::UnavailableError("unit table incomplete");
        plan.ToProto(*table, req.mutable_plan());
        req.set_episode_id(plan.episode_id);
        req.set_actor_id("learner");
        wq::v1::SubmitPlanReply reply;
        grpc::ClientContext ctx;
        wq::net::ConfigureContext(ctx, deadline);
        wq::net::Canceller::Scope scope(cancel, &ctx);
        if (scope.cancelled()) return wq::net::FromGrpcStatus(wq::net::CancelledStatus());
        return wq::net::FromGrpcStatus(evaluator->SubmitPlan(&ctx, req, &reply));
      });
  wq::learner::LearnerService service(core->get(), &registry);
  auto options = wq::net::ServerOptionsFromConfig(c.service, c.service.learner_address);
  if (!options.ok()) {
    std::cerr << "windquant-learner: " << options.status().message() << "\n";
    return 2;
  }
  options->registry = &registry;
  wq::net::GrpcServer server(*options);
  server.AddService(&service, wq::v1::Learner::service_full_name());
  if (auto s = server.Start(); !s.ok()) {
    std::cerr << "windquant-learner: " << s.message() << "\n";
    return 1;
  }
  wq::metrics::MetricsServer metrics(&registry, flags->metrics);
  if (auto s = metrics.Start(); !s.ok()) {
    std::cerr << "windquant-learner: " << s.message() << "\n";
    return 1;
  }
  std::cerr << "windquant-learner: serving on " << server.address() << ", /metrics on port "
            << metrics.port() << std::endl;
  sender.Start();
  std::cout << "learner_port=" << server.port() << "\nmetrics_port=" << metrics.port()
            << std::endl;
  wq::net::SignalWaiter::Wait();
  sender.Stop();
  service.BeginShutdown();
  server.Drain(absl::Now() + absl::Seconds(5));
  metrics.Stop();
  return 0;
}
