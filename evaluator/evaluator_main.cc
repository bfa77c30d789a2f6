// windquant-evaluator: owns the evaluation data, embeddings and head, drives
// calibration and plan evaluation through the actors, updates λ and reports
// to the learner (DESIGN.md section 5).
#include <cstdlib>
#include <iostream>

#include <ATen/Parallel.h>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "actor/grpc_activation_transport.h"
#include "actor/service_flags.h"
#include "common/base/files.h"
#include "common/metrics/http_server.h"
#include "common/metrics/metric_names.h"
#include "common/model/tokenizer.h"
#include "common/net/canceller.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "common/net/signal_waiter.h"
#include "evaluator/evaluation_queue.h"
#include "evaluator/evaluator_service.h"
#include "evaluator/pipeline_evaluator.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace wq = windquant;

namespace {

int Fail(const std::string& what, const absl::Status& s) {
  std::cerr << "windquant-evaluator: " << what << s.message() << "\n";
  return 1;
}

absl::StatusOr<std::vector<int32_t>> Tokenize(const wq::model::Tokenizer& tok,
                                              const std::string& path, const char* key) {
  auto text = wq::base::ReadFile(path);
  if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat(key, ": ", text.status().message()));
  return tok.Encode(*text);
}

}  // namespace

int main(int argc, char** argv) {
  wq::net::SignalWaiter::BlockTerminationSignals();
  auto flags = wq::actor::ParseServiceFlags(argc, argv);
  if (!flags.ok()) return Fail("", flags.status());
  if (flags->help) {
    std::cout << "usage: windquant-evaluator --config run.yaml [--set key=value]... [--metrics-port N]\n"
                 "Serves windquant.v1.Evaluator on service.evaluator_address; drives the\n"
                 "actors of service.actor_addresses (stage-major). Prints metrics_port=<port>.\n"
                 "/metrics (Prometheus text) on service.metrics_address, its port\n"
                 "overridden by --metrics-port (0 = a free one).\n";
    return 0;
  }
  const wq::config::RunConfig& c = flags->config;
  if (c.model.threads > 0) at::set_num_threads(c.model.threads);  // 0: torch's default
  const auto& svc = c.service;
  if (static_cast<int>(svc.actor_addresses.size()) != svc.stages * svc.replicas) {
    return Fail("", absl::InvalidArgumentError(absl::StrCat(
                        "service.actor_addresses: ", svc.actor_addresses.size(),
                        " entries, stages x replicas = ", svc.stages * svc.replicas)));
  }
  // The evaluator's metrics: its own (queue, latency, λ) and the RPC ones.
  auto& registry = wq::metrics::Registry::Default();
  auto tok = wq::model::Tokenizer::FromFile(c.model.dir + "/tokenizer.json");
  if (!tok.ok()) return Fail("", tok.status());
  auto calib = Tokenize(**tok, c.calibration.text, "calibration.text");
  if (!calib.ok()) return Fail("", calib.status());
  auto eval = Tokenize(**tok, c.evaluation.text, "evaluation.text");
  if (!eval.ok()) return Fail("", eval.status());
  wq::evaluator::PipelineEvaluatorOptions po;
  po.context = c.evaluation.context;
  po.batch_size = c.evaluation.batch;
  po.calib_slice_tokens = c.evaluation.calib_slice_tokens;
  po.eval_slice_tokens = c.evaluation.eval_slice_tokens;
  po.calibration_samples = c.calibration.samples;
  po.calibration_seq_len = c.calibration.seq_len;
  po.calibration_seed = c.calibration.seed;
  po.calibration_batch = std::max(1, c.evaluation.batch);
  auto pipeline = wq::evaluator::PipelineEvaluator::Create(c.model.dir, po, *std::move(calib),
                                                          *std::move(eval));
  if (!pipeline.ok()) return Fail("", pipeline.status());

  const absl::Duration deadline = absl::Milliseconds(svc.rpc_deadline_ms);
  std::vector<std::unique_ptr<wq::actor::GrpcActivationTransport>> transports;
  std::vector<std::vector<wq::actor::ActivationTransport*>> replicas(svc.replicas);
  for (int r = 0; r < svc.replicas; ++r) {
    for (int s = 0; s < svc.stages; ++s) {
      const std::string& addr = svc.actor_addresses[s * svc.replicas + r];
      auto co = wq::net::ChannelOptionsFromConfig(svc, addr);
      if (!co.ok()) return Fail("", co.status());
      co->registry = &registry;
      auto channel = wq::net::MakeChannel(*co);
      if (!channel.ok()) return Fail("", channel.status());
      transports.push_back(std::make_unique<wq::actor::GrpcActivationTransport>(
          *channel, absl::StrCat("stage ", s, " replica ", r, " at ", addr), deadline));
      replicas[r].push_back(transports.back().get());
    }
  }
  auto lo = wq::net::ChannelOptionsFromConfig(svc, svc.learner_address);
  if (!lo.ok()) return Fail("", lo.status());
  lo->registry = &registry;
  auto learner_channel = wq::net::MakeChannel(*lo);
  if (!learner_channel.ok()) return Fail("", learner_channel.status());
  auto learner = wq::v1::Learner::NewStub(*learner_channel);
  // Shutdown cancels the calls to the learner in flight (a report waiting for
  // a learner that is down would otherwise hold Stop() for its whole deadline).
  wq::net::Canceller stopping;

  // One attempt; the queue retries UNAVAILABLE / DEADLINE_EXCEEDED with backoff
  // (the learner answers a duplicate with accepted=false, so a retry after a
  // lost reply records nothing twice).
  auto report = [&](const wq::evaluator::Report& r) -> absl::Status {
    wq::v1::EvaluationReport req;
    req.set_episode_id(r.episode_id);
    req.set_plan_id(r.plan_id);
    req.set_perplexity(r.evaluation.perplexity);
    req.set_loss(r.evaluation.loss);
    req.set_loss_increase(r.evaluation.loss_increase);
    req.set_relative_ppl_increase(r.evaluation.relative_ppl_increase);
    req.set_effective_bits(r.effective_bits);
    req.set_lambda(r.lambda);
    req.set_tokens(r.evaluation.tokens);
    req.set_cached(r.evaluation.cached);
    wq::v1::ReportEvaluationReply reply;
    grpc::ClientContext ctx;
    wq::net::ConfigureContext(ctx, deadline, /*wait_for_ready=*/true);
    wq::net::Canceller::Scope scope(&stopping, &ctx);
    if (scope.cancelled()) return wq::net::FromGrpcStatus(wq::net::CancelledStatus());
    return wq::net::FromGrpcStatus(learner->ReportEvaluation(&ctx, req, &reply));
  };
  wq::evaluator::EvaluationQueue queue(pipeline->get(), replicas, c.lagrange,
                                       c.output.dir + "/evaluator-queue", 4096, report,
                                       &registry);
  {  // λ survives an evaluator restart through the learner's checkpoint.
    grpc::ClientContext ctx;
    wq::net::ConfigureContext(ctx, absl::Seconds(2));
    wq::v1::RunStatus status;
    if (learner->GetRunStatus(&ctx, wq::v1::RunStatusRequest(), &status).ok() &&
        status.updates() > 0) {
      queue.set_lambda(status.lambda());
    }
  }
  absl::Mutex table_mu;
  std::optional<wq::quant::UnitTable> table;
  // The run's table, fetched once. The lock is not held across the RPC: while
  // the learner is away every SubmitPlan fails fast with UNAVAILABLE (the actor
  // retries) instead of queueing behind one call's deadline.
  auto table_fn = [&]() -> absl::StatusOr<wq::quant::UnitTable> {
    {
      absl::MutexLock lock(&table_mu);
      if (table.has_value()) return *table;
    }
    grpc::ClientContext ctx;
    wq::net::ConfigureContext(ctx, std::min(deadline, absl::Seconds(5)));
    wq::net::Canceller::Scope scope(&stopping, &ctx);
    wq::v1::UnitTable proto;
    grpc::Status s = learner->GetUnitTable(&ctx, wq::v1::GetUnitTableRequest(), &proto);
    if (!s.ok()) return wq::net::FromGrpcStatus(s);
    auto t = wq::quant::UnitTable::FromProto(proto);
    if (!t.ok()) return t.status();
    absl::MutexLock lock(&table_mu);
    if (!table.has_value()) table = *std::move(t);
    return *table;
  };
  wq::evaluator::EvaluatorService service(&queue, table_fn);
  auto options = wq::net::ServerOptionsFromConfig(svc, svc.evaluator_address);
  if (!options.ok()) return Fail("", options.status());
  options->registry = &registry;
  wq::net::GrpcServer server(*options);
  server.AddService(&service, wq::v1::Evaluator::service_full_name());
  if (auto s = server.Start(); !s.ok()) return Fail("", s);
  wq::metrics::MetricsServer metrics(&registry, flags->metrics);
  if (auto s = metrics.Start(); !s.ok()) return Fail("", s);
  if (auto s = queue.Start(); !s.ok()) return Fail("queue: ", s);
  std::cout << "evaluator_port=" << server.port() << "\nmetrics_port=" << metrics.port()
            << std::endl;
  std::cerr << "windquant-evaluator: serving on " << server.address() << ", /metrics on port "
            << metrics.port() << std::endl;
  wq::net::SignalWaiter::Wait();
  // Outgoing work first (it may wait on peers that are going away too), then
  // the server drains its in-flight calls.
  stopping.Cancel();
  queue.Stop();
  server.Drain(absl::Now() + absl::Seconds(10));
  metrics.Stop();
  return 0;
}
