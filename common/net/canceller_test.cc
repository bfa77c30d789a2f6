#include "common/net/canceller.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/net/channel.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"

namespace windquant::net {
namespace {

// A channel to a port where nothing listens: a wait_for_ready call there blocks
// until its deadline unless cancelled.
std::shared_ptr<grpc::Channel> DeadChannel() {
  ChannelOptions o;
  o.target = "127.0.0.1:1";
  return MakeChannel(o).value();
}

TEST(CancellerTest, CancelEndsABlockedWaitForReadyCall) {
  auto stub = grpc::health::v1::Health::NewStub(DeadChannel());
  Canceller cancel;
  absl::Notification started;
  grpc::Status status;
  absl::Duration took;
  std::thread caller([&] {
    grpc::ClientContext ctx;
    ConfigureContext(ctx, absl::Seconds(60), /*wait_for_ready=*/true);
    Canceller::Scope scope(&cancel, &ctx);
    grpc::health::v1::HealthCheckResponse reply;
    const absl::Time t0 = absl::Now();
    started.Notify();
    status = stub->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &reply);
    took = absl::Now() - t0;
  });
  started.WaitForNotification();
  absl::SleepFor(absl::Milliseconds(100));
  cancel.Cancel();
  caller.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(took, absl::Seconds(10));
}

TEST(CancellerTest, ContextRegisteredAfterCancelIsCancelledAtOnce) {
  auto stub = grpc::health::v1::Health::NewStub(DeadChannel());
  Canceller cancel;
  cancel.Cancel();
  grpc::ClientContext ctx;
  ConfigureContext(ctx, absl::Seconds(60), /*wait_for_ready=*/true);
  Canceller::Scope scope(&cancel, &ctx);
  EXPECT_TRUE(scope.cancelled());
  grpc::health::v1::HealthCheckResponse reply;
  const absl::Time t0 = absl::Now();
  const grpc::Status s = stub->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
}

TEST(CancellerTest, RetryLoopStopsOnCancel) {
  Canceller cancel;
  RetryPolicy policy;
  policy.max_attempts = 1000;
  policy.initial_backoff = absl::Seconds(1);
  policy.max_backoff = absl::Seconds(30);
  policy.max_total_sleep = absl::Hours(1);
  int calls = 0;
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(50));
    cancel.Cancel();
  });
  const absl::Time t0 = absl::Now();
  const grpc::Status s = RetryWithBackoff(
      [&] {
        ++calls;
        if (cancel.cancelled()) return CancelledStatus();
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "down");
      },
      policy, cancel.Sleeper());
  stopper.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
  EXPECT_GE(calls, 1);
  EXPECT_FALSE(cancel.SleepFor(absl::Hours(1)));  // returns at once once cancelled
}

}  // namespace
}  // namespace windquant::net
