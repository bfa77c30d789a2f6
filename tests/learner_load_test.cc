// The learner keeps answering under load (issue 38): while 64 concurrent
// StreamTransitions streams (one connection each, as 64 actor processes) keep its
// intake saturated, every /metrics scrape, /healthz, grpc.health.v1 check and
// Learner.GetRunStatus (what actors poll) answers within its deadline (5 s) and the
// learner accepts episodes meanwhile. The learner
// is the real one (LearnerCore + LearnerService behind a GrpcServer, its metrics on a
// MetricsServer, as windquant-learner wires them) on 127.0.0.1:0. Not a speed test:
// the bounds are generous; `distributed_bench --load` measures the latencies
// (docs/benchmarks.md).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/metrics/http_server.h"
#include "common/metrics/registry.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "common/rl/environment.h"
#include "common/rl/transition_codec.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/service_prober.h"
#include "common/testing/status_matchers.h"
#include "common/testing/synthetic_table.h"
#include "common/testing/transition_streams.h"
#include "learner/learner_core.h"
#include "learner/learner_service.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant {
namespace {

using ::testing::Each;
using ::testing::Gt;
using ::testing::IsEmpty;
using ::windquant::testing::IsOk;

constexpr int kStreams = 64;
// Probe rounds under load (50 ms apart, each /metrics + /healthz + health check).
constexpr int kRoundsUnderLoad = 20;
// Generous: a probe slower than this under load is a failure, not a slow answer.
constexpr double kDeadlineMs = 5000;
constexpr absl::Duration kWait = absl::Seconds(40);

plan::UnitTable Table() {
  plan::UnitTable t = windquant::testing::SyntheticTable(14, 3);
  t.num_layers = 2;
  t.end_layer = 2;
  t.chunk_size = 16;
  return t;
}

learner::LearnerCore::Options CoreOptions(const std::string& dir) {
  learner::LearnerCore::Options o;
  o.dir = dir;
  o.chunk_size = 16;
  o.curriculum.target_bits = {3.0};
  o.policy.ppo.hidden = {16, 16};
  // No evaluator here: each accepted episode is held this long (as the bench's).
  o.evaluation_allowance = absl::Seconds(2);
  return o;
}

// Encoded episodes of a policy-free walk (cheapest action of every unit), as an
// actor's rollout loop sends them; TransitionStreams gives each its id.
std::vector<v1::TransitionBatch> Batches(const plan::UnitTable& table) {
  auto costs = rl::UnitCosts::Create(table).value();
  rl::EnvOptions eo;
  eo.target_bits = 3.0;
  std::vector<int> actions;
  for (int64_t u = 0; u < costs->num_units(); ++u) actions.push_back(costs->cheapest_action(u));
  rl::Episode e;
  e.actor_id = "load";
  e.steps = rl::ReplayPlan(costs, eo, actions).value();
  e.plan.plan_id = "load";
  e.plan.model_fingerprint = table.fingerprint;
  e.plan.actions = actions;
  e.plan.target_bits = 3.0;
  std::vector<v1::TransitionBatch> out(1);
  rl::EncodeEpisode(e, table, &out[0]);
  return out;
}

TEST(LearnerLoadTest, MetricsAndHealthAnswerWhileSixtyFourStreamsSaturateIntake) {
  const windquant::testing::ScopedTestDir dir("wq-learner-load");
  const plan::UnitTable table = Table();
  metrics::Registry registry;
  auto core = learner::LearnerCore::Create(CoreOptions(dir.path()), nullptr, &registry);
  ASSERT_THAT(core.status(), IsOk());
  ASSERT_THAT((*core)->RegisterTable(0, 0, table).status(), IsOk());
  learner::LearnerService service(core->get(), &registry);
  net::ServerOptions so;
  so.registry = &registry;
  net::GrpcServer server(so);
  server.AddService(&service, v1::Learner::service_full_name());
  ASSERT_THAT(server.Start(), IsOk());
  metrics::MetricsServer metrics_server(&registry, metrics::MetricsServerOptions());
  ASSERT_THAT(metrics_server.Start(), IsOk());

  windquant::testing::ServiceProberOptions po;
  po.metrics_port = metrics_server.port();
  net::ChannelOptions co;
  co.target = server.address();
  po.health = net::MakeChannel(co).value();
  po.metrics_must_contain = "windquant_learner_episodes_total";
  // The learner's own: actors call GetRunStatus with a 5 s deadline (rollout_loop.cc).
  std::shared_ptr<v1::Learner::Stub> stub = v1::Learner::NewStub(po.health);
  po.rpc = [stub](absl::Duration deadline) {
    grpc::ClientContext ctx;
    net::ConfigureContext(ctx, deadline);
    v1::RunStatus reply;
    const grpc::Status s = stub->GetRunStatus(&ctx, v1::RunStatusRequest(), &reply);
    return s.ok() ? absl::OkStatus() : absl::UnavailableError(s.error_message());
  };
  windquant::testing::ServiceProber prober(po);
  prober.Start();
  ASSERT_TRUE(prober.WaitForRounds(2, kWait));  // idle: the probes work at all
  for (const auto& idle : prober.TakeSamples()) EXPECT_THAT(idle.failures, IsEmpty());

  windquant::testing::TransitionStreamsOptions to;
  to.target = server.address();
  to.streams = kStreams;
  windquant::testing::TransitionStreams streams(to, Batches(table));
  streams.Start();
  ASSERT_TRUE(streams.WaitForAcks(kStreams, kWait)) << streams.acks() << " acks";
  prober.TakeSamples();  // from here on the learner is loaded
  const int64_t accepted_before = (*core)->Status().episodes;
  ASSERT_TRUE(prober.WaitForRounds(prober.rounds() + kRoundsUnderLoad, kWait));
  const auto loaded = prober.TakeSamples();
  const int64_t accepted_during = (*core)->Status().episodes - accepted_before;
  const windquant::testing::TransitionStreams::Result sent = streams.Stop();
  prober.Stop();

  std::cout << sent.sent << " batches acked on " << kStreams << " streams in " << sent.seconds
            << " s; " << accepted_during << " accepted while probed\n";
  for (int p = 0; p < windquant::testing::kNumProbes; ++p) {
    const char* name = windquant::testing::ProbeName(static_cast<windquant::testing::Probe>(p));
    SCOPED_TRACE(name);
    const windquant::testing::LatencySummary s = windquant::testing::Summarize(loaded[p].ms);
    std::cout << name << " under load: " << s.count << " answers, p50 " << s.p50 << " ms, p99 "
              << s.p99 << " ms, max " << s.max << " ms\n";
    EXPECT_THAT(loaded[p].failures, IsEmpty());
    EXPECT_GE(loaded[p].ms.size(), kRoundsUnderLoad - 1);
    EXPECT_LT(s.max, kDeadlineMs);
  }
  EXPECT_GT(accepted_during, 0) << "the learner accepted nothing while probed";
  EXPECT_THAT(sent.errors, IsEmpty());
  EXPECT_THAT(sent.stream_sent, Each(Gt(0))) << "a stream never got an ack";
  EXPECT_EQ(sent.accepted, sent.sent) << "every batch has a fresh id: none is refused";
}

}  // namespace
}  // namespace windquant
