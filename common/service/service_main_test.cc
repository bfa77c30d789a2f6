// Loopback process test of the service-main skeleton (service_main.h): the exit codes,
// the one-line errors, the printed ports and the drain on SIGTERM, with a fake service
// (service_main_test_server.cc) run as a child process.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/base/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace windquant::service {
namespace {

using ::testing::HasSubstr;

struct Child {
  pid_t pid = 0;
  FILE* out = nullptr;  // the child's stdout
  std::string err_file;
};

// Starts the test server with `args` (after --config) and WQ_FAKE_SERVICE=mode; its
// stderr goes to a file.
Child Spawn(const std::string& mode, std::vector<std::string> args) {
  const std::string dir = ::testing::TempDir() + "/service_main_test";
  std::filesystem::create_directories(dir);
  Child c;
  c.err_file = dir + "/stderr-" + mode + ".txt";
  // The fake's `load` only reads the file: the run config is job/service_run_config.h's.
  EXPECT_TRUE(base::WriteFileAtomic(dir + "/run.yaml", "fake: {}\n").ok());
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, c.err_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  args.insert(args.begin(), WQ_SERVICE_MAIN_TEST_SERVER);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string env_mode = "WQ_FAKE_SERVICE=" + mode;
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  env.push_back(const_cast<char*>(env_mode.c_str()));
  env.push_back(nullptr);
  EXPECT_EQ(posix_spawn(&c.pid, argv[0], &actions, nullptr, argv.data(), env.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  c.out = fdopen(fds[0], "r");
  return c;
}

std::string ReadLine(FILE* f) {
  char* line = nullptr;
  size_t cap = 0;
  const ssize_t n = getline(&line, &cap, f);
  std::string out = n > 0 ? std::string(line, n) : "";
  free(line);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

struct Exit {
  int code = -1;
  std::string err;
};

Exit Wait(Child& c) {
  while (!ReadLine(c.out).empty()) {
  }
  fclose(c.out);
  int status = 0;
  Exit e;
  if (waitpid(c.pid, &status, 0) == c.pid && WIFEXITED(status)) e.code = WEXITSTATUS(status);
  e.err = base::ReadFile(c.err_file).value_or("");
  return e;
}

Exit RunChild(const std::string& mode, const std::vector<std::string>& args) {
  Child c = Spawn(mode, args);
  return Wait(c);
}

int Lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

std::vector<std::string> Config() {
  return {"--config", ::testing::TempDir() + "/service_main_test/run.yaml", "--metrics-port", "0"};
}

TEST(ServiceMainTest, HelpPrintsUsageAndExitsZero) {
  Child c = Spawn("", {"--help"});
  EXPECT_EQ(ReadLine(c.out), "usage: fake-service --config F");
  const Exit e = Wait(c);
  EXPECT_EQ(e.code, 0);
}

// error-case: service.bad-flags
TEST(ServiceMainTest, BadFlagsExitTwoWithOneLine) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--bogus"},
        std::vector<std::string>{"--config", "/nonexistent.yaml"},
        std::vector<std::string>{"--metrics-port", "x"}}) {
    const Exit e = RunChild("", args);
    EXPECT_EQ(e.code, 2) << args[0] << ": " << e.err;
    EXPECT_EQ(Lines(e.err), 1) << e.err;
    EXPECT_THAT(e.err, HasSubstr("fake-service: ")) << e.err;
  }
}

// error-case: service.role-config
TEST(ServiceMainTest, AConfigTheRoleCannotUseExitsTwo) {
  const Exit e = RunChild("bad-config", Config());
  EXPECT_EQ(e.code, 2);
  EXPECT_EQ(e.err, "fake-service: fake.key: must be positive\n");
}

// error-case: service.start-failure
TEST(ServiceMainTest, FailuresWhileStartingExitOne) {
  Exit e = RunChild("create-fails", Config());
  EXPECT_EQ(e.code, 1);
  EXPECT_EQ(e.err, "fake-service: fake: cannot load\n");
  e = RunChild("start-fails", Config());
  EXPECT_EQ(e.code, 1);
  EXPECT_EQ(e.err, "fake: stopped\nfake-service: fake: peer unreachable\n")
      << "a service that fails to start is stopped";
}

TEST(ServiceMainTest, PrintsItsPortsServesAndDrainsOnSigterm) {
  Child c = Spawn("", Config());
  EXPECT_EQ(ReadLine(c.out), "fake_port=4242");
  const std::string metrics = ReadLine(c.out);
  ASSERT_EQ(metrics.rfind("metrics_port=", 0), 0u) << metrics;
  EXPECT_GT(std::stoi(metrics.substr(13)), 0);
  ASSERT_EQ(kill(c.pid, SIGTERM), 0);
  const Exit e = Wait(c);
  EXPECT_EQ(e.code, 0);
  EXPECT_THAT(e.err, HasSubstr("fake-service: serving on port 4242, /metrics on port "));
  EXPECT_THAT(e.err, HasSubstr("fake: stopped"));
}

}  // namespace
}  // namespace windquant::service
