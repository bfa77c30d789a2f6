// GrpcServer, channels, auth, metrics and retries over loopback (127.0.0.1:0) and
// in-process channels, with a fake Learner service.
#include "common/net/server.h"

#include <grpc/support/log.h>

#include <cmath>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/metrics/metric_names.h"
#include "common/metrics/registry.h"
#include "common/net/channel.h"
#include "common/net/health_client.h"
#include "common/net/retry.h"
#include "common/net/status_convert.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant::net {
namespace {

using ::windquant::testing::StatusIs;

constexpr absl::Duration kTimeout = absl::Seconds(10);
constexpr char kToken[] = "s3cr3t-t0ken-value-7f1c";
const std::string kLearner = v1::Learner::service_full_name();

// Test fake of the learner service: GetRunStatus can be held in flight.
class FakeLearner final : public v1::Learner::Service {
 public:
  grpc::Status GetRunStatus(grpc::ServerContext*, const v1::RunStatusRequest*,
                            v1::RunStatus* reply) override {
    if (hold_) {
      started_.Notify();
      release_.WaitForNotification();
    }
    reply->set_episodes(42);
    reply->set_best_plan_id("plan-1");
    return grpc::Status::OK;
  }
  grpc::Status ReportEvaluation(grpc::ServerContext*, const v1::EvaluationReport* request,
                                v1::ReportEvaluationReply* reply) override {
    absl::Status s = RequireFinite("perplexity", request->perplexity());
    if (!s.ok()) return ToGrpcStatus(s);
    reply->set_accepted(true);
    return grpc::Status::OK;
  }
  grpc::Status GetUnitTable(grpc::ServerContext*, const v1::GetUnitTableRequest* request,
                            v1::UnitTable* reply) override {
    reply->set_model_fingerprint(request->model_fingerprint());
    return grpc::Status::OK;
  }

  bool hold_ = false;
  absl::Notification started_, release_;
};

struct Fixture {
  explicit Fixture(ServerOptions options = {}) : server(std::move(options)) {
    server.AddService(&learner, kLearner);
    absl::Status s = server.Start();
    EXPECT_TRUE(s.ok()) << s;
  }
  std::shared_ptr<grpc::Channel> Channel(ChannelOptions options = {}) {
    options.target = server.address();
    return MakeChannel(options).value();
  }
  FakeLearner learner;
  GrpcServer server;
};

grpc::Status GetRunStatus(const std::shared_ptr<grpc::Channel>& channel, v1::RunStatus* reply) {
  auto stub = v1::Learner::NewStub(channel);
  grpc::ClientContext context;
  ConfigureContext(context, kTimeout);
  return stub->GetRunStatus(&context, v1::RunStatusRequest(), reply);
}

TEST(GrpcServerTest, PicksPortAndServesHealth) {
  Fixture f;
  EXPECT_GT(f.server.port(), 0);
  EXPECT_EQ(f.server.address(), "127.0.0.1:" + std::to_string(f.server.port()));
  auto channel = f.Channel();
  EXPECT_EQ(CheckHealth(channel, "", kTimeout).value(),
            grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(CheckHealth(channel, kLearner, kTimeout).value(),
            grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(CheckHealth(channel, "no.such.Service", kTimeout).status().code(),
            absl::StatusCode::kNotFound);
  v1::RunStatus reply;
  ASSERT_TRUE(GetRunStatus(channel, &reply).ok());
  EXPECT_EQ(reply.episodes(), 42);
}

TEST(GrpcServerTest, NotServingAfterEnterNotServingButCallsStillServed) {
  Fixture f;
  auto channel = f.Channel();
  f.server.SetServing(kLearner, false);
  EXPECT_EQ(CheckHealth(channel, kLearner, kTimeout).value(),
            grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(CheckHealth(channel, "", kTimeout).value(),
            grpc::health::v1::HealthCheckResponse::SERVING);
  f.server.EnterNotServing();
  EXPECT_EQ(CheckHealth(channel, "", kTimeout).value(),
            grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  v1::RunStatus reply;
  EXPECT_TRUE(GetRunStatus(channel, &reply).ok());
}

TEST(GrpcServerTest, DrainReportsNotServingToWatchersAndFinishesInFlightCall) {
  Fixture f;
  f.learner.hold_ = true;
  auto channel = f.Channel();
  // A health watcher sees SERVING, then NOT_SERVING once the drain starts.
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext watch_context;
  ConfigureContext(watch_context, kTimeout);
  grpc::health::v1::HealthCheckRequest watch_request;
  auto watch = health->Watch(&watch_context, watch_request);
  grpc::health::v1::HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  v1::RunStatus reply;
  grpc::Status in_flight;
  std::thread caller([&] { in_flight = GetRunStatus(channel, &reply); });
  f.learner.started_.WaitForNotification();
  std::thread drainer([&] { f.server.Drain(absl::Now() + kTimeout); });
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  // The watch is an in-flight call too: end it so the drain need not wait for the deadline.
  watch_context.TryCancel();
  watch->Finish();
  f.learner.release_.Notify();
  caller.join();
  drainer.join();
  EXPECT_TRUE(in_flight.ok()) << in_flight.error_message();
  EXPECT_EQ(reply.episodes(), 42);
  // New calls are refused after the drain.
  EXPECT_EQ(CheckHealth(channel, "", absl::Seconds(2)).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(GrpcServerTest, BearerTokenCheckedOnEveryCallOverPlaintext) {
  ServerOptions options;
  options.bearer_token = kToken;
  Fixture f(options);
  v1::RunStatus reply;
  grpc::Status missing = GetRunStatus(f.Channel(), &reply);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(missing.error_message(), "missing bearer token");
  ChannelOptions wrong;
  wrong.bearer_token = "not-the-token";
  grpc::Status bad = GetRunStatus(f.Channel(wrong), &reply);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(bad.error_message(), "invalid bearer token");
  ChannelOptions prefix;  // a prefix of the right token is still wrong
  prefix.bearer_token = std::string(kToken).substr(0, 6);
  EXPECT_EQ(GetRunStatus(f.Channel(prefix), &reply).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ChannelOptions right;
  right.bearer_token = kToken;
  grpc::Status ok = GetRunStatus(f.Channel(right), &reply);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(reply.episodes(), 42);
  // Health is exempt (kubelet probes send no metadata).
  EXPECT_EQ(CheckHealth(f.Channel(), "", kTimeout).value(),
            grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST(GrpcServerTest, TokenNeverAppearsInLogsOrMetrics) {
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_DEBUG);
  metrics::Registry registry;
  ServerOptions options;
  options.bearer_token = kToken;
  options.registry = &registry;
  ::testing::internal::CaptureStderr();
  std::string exposition;
  {
    Fixture f(options);
    v1::RunStatus reply;
    ChannelOptions wrong;
    wrong.bearer_token = std::string(kToken) + "x";
    wrong.registry = &registry;
    EXPECT_EQ(GetRunStatus(f.Channel(wrong), &reply).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    ChannelOptions right;
    right.bearer_token = kToken;
    right.registry = &registry;
    EXPECT_TRUE(GetRunStatus(f.Channel(right), &reply).ok());
    exposition = registry.TextExposition();
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
  EXPECT_EQ(log.find(kToken), std::string::npos);
  EXPECT_EQ(exposition.find(kToken), std::string::npos);
  // The refused call counts once per side (client and server share the registry here).
  EXPECT_NE(exposition.find("windquant_net_rpc_errors_total{code=\"UNAUTHENTICATED\"} 2"),
            std::string::npos)
      << exposition;
}

// Calls refused by the token check never reach a handler or the server interceptor;
// they must still count in windquant_net_rpc_errors_total{code="UNAUTHENTICATED"}, once
// each, and an accepted call must not count. The clients have no registry, so every
// count is the server's.
TEST(GrpcServerTest, RefusedTokenCallsCountAsUnauthenticatedErrors) {
  metrics::Registry registry;
  ServerOptions options;
  options.bearer_token = kToken;
  options.registry = &registry;
  Fixture f(options);
  auto errors = [&](const char* code) {
    return metrics::CounterFamily(registry, metrics::kNetRpcErrorsTotal)
        .value()
        ->Labels({code})
        .Value();
  };
  const double before = errors("UNAUTHENTICATED");
  EXPECT_EQ(before, 0);

  ChannelOptions wrong;
  wrong.bearer_token = "not-the-token";
  auto wrong_channel = f.Channel(wrong);
  auto none_channel = f.Channel();
  constexpr int kWrongCalls = 3, kMissingCalls = 2;
  v1::RunStatus reply;
  for (int i = 0; i < kWrongCalls; ++i) {
    EXPECT_EQ(GetRunStatus(wrong_channel, &reply).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  for (int i = 0; i < kMissingCalls; ++i) {
    EXPECT_EQ(GetRunStatus(none_channel, &reply).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(errors("UNAUTHENTICATED") - before, kWrongCalls + kMissingCalls);

  // An accepted call and an (exempt) health check count as no error at all.
  ChannelOptions right;
  right.bearer_token = kToken;
  grpc::Status ok = GetRunStatus(f.Channel(right), &reply);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(CheckHealth(none_channel, "", kTimeout).value(),
            grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(errors("UNAUTHENTICATED") - before, kWrongCalls + kMissingCalls);
  const std::string exposition = registry.TextExposition();
  EXPECT_NE(exposition.find("windquant_net_rpc_errors_total{code=\"UNAUTHENTICATED\"} 5"),
            std::string::npos)
      << exposition;
  // No other code gained a count (the only error series is UNAUTHENTICATED).
  size_t series = 0;
  for (size_t at = exposition.find("windquant_net_rpc_errors_total{"); at != std::string::npos;
       at = exposition.find("windquant_net_rpc_errors_total{", at + 1)) {
    ++series;
  }
  EXPECT_EQ(series, 1u) << exposition;
}

TEST(GrpcServerTest, MetricsCountBytesAndErrorCodes) {
  metrics::Registry server_registry, client_registry;
  ServerOptions options;
  options.registry = &server_registry;
  Fixture f(options);
  ChannelOptions channel_options;
  channel_options.registry = &client_registry;
  auto channel = f.Channel(channel_options);
  auto stub = v1::Learner::NewStub(channel);
  v1::GetUnitTableRequest request;
  request.set_model_fingerprint(std::string(1000, 'f'));
  v1::UnitTable table;
  grpc::ClientContext context;
  ConfigureContext(context, kTimeout);
  ASSERT_TRUE(stub->GetUnitTable(&context, request, &table).ok());
  v1::EvaluationReport report;
  report.set_perplexity(std::nan(""));
  v1::ReportEvaluationReply reply;
  grpc::ClientContext context2;
  ConfigureContext(context2, kTimeout);
  grpc::Status invalid = stub->ReportEvaluation(&context2, report, &reply);
  EXPECT_EQ(invalid.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(invalid.error_message(), "perplexity: must be finite, got nan");
  EXPECT_EQ(CheckHealth(channel, "", kTimeout).value(),
            grpc::health::v1::HealthCheckResponse::SERVING);

  const double request_bytes = static_cast<double>(request.ByteSizeLong());
  const double table_bytes = static_cast<double>(table.ByteSizeLong());
  const double report_bytes = static_cast<double>(report.ByteSizeLong());
  grpc::health::v1::HealthCheckRequest health_request;
  grpc::health::v1::HealthCheckResponse health_reply;
  health_reply.set_status(grpc::health::v1::HealthCheckResponse::SERVING);
  const double health_bytes_in = static_cast<double>(health_request.ByteSizeLong());
  const double health_bytes_out = static_cast<double>(health_reply.ByteSizeLong());
  auto counter = [](metrics::Registry& r, const metrics::MetricSpec& spec) {
    return metrics::CounterFamily(r, spec).value()->Get().Value();
  };
  auto errors = [](metrics::Registry& r, const char* code) {
    return metrics::CounterFamily(r, metrics::kNetRpcErrorsTotal).value()->Labels({code}).Value();
  };
  EXPECT_DOUBLE_EQ(counter(server_registry, metrics::kNetReceivedBytesTotal),
                   request_bytes + report_bytes + health_bytes_in);
  EXPECT_DOUBLE_EQ(counter(server_registry, metrics::kNetSentBytesTotal),
                   table_bytes + health_bytes_out);
  EXPECT_DOUBLE_EQ(counter(client_registry, metrics::kNetSentBytesTotal),
                   request_bytes + report_bytes + health_bytes_in);
  EXPECT_DOUBLE_EQ(counter(client_registry, metrics::kNetReceivedBytesTotal),
                   table_bytes + health_bytes_out);
  EXPECT_GT(table_bytes, 1000);
  EXPECT_EQ(errors(server_registry, "INVALID_ARGUMENT"), 1);
  EXPECT_EQ(errors(client_registry, "INVALID_ARGUMENT"), 1);
}

TEST(GrpcServerTest, MaxMessageSizeEnforced) {
  ServerOptions options;
  options.max_message_bytes = 4096;
  Fixture f(options);
  auto stub = v1::Learner::NewStub(f.Channel());
  v1::GetUnitTableRequest request;
  request.set_model_fingerprint(std::string(8192, 'f'));
  v1::UnitTable table;
  grpc::ClientContext context;
  ConfigureContext(context, kTimeout);
  EXPECT_EQ(stub->GetUnitTable(&context, request, &table).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST(GrpcServerTest, InProcessChannelServes) {
  ServerOptions options;
  options.bearer_token = kToken;  // in-process callers are trusted: no token needed
  Fixture f(options);
  auto channel = MakeInProcessChannel(f.server, ChannelOptions{}).value();
  v1::RunStatus reply;
  grpc::Status s = GetRunStatus(channel, &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.best_plan_id(), "plan-1");
  EXPECT_EQ(CheckHealth(channel, kLearner, kTimeout).value(),
            grpc::health::v1::HealthCheckResponse::SERVING);
  GrpcServer not_started(ServerOptions{});
  EXPECT_THAT(
      MakeInProcessChannel(not_started, ChannelOptions{}),
      StatusIs(absl::StatusCode::kFailedPrecondition, "in-process channel: server not started"));
}

TEST(GrpcServerTest, StartErrors) {
  ServerOptions bad_address;
  bad_address.address = "256.1.2.3:0";
  GrpcServer a(bad_address);
  EXPECT_THAT(a.Start(),
              StatusIs(absl::StatusCode::kUnavailable, "service: cannot listen on 256.1.2.3:0"));
  ServerOptions half_tls;
  half_tls.cert_file = "/nonexistent/cert.pem";
  GrpcServer b(half_tls);
  EXPECT_THAT(b.Start(), StatusIs(absl::StatusCode::kInvalidArgument,
                                  "service.tls: cert_file and key_file must be set together"));
  ServerOptions missing_files;
  missing_files.cert_file = "/nonexistent/cert.pem";
  missing_files.key_file = "/nonexistent/key.pem";
  GrpcServer c(missing_files);
  const absl::Status s = c.Start();
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kNotFound, "service.tls.cert_file: /nonexistent/cert.pem"));
  Fixture f;
  EXPECT_THAT(f.server.Start(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "server already started"));
}

TEST(GrpcServerTest, RetryReachesServerStartedAfterClientBeganRetrying) {
  int port = 0;
  {  // Reserve a free port: bind :0, read it back, release it.
    GrpcServer probe(ServerOptions{});
    ASSERT_TRUE(probe.Start().ok());
    port = probe.port();
  }
  const std::string address = "127.0.0.1:" + std::to_string(port);
  ChannelOptions channel_options;
  channel_options.target = address;
  channel_options.min_reconnect_backoff = absl::Milliseconds(20);
  channel_options.max_reconnect_backoff = absl::Milliseconds(100);
  auto channel = MakeChannel(channel_options).value();

  FakeLearner learner;
  ServerOptions server_options;
  server_options.address = address;
  GrpcServer late(server_options);
  late.AddService(&learner, kLearner);
  RetryPolicy policy;
  policy.max_attempts = 20;
  policy.initial_backoff = absl::Milliseconds(10);
  policy.max_backoff = absl::Milliseconds(50);
  policy.seed = 3;
  int attempts = 0, sleeps = 0;
  std::vector<grpc::StatusCode> codes;
  const grpc::Status s = RetryWithBackoff(
      [&] {
        ++attempts;
        v1::RunStatus reply;
        grpc::Status status = GetRunStatus(channel, &reply);
        codes.push_back(status.error_code());
        return status;
      },
      policy,
      [&](absl::Duration) {
        // Instead of sleeping: start the server at the second retry, then wait until
        // the channel has reconnected (a notification, not a timed sleep).
        if (++sleeps == 2) {
          ASSERT_TRUE(late.Start().ok());
        }
        if (sleeps >= 2) channel->WaitForConnected(absl::ToChronoTime(absl::Now() + kTimeout));
      });
  EXPECT_TRUE(s.ok()) << s.error_message();
  ASSERT_GE(codes.size(), 3u);
  EXPECT_EQ(codes[0], grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(codes[1], grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(codes.back(), grpc::StatusCode::OK);
}

}  // namespace
}  // namespace windquant::net
