// Starts a real Prometheus server that scrapes our MetricsServer and checks, through
// Prometheus' HTTP API, that it ingested our values. Label: integration.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/metrics/http_server.h"
#include "common/metrics/metric_names.h"
#include "common/metrics/registry.h"
#include "common/testing/http_client.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace windquant::metrics {
namespace {

constexpr char kPrometheus[] = "/usr/bin/prometheus";
constexpr auto kTimeout = std::chrono::seconds(60);
constexpr auto kPollInterval = std::chrono::milliseconds(200);

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string RunAndCapture(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[1024];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

// Owns the Prometheus child process; the destructor terminates it (SIGTERM, then SIGKILL
// after 10 s) so a failing assertion never leaves it running.
class PrometheusProcess {
 public:
  ~PrometheusProcess() { Kill(); }

  bool Start(const std::vector<std::string>& args, const std::filesystem::path& log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) pid_ = -1;
    return rc == 0;
  }

  // True while the child has not exited.
  bool Alive() {
    if (pid_ <= 0) return false;
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }

  void Kill() {
    if (!Alive()) return;
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

// The value of an instant query's single sample as Prometheus prints it, or nullopt
// while Prometheus is not up or has no sample yet.
std::optional<std::string> QueryValue(int web_port, const std::string& query) {
  auto r = ::windquant::testing::HttpRequest(
      absl::StrCat("http://127.0.0.1:", web_port,
                   "/api/v1/query?query=", ::windquant::testing::UrlEscape(query)));
  if (!r.ok() || r->status != 200) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || j.value("status", "") != "success") return std::nullopt;
  const nlohmann::json& result = j["data"]["result"];
  if (!result.is_array() || result.size() != 1) return std::nullopt;
  return result[0]["value"][1].get<std::string>();
}

TEST(PrometheusIntegrationTest, PrometheusScrapesOurServer) {
  ASSERT_EQ(access(kPrometheus, X_OK), 0)
      << kPrometheus << " not found (Debian package 'prometheus': scripts/install-deps.sh)";
  const std::string version = RunAndCapture(absl::StrCat(kPrometheus, " --version 2>&1"));
  std::cout << "prometheus --version:\n" << version << std::flush;
  ::testing::Test::RecordProperty("prometheus_version", version.substr(0, version.find('\n')));

  Registry registry;
  ASSERT_TRUE(RegisterWindquantMetrics(registry).ok());
  Gauge& policy_version = GaugeFamily(registry, kLearnerPolicyVersion).value()->Get();
  policy_version.Set(42);
  CounterFamily(registry, kNetRpcErrorsTotal).value()->Labels({"UNAVAILABLE"}).Inc(3);
  Histogram& eval = HistogramFamily(registry, kEvaluatorEvaluationDurationSeconds).value()->Get();
  for (double v : {0.2, 3.0, 30.0}) eval.Observe(v);

  MetricsServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  MetricsServer server(&registry, options);
  ASSERT_TRUE(server.Start().ok());

  char dir_template[] = "/tmp/wq_prometheus_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::filesystem::path dir = dir_template;
  const std::filesystem::path config = dir / "prometheus.yml";
  const std::filesystem::path log = dir / "prometheus.log";
  std::ofstream(config) << "global:\n"
                           "  scrape_interval: 1s\n"
                           "  scrape_timeout: 1s\n"
                           "  evaluation_interval: 1s\n"
                           "scrape_configs:\n"
                           "  - job_name: windquant\n"
                           "    static_configs:\n"
                           "      - targets: ['127.0.0.1:"
                        << server.port() << "']\n";
  absl::StatusOr<int> web_port = ::windquant::testing::PickFreePort();
  ASSERT_TRUE(web_port.ok()) << web_port.status();

  PrometheusProcess prometheus;
  ASSERT_TRUE(prometheus.Start(
      {kPrometheus, absl::StrCat("--config.file=", config.string()),
       absl::StrCat("--web.listen-address=127.0.0.1:", *web_port),
       absl::StrCat("--storage.tsdb.path=", (dir / "data").string()), "--log.level=info"},
      log));

  // Bounded polling: Prometheus needs a few seconds to start and one scrape interval.
  auto wait_for = [&](const std::string& query, const std::string& want) {
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    std::optional<std::string> got;
    while (std::chrono::steady_clock::now() < deadline && prometheus.Alive()) {
      got = QueryValue(*web_port, query);
      if (got == want) return ::testing::AssertionSuccess();
      std::this_thread::sleep_for(kPollInterval);
    }
    return ::testing::AssertionFailure()
           << query << ": want " << want << ", got " << got.value_or("<no sample>")
           << (prometheus.Alive() ? "" : " (prometheus exited)") << "\n--- prometheus log ---\n"
           << ReadAll(log);
  };
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(wait_for("windquant_learner_policy_version", "42"));
  std::cout << "first sample after "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s\n";
  EXPECT_TRUE(wait_for("up{job=\"windquant\"}", "1"));
  EXPECT_TRUE(wait_for("windquant_net_rpc_errors_total{code=\"UNAVAILABLE\"}", "3"));
  EXPECT_TRUE(wait_for("windquant_evaluator_evaluation_duration_seconds_count", "3"));
  EXPECT_TRUE(wait_for("windquant_evaluator_evaluation_duration_seconds_bucket{le=\"5\"}", "2"));
  // A later update reaches Prometheus too: scraping repeats.
  policy_version.Set(43);
  EXPECT_TRUE(wait_for("windquant_learner_policy_version", "43"));

  prometheus.Kill();
  EXPECT_FALSE(prometheus.Alive());
  server.Stop();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace windquant::metrics
