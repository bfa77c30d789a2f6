#include "common/testing/moto_server.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/testing/http_client.h"
#include "common/testing/shell.h"

namespace windquant::testing {
namespace {

constexpr int kServerStartTimeoutMs = 30000;
constexpr int kServerStopTimeoutMs = 5000;

}  // namespace

bool MotoServer::Start(const std::string& binary, const std::string& log_path,
                       const std::map<std::string, std::string>& env) {
  auto port = PickFreePort();
  if (!port.ok()) return false;
  port_ = *port;
  pid_ = fork();
  if (pid_ < 0) return false;
  if (pid_ == 0) {
    setpgid(0, 0);
    FILE* log = std::fopen(log_path.c_str(), "w");
    if (log != nullptr) {
      dup2(fileno(log), 1);
      dup2(fileno(log), 2);
    }
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    const std::string port = std::to_string(port_);
    execl(binary.c_str(), binary.c_str(), "-H", "127.0.0.1", "-p", port.c_str(), nullptr);
    _exit(127);
  }
  setpgid(pid_, pid_);
  // Bounded readiness poll: the server has no other way to tell us.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kServerStartTimeoutMs);
  while (std::chrono::steady_clock::now() < deadline) {
    if (CanConnect(port_)) return true;
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Stop();
  return false;
}

void MotoServer::Stop() {
  if (pid_ <= 0) return;
  kill(-pid_, SIGTERM);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kServerStopTimeoutMs);
  int status;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
}

std::string MotoServer::endpoint() const { return absl::StrCat("http://127.0.0.1:", port_); }

void MotoServer::SetDummyAwsEnvironment() {
  setenv("AWS_ACCESS_KEY_ID", "testing", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "testing", 1);
  setenv("AWS_DEFAULT_REGION", "us-east-1", 1);
  setenv("AWS_CONFIG_FILE", "/dev/null", 1);
  setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null", 1);
  setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
}

std::string MotoServer::StartForSuite(const std::string& log_path, std::string* moto_bin,
                                      std::string* aws_bin) {
  *moto_bin = FindOnPath("moto_server");
  *aws_bin = FindOnPath("aws");
  if (moto_bin->empty() || aws_bin->empty()) {
    return "moto_server and/or aws not found on PATH (the machine's Python has both)";
  }
  SetDummyAwsEnvironment();
  if (!Start(*moto_bin, log_path)) return "moto_server did not start; see " + log_path;
  return "";
}

}  // namespace windquant::testing
