// Test helper of signal_test: serves a Learner whose GetRunStatus stays in flight until
// the process has received SIGTERM/SIGINT and started draining; then drains and exits 0.
// Prints "port <n>" when serving and "in-flight" when a call has arrived (stdout).
#include <cstdio>
#include <cstring>

#include "absl/synchronization/notification.h"
#include "common/net/server.h"
#include "common/net/signal_waiter.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace {

class HoldingLearner final : public windquant::v1::Learner::Service {
 public:
  grpc::Status GetRunStatus(grpc::ServerContext*, const windquant::v1::RunStatusRequest*,
                            windquant::v1::RunStatus* reply) override {
    std::printf("in-flight\n");
    std::fflush(stdout);
    draining_.WaitForNotification();
    reply->set_episodes(99);
    return grpc::Status::OK;
  }
  absl::Notification draining_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf(
        "usage: net_drain_test_server\n"
        "Test helper: serves a holding Learner on 127.0.0.1:0, prints its port, drains and\n"
        "exits 0 on SIGTERM/SIGINT.\n");
    return 0;
  }
  windquant::net::SignalWaiter::BlockTerminationSignals();
  HoldingLearner learner;
  windquant::net::GrpcServer server(windquant::net::ServerOptions{});
  server.AddService(&learner, windquant::v1::Learner::service_full_name());
  const absl::Status s = server.Start();
  if (!s.ok()) {
    std::fprintf(stderr, "net_drain_test_server: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("port %d\n", server.port());
  std::fflush(stdout);
  const int sig = windquant::net::SignalWaiter::Wait();
  std::fprintf(stderr, "net_drain_test_server: signal %d, draining\n", sig);
  server.EnterNotServing();
  learner.draining_.Notify();
  server.Shutdown(absl::Now() + absl::Seconds(20));
  return 0;
}
