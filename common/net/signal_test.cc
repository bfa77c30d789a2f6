// Loopback process test: a server process (net_drain_test_server) receives SIGTERM while a
// call is in flight, finishes the call and exits 0.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include "common/net/channel.h"
#include "common/net/health_client.h"
#include "gtest/gtest.h"
#include "windquant/v1/learner.grpc.pb.h"

extern char** environ;

namespace windquant::net {
namespace {

// Reads one line from the child's stdout ("" at EOF).
std::string ReadLine(FILE* f) {
  char* line = nullptr;
  size_t cap = 0;
  const ssize_t n = getline(&line, &cap, f);
  std::string out = n > 0 ? std::string(line, n) : "";
  free(line);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(SignalDrainTest, SigtermFinishesInFlightCallAndExitsZero) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  const char* path = WQ_DRAIN_TEST_SERVER;
  char* argv[] = {const_cast<char*>(path), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, path, &actions, nullptr, argv, environ), 0) << path;
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  FILE* out = fdopen(fds[0], "r");
  ASSERT_NE(out, nullptr);

  const std::string port_line = ReadLine(out);
  ASSERT_EQ(port_line.rfind("port ", 0), 0u) << "child said: " << port_line;
  ChannelOptions options;
  options.target = "127.0.0.1:" + port_line.substr(5);
  auto channel = MakeChannel(options).value();
  EXPECT_EQ(CheckHealth(channel, "", absl::Seconds(10)).value(),
            grpc::health::v1::HealthCheckResponse::SERVING);

  grpc::Status call_status;
  v1::RunStatus reply;
  std::thread caller([&] {
    auto stub = v1::Learner::NewStub(channel);
    grpc::ClientContext context;
    ConfigureContext(context, absl::Seconds(30));
    call_status = stub->GetRunStatus(&context, v1::RunStatusRequest(), &reply);
  });
  EXPECT_EQ(ReadLine(out), "in-flight");  // the call is being handled now
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  caller.join();
  EXPECT_TRUE(call_status.ok()) << call_status.error_message();
  EXPECT_EQ(reply.episodes(), 99);

  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus)) << "killed by signal " << WTERMSIG(wstatus);
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
  fclose(out);
  EXPECT_EQ(CheckHealth(channel, "", absl::Seconds(2)).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace windquant::net
