// GrpcServer keeps answering while clients stall: streams that are opened and never
// written or read, TCP connections that send nothing or half the HTTP/2 preface.
// A real server on 127.0.0.1:0, real channels and raw sockets.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/net/channel.h"
#include "common/net/health_client.h"
#include "common/net/server.h"
#include "common/testing/http_client.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
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
      ++entered_;
      max_in_flight_ = std::max(max_in_flight_, in_flight_);
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
    return Await([n](const StallLearner* l) { return l->in_flight_ >= n; }, timeout);
  }
  // Waits (bounded) until at most `n` streams are inside the handler.
  bool AwaitInFlightAtMost(int n, absl::Duration timeout) {
    return Await([n](const StallLearner* l) { return l->in_flight_ <= n; }, timeout);
  }
  // Waits (bounded) until `n` streams have entered the handler in all.
  bool AwaitEntered(int n, absl::Duration timeout) {
    return Await([n](const StallLearner* l) { return l->entered_ >= n; }, timeout);
  }
  int max_in_flight() {
    absl::MutexLock lock(&mu_);
    return max_in_flight_;
  }

 private:
  bool Await(std::function<bool(const StallLearner*)> predicate, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    predicate_ = std::move(predicate);
    return mu_.AwaitWithTimeout(absl::Condition(this, &StallLearner::Reached), timeout);
  }
  bool Reached() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return predicate_(this); }

  absl::Mutex mu_;
  std::function<bool(const StallLearner*)> predicate_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  int max_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
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

// Streams that are opened on one channel and then never written to: each on a thread
// of its own that waits for the server to end it (opening a stream blocks while its
// connection is at its stream limit) and keeps its status.
class StalledStreams {
 public:
  StalledStreams(v1::Learner::Stub* stub, int n) {
    for (int i = 0; i < n; ++i) {
      contexts_.push_back(std::make_unique<grpc::ClientContext>());
      ConfigureContext(*contexts_.back(), absl::Seconds(120));
    }
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, stub, context = contexts_[i].get()] {
        auto stream = stub->StreamTransitions(context);
        v1::TransitionAck ack;
        while (stream->Read(&ack)) {
        }
        const grpc::Status status = stream->Finish();
        absl::MutexLock lock(&mu_);
        ended_.push_back(status);
      });
    }
  }
  ~StalledStreams() { CancelAndJoin(); }

  // Waits (bounded) until the server ended `n` of the streams.
  bool AwaitEnded(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    target_ = n;
    return mu_.AwaitWithTimeout(absl::Condition(this, &StalledStreams::Reached), timeout);
  }
  // The statuses of the streams ended so far.
  std::vector<grpc::Status> ended() {
    absl::MutexLock lock(&mu_);
    return ended_;
  }
  void CancelAndJoin() {
    for (auto& context : contexts_) context->TryCancel();
    for (auto& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }

 private:
  bool Reached() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(ended_.size()) >= target_;
  }

  std::vector<std::unique_ptr<grpc::ClientContext>> contexts_;
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  std::vector<grpc::Status> ended_ ABSL_GUARDED_BY(mu_);
  int target_ ABSL_GUARDED_BY(mu_) = 0;
};

std::string Codes(const std::vector<grpc::Status>& statuses) {
  std::string out;
  for (const grpc::Status& s : statuses) out += std::to_string(s.error_code()) + " ";
  return out;
}

// GetRunStatus; `own_connection`: on a connection of its own (channels to one target
// share their connection otherwise).
grpc::Status Status(const std::string& address, bool own_connection = false) {
  ChannelOptions options;
  options.target = address;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = v1::Learner::NewStub(
      own_connection ? grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)
                     : MakeChannel(options).value());
  grpc::ClientContext context;
  ConfigureContext(context, absl::Seconds(5));
  v1::RunStatus reply;
  grpc::Status s = stub->GetRunStatus(&context, v1::RunStatusRequest(), &reply);
  if (s.ok() && reply.episodes() != 7) return grpc::Status(grpc::StatusCode::INTERNAL, "reply");
  return s;
}

// A GrpcServer serving a StallLearner on 127.0.0.1:0 and a stub on a channel to it.
class GrpcServerStallTest : public ::testing::Test {
 protected:
  void Serve(const ServerOptions& options) {
    server_ = std::make_unique<GrpcServer>(options);
    server_->AddService(&learner_, v1::Learner::service_full_name());
    ASSERT_TRUE(server_->Start().ok());
    channel_options_.target = server_->address();
    stub_ = v1::Learner::NewStub(MakeChannel(channel_options_).value());
  }

  StallLearner learner_;
  std::unique_ptr<GrpcServer> server_;
  ChannelOptions channel_options_;  // to server_
  std::unique_ptr<v1::Learner::Stub> stub_;
};

// error-case: net.stalled-clients
TEST_F(GrpcServerStallTest, StalledStreamsAndConnectionsDoNotBlockCalls) {
  ServerOptions options;
  options.handshake_timeout = absl::Seconds(60);  // the stalled connections stay open
  ASSERT_NO_FATAL_FAILURE(Serve(options));

  // Streams that are opened and then never written to nor read from.
  constexpr int kStreams = 24;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<v1::TransitionBatch, v1::TransitionAck>>>
      streams;
  for (int i = 0; i < kStreams; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    ConfigureContext(*contexts.back(), absl::Seconds(120));
    streams.push_back(stub_->StreamTransitions(contexts.back().get()));
  }
  ASSERT_TRUE(learner_.AwaitInFlight(kStreams, absl::Seconds(30)))
      << "the streams never reached the handler";
  // Connections that send nothing, half the HTTP/2 preface, or garbage.
  std::vector<int> raw;
  for (int i = 0; i < 16; ++i) {
    raw.push_back(testing::ConnectLoopback(server_->port(), ""));
    raw.push_back(testing::ConnectLoopback(server_->port(), "PRI * HTTP/2.0\r\n"));
    ASSERT_GE(raw[raw.size() - 1], 0);
    ASSERT_GE(raw[raw.size() - 2], 0);
  }
  for (int i = 0; i < 5; ++i) {
    const absl::Time start = absl::Now();
    grpc::Status s = Status(server_->address());  // a fresh connection each time
    EXPECT_TRUE(s.ok()) << i << ": " << s.error_message();
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  }
  for (int fd : raw) close(fd);
  for (auto& context : contexts) context->TryCancel();
  for (auto& stream : streams) (void)stream->Finish();
  server_->Shutdown(absl::Now() + absl::Seconds(5));
}

// error-case: net.handshake-timeout
TEST_F(GrpcServerStallTest, ConnectionsThatNeverHandshakeAreClosed) {
  ServerOptions options;
  options.handshake_timeout = absl::Milliseconds(500);
  ASSERT_NO_FATAL_FAILURE(Serve(options));
  const int silent = testing::ConnectLoopback(server_->port(), "");
  const int half = testing::ConnectLoopback(server_->port(), "PRI * HTTP/2.0\r\n");
  ASSERT_GE(silent, 0);
  ASSERT_GE(half, 0);
  EXPECT_TRUE(ClosedByPeerWithin(silent, absl::Seconds(20)));
  EXPECT_TRUE(ClosedByPeerWithin(half, absl::Seconds(20)));
  close(silent);
  close(half);
  // A client that does handshake is served as before.
  EXPECT_TRUE(Status(server_->address()).ok());
}

// error-case: net.bounded-concurrency
TEST_F(GrpcServerStallTest, StreamsPastTheThreadCapAreRefusedAndOthersAreAnswered) {
  ServerOptions options;
  options.max_threads = 6;
  ASSERT_NO_FATAL_FAILURE(Serve(options));
  constexpr int kStreams = 20;
  StalledStreams stalled(stub_.get(), kStreams);
  // A stream past the cap is refused at once; the others hold their handler threads.
  ASSERT_TRUE(stalled.AwaitEnded(kStreams - options.max_threads, absl::Seconds(30)))
      << "streams past the cap were not refused: " << Codes(stalled.ended());
  for (const grpc::Status& s : stalled.ended()) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  }
  EXPECT_LE(learner_.max_in_flight(), options.max_threads);
  EXPECT_GE(learner_.max_in_flight(), 1);
  // Everything else is answered within a deadline: health (gRPC's callback threads) says
  // SERVING; a unary call gets its answer or RESOURCE_EXHAUSTED at once, never a hang.
  for (int i = 0; i < 3; ++i) {
    const absl::Time start = absl::Now();
    auto health = CheckHealth(MakeChannel(channel_options_).value(), "", absl::Seconds(5));
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, grpc::health::v1::HealthCheckResponse::SERVING);
    const grpc::Status s = Status(server_->address());
    EXPECT_TRUE(s.ok() || s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED)
        << s.error_code() << ": " << s.error_message();
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  }
  stalled.CancelAndJoin();
  server_->Shutdown(absl::Now() + absl::Seconds(5));
}

// error-case: net.stream-idle-timeout
TEST_F(GrpcServerStallTest, IdleStreamsAreCancelledAndBusyOnesAreNot) {
  ServerOptions options;
  options.stream_idle_timeout = absl::Milliseconds(200);
  ASSERT_NO_FATAL_FAILURE(Serve(options));
  constexpr int kStreams = 8;
  StalledStreams stalled(stub_.get(), kStreams);
  // The server ends every stalled stream (these clients cancel nothing) and frees the
  // handler threads they held.
  ASSERT_TRUE(stalled.AwaitEnded(kStreams, absl::Seconds(30))) << Codes(stalled.ended());
  for (const grpc::Status& s : stalled.ended()) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
  }
  EXPECT_TRUE(learner_.AwaitEntered(kStreams, absl::Seconds(30)));
  EXPECT_TRUE(learner_.AwaitInFlightAtMost(0, absl::Seconds(30)));
  // A stream that keeps sending for 5 idle timeouts is left alone.
  grpc::ClientContext context;
  ConfigureContext(context, absl::Seconds(60));
  auto busy = stub_->StreamTransitions(&context);
  const absl::Time until = absl::Now() + 5 * options.stream_idle_timeout;
  int64_t sent = 0;
  while (absl::Now() < until) {
    ASSERT_TRUE(busy->Write(v1::TransitionBatch())) << "after " << sent << " messages";
    ++sent;
  }
  busy->WritesDone();
  const grpc::Status s = busy->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(Status(server_->address()).ok());
  server_->Shutdown(absl::Now() + absl::Seconds(5));
}

// error-case: net.streams-per-connection
TEST_F(GrpcServerStallTest, OneConnectionCannotOpenMoreThanItsStreams) {
  ServerOptions options;
  options.max_streams_per_connection = 4;
  ASSERT_NO_FATAL_FAILURE(Serve(options));
  StalledStreams stalled(stub_.get(), 12);
  ASSERT_TRUE(learner_.AwaitInFlight(4, absl::Seconds(30)));
  EXPECT_TRUE(Status(server_->address(), /*own_connection=*/true).ok());  // another is served
  // The other eight wait at their client: neither in a handler nor refused.
  EXPECT_EQ(learner_.max_in_flight(), 4);
  EXPECT_TRUE(stalled.ended().empty()) << Codes(stalled.ended());
  stalled.CancelAndJoin();
  EXPECT_EQ(stalled.ended().size(), 12u);
  server_->Shutdown(absl::Now() + absl::Seconds(5));
}

}  // namespace
}  // namespace windquant::net
