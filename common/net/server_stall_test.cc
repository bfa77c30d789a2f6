// GrpcServer keeps answering while clients stall: streams that are opened and never
// written or read, TCP connections that send nothing or half the HTTP/2 preface.
// A real server on 127.0.0.1:0, real channels and raw sockets.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "common/testing/http_client.h"
#include "gtest/gtest.h"
#include "windquant/v1/learner.grpc.pb.h"

namespace windquant::net {
namespace {

// GetRunStatus answers; StreamTransitions waits for its client's first message.
class StallLearner final : public v1::Learner::Service {
 public:
  grpc::Status GetRunStatus(grpc::ServerContext*, const v1::RunStatusRequest*,
                            v1::RunStatus* reply) override {
    reply->set_episodes(7);
    return grpc::Status::OK;
  }
  grpc::Status StreamTransitions(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::TransitionAck, v1::TransitionBatch>* stream) override {
    {
      absl::MutexLock lock(&mu_);
      ++in_flight_;
    }
    v1::TransitionBatch batch;
    while (stream->Read(&batch)) {
    }
    absl::MutexLock lock(&mu_);
    --in_flight_;
    return grpc::Status::OK;
  }
  // Waits (bounded) until `n` streams are inside the handler.
  bool AwaitInFlight(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    target_ = n;
    return mu_.AwaitWithTimeout(absl::Condition(this, &StallLearner::Reached), timeout);
  }

 private:
  absl::Mutex mu_;
  bool Reached() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ >= target_; }

  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int target_ ABSL_GUARDED_BY(mu_) = 0;
};

// True when the peer closes `fd` within `timeout` (what it sent before is dropped).
bool ClosedByPeerWithin(int fd, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  char buf[4096];
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()))) <= 0) {
      return false;
    }
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;  // EOF or reset
  }
  return false;
}

grpc::Status Status(const std::string& address) {
  ChannelOptions options;
  options.target = address;
  auto stub = v1::Learner::NewStub(MakeChannel(options).value());
  grpc::ClientContext context;
  ConfigureContext(context, absl::Seconds(5));
  v1::RunStatus reply;
  grpc::Status s = stub->GetRunStatus(&context, v1::RunStatusRequest(), &reply);
  if (s.ok() && reply.episodes() != 7) return grpc::Status(grpc::StatusCode::INTERNAL, "reply");
  return s;
}

// error-case: net.stalled-clients
TEST(GrpcServerStallTest, StalledStreamsAndConnectionsDoNotBlockCalls) {
  StallLearner learner;
  ServerOptions options;
  options.handshake_timeout = absl::Seconds(60);  // the stalled connections stay open
  GrpcServer server(options);
  server.AddService(&learner, v1::Learner::service_full_name());
  ASSERT_TRUE(server.Start().ok());

  // Streams that are opened and then never written to nor read from.
  constexpr int kStreams = 24;
  ChannelOptions channel_options;
  channel_options.target = server.address();
  auto channel = MakeChannel(channel_options).value();
  auto stub = v1::Learner::NewStub(channel);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<v1::TransitionBatch, v1::TransitionAck>>>
      streams;
  for (int i = 0; i < kStreams; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    ConfigureContext(*contexts.back(), absl::Seconds(120));
    streams.push_back(stub->StreamTransitions(contexts.back().get()));
  }
  ASSERT_TRUE(learner.AwaitInFlight(kStreams, absl::Seconds(30)))
      << "the streams never reached the handler";
  // Connections that send nothing, half the HTTP/2 preface, or garbage.
  std::vector<int> raw;
  for (int i = 0; i < 16; ++i) {
    raw.push_back(testing::ConnectLoopback(server.port(), ""));
    raw.push_back(testing::ConnectLoopback(server.port(), "PRI * HTTP/2.0\r\n"));
    ASSERT_GE(raw[raw.size() - 1], 0);
    ASSERT_GE(raw[raw.size() - 2], 0);
  }
  for (int i = 0; i < 5; ++i) {
    const absl::Time start = absl::Now();
    grpc::Status s = Status(server.address());  // a fresh connection each time
    EXPECT_TRUE(s.ok()) << i << ": " << s.error_message();
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  }
  for (int fd : raw) close(fd);
  for (auto& context : contexts) context->TryCancel();
  for (auto& stream : streams) (void)stream->Finish();
  server.Shutdown(absl::Now() + absl::Seconds(5));
}

// error-case: net.handshake-timeout
TEST(GrpcServerStallTest, ConnectionsThatNeverHandshakeAreClosed) {
  StallLearner learner;
  ServerOptions options;
  options.handshake_timeout = absl::Milliseconds(500);
  GrpcServer server(options);
  server.AddService(&learner, v1::Learner::service_full_name());
  ASSERT_TRUE(server.Start().ok());
  const int silent = testing::ConnectLoopback(server.port(), "");
  const int half = testing::ConnectLoopback(server.port(), "PRI * HTTP/2.0\r\n");
  ASSERT_GE(silent, 0);
  ASSERT_GE(half, 0);
  EXPECT_TRUE(ClosedByPeerWithin(silent, absl::Seconds(20)));
  EXPECT_TRUE(ClosedByPeerWithin(half, absl::Seconds(20)));
  close(silent);
  close(half);
  // A client that does handshake is served as before.
  EXPECT_TRUE(Status(server.address()).ok());
}

}  // namespace
}  // namespace windquant::net
