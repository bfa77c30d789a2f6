#include "common/metrics/http_server.h"
#include "common/testing/http_client.h"
#include "common/testing/status_matchers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::windquant::testing::ConnectLoopback;
using ::windquant::testing::HttpRequest;
using ::windquant::testing::StatusIs;

MetricsServerOptions Opts(std::string address = "127.0.0.1", int port = 0, int threads = 2) {
  MetricsServerOptions o;
  o.address = std::move(address);
  o.port = port;
  o.num_threads = threads;
  return o;
}

std::string Url(const MetricsServer& server, const std::string& path) {
  return absl::StrCat("http://127.0.0.1:", server.port(), path);
}

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    episodes_ = registry_.AddCounter("windquant_learner_episodes_total", "Episodes.").value();
    errors_ = registry_.AddCounter("windquant_net_rpc_errors_total", "Errors.", {"code"}).value();
  }
  Registry registry_;
  Family<Counter>* episodes_ = nullptr;
  Family<Counter>* errors_ = nullptr;
};

TEST_F(MetricsServerTest, ServesMetricsOnEphemeralPort) {
  MetricsServer server(&registry_, Opts("127.0.0.1", 0));
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.port(), 0);
  episodes_->Get().Inc(42);
  errors_->Labels({"UNAVAILABLE"}).Inc();
  auto response = HttpRequest(Url(server, "/metrics"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_THAT(response->content_type, StartsWith("text/plain; version=0.0.4"));
  // The registry's exposition, then this process's standard process_* families.
  EXPECT_THAT(response->body, StartsWith(registry_.TextExposition()));
  EXPECT_THAT(response->body, HasSubstr("\n# TYPE process_resident_memory_bytes gauge\n"));
  EXPECT_THAT(response->body, HasSubstr("\nwindquant_learner_episodes_total 42\n"));
  EXPECT_THAT(response->body, HasSubstr("windquant_net_rpc_errors_total{code=\"UNAVAILABLE\"} 1"));
}

TEST_F(MetricsServerTest, HealthzAndNothingElse) {
  MetricsServer server(&registry_, Opts());
  ASSERT_TRUE(server.Start().ok());
  auto health = HttpRequest(Url(server, "/healthz"));
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  for (const char* path : {"/", "/metrics/", "/metricsx", "/etc/passwd", "/../../etc/passwd",
                           "/index.html", "/healthz/x"}) {
    auto r = HttpRequest(Url(server, path));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 404) << path;
    EXPECT_THAT(r->body, ::testing::Not(HasSubstr("windquant_"))) << path;
  }
  auto post = HttpRequest(Url(server, "/metrics"), "POST");
  ASSERT_TRUE(post.ok()) << post.status();
  EXPECT_EQ(post->status, 405);
  auto head = HttpRequest(Url(server, "/metrics"), "HEAD");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->body, "");
}

TEST_F(MetricsServerTest, StartStopRestart) {
  MetricsServer server(&registry_, Opts());
  EXPECT_EQ(server.port(), 0);
  EXPECT_FALSE(server.running());
  ASSERT_TRUE(server.Start().ok());
  EXPECT_THAT(server.Start(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "metrics server: already running"));
  const int first_port = server.port();
  server.Stop();
  EXPECT_FALSE(server.running());
  EXPECT_EQ(server.port(), 0);
  EXPECT_THAT(HttpRequest(absl::StrCat("http://127.0.0.1:", first_port, "/healthz")),
              StatusIs(absl::StatusCode::kUnavailable, absl::StrCat(":", first_port, "/healthz")));
  server.Stop();  // no-op
  ASSERT_TRUE(server.Start().ok());
  auto r = HttpRequest(Url(server, "/healthz"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
}

TEST_F(MetricsServerTest, RejectsBadOptionsAndBusyPort) {
  constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(MetricsServer(&registry_, Opts("localhost")).Start(),
              StatusIs(kInvalid, "metrics server: address 'localhost' is not an IPv4/IPv6"));
  EXPECT_THAT(MetricsServer(&registry_, Opts("")).Start(),
              StatusIs(kInvalid, "metrics server: address must not be empty"));
  EXPECT_THAT(MetricsServer(&registry_, Opts("127.0.0.1", 70000)).Start(),
              StatusIs(kInvalid, "metrics server: port 70000 not in [0, 65535]"));
  EXPECT_THAT(MetricsServer(&registry_, Opts("127.0.0.1", 0, 0)).Start(),
              StatusIs(kInvalid, "metrics server: num_threads must be >= 1"));
  MetricsServer first(&registry_, Opts());
  ASSERT_TRUE(first.Start().ok());
  MetricsServer second(&registry_, Opts("127.0.0.1", first.port()));
  absl::Status s = second.Start();
  EXPECT_THAT(s,
              StatusIs(absl::StatusCode::kUnavailable,
                       absl::StrCat("metrics server: cannot listen on 127.0.0.1:", first.port())));
}

TEST_F(MetricsServerTest, ConcurrentScrapesWhileUpdating) {
  MetricsServer server(&registry_, Opts("127.0.0.1", 0, 4));
  ASSERT_TRUE(server.Start().ok());
  std::atomic<bool> done{false};
  std::thread writer([&] {
    int i = 0;
    while (!done.load()) errors_->Labels({absl::StrCat("C", i++ % 50)}).Inc();
  });
  std::vector<std::thread> scrapers;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    scrapers.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        auto r = HttpRequest(Url(server, "/metrics"));
        if (r.ok() && r->status == 200 &&
            r->body.find("# TYPE windquant_net_rpc_errors_total") != std::string::npos) {
          ++ok;
        }
      }
    });
  }
  for (std::thread& t : scrapers) t.join();
  done = true;
  writer.join();
  EXPECT_EQ(ok.load(), 80);
}

// A raw connection that sends `request` and reads the answer until EOF.
std::string RawExchange(int port, const std::string& request) {
  const int fd = ConnectLoopback(port, request);
  if (fd < 0) return "connect failed";
  std::string out;
  char buf[1024];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

TEST_F(MetricsServerTest, SilentClientTimesOutWithoutBlockingOthers) {
  MetricsServerOptions o = Opts("127.0.0.1", 0, 2);
  o.request_timeout_ms = 300;
  MetricsServer server(&registry_, o);
  ASSERT_TRUE(server.Start().ok());
  std::string silent;
  std::thread t([&] { silent = RawExchange(server.port(), ""); });
  // The second worker answers while the first waits for the silent client.
  auto r = HttpRequest(Url(server, "/healthz"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  t.join();
  EXPECT_THAT(silent, StartsWith("HTTP/1.1 408"));
}

// What `fd` receives until EOF, waiting at most `timeout` in all.
std::string ReadUntilClosed(int fd, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string out;
  char buf[4096];
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()))) <= 0) {
      break;
    }
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Clients that stall in every way a client can (connect and send nothing, send
// half a request head, send a request and never read its multi-MB answer) hold
// the connections for the whole test, yet every scrape is answered at once.
// error-case: metrics.slow-clients
TEST_F(MetricsServerTest, StalledClientsDoNotBlockScrapes) {
  // An exposition of several MB: far more than a socket buffer takes while unread.
  for (int i = 0; i < 100000; ++i) errors_->Labels({absl::StrCat("CODE_", i)}).Inc();
  MetricsServerOptions o = Opts();  // two serving loops, as in the services
  o.request_timeout_ms = 120000;    // the stalled clients are not timed out during the test
  MetricsServer server(&registry_, o);
  ASSERT_TRUE(server.Start().ok());
  std::vector<int> stalled;
  for (int i = 0; i < 8; ++i) {
    stalled.push_back(ConnectLoopback(server.port(), ""));
    stalled.push_back(ConnectLoopback(server.port(), "GET /metr"));
    stalled.push_back(ConnectLoopback(server.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n"));
    stalled.push_back(ConnectLoopback(server.port(), "GET /metrics HTTP/1.1\r\n\r\n"));
  }
  for (int fd : stalled) ASSERT_GE(fd, 0);
  for (int i = 0; i < 5; ++i) {
    const absl::Time start = absl::Now();
    auto r = HttpRequest(Url(server, i % 2 == 0 ? "/healthz" : "/metrics"));  // 5 s timeout
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200);
    EXPECT_LT(absl::Now() - start, absl::Seconds(4)) << "scrape " << i;
  }
  for (int fd : stalled) close(fd);
}

// At max_connections the oldest connection makes room for a new one (503), so
// clients that open connections and send nothing cannot lock scrapers out.
// error-case: metrics.too-many-connections
TEST_F(MetricsServerTest, IdleConnectionFloodDropsTheOldest) {
  MetricsServerOptions o = Opts("127.0.0.1", 0, /*threads=*/1);  // one loop: all 8 are its
  o.request_timeout_ms = 120000;
  o.max_connections = 8;
  MetricsServer server(&registry_, o);
  ASSERT_TRUE(server.Start().ok());
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) {
    idle.push_back(ConnectLoopback(server.port(), i % 2 == 0 ? "" : "GET /"));
    ASSERT_GE(idle.back(), 0);
  }
  auto r = HttpRequest(Url(server, "/healthz"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  // The first connection was dropped with a 503 long before its timeout.
  EXPECT_THAT(ReadUntilClosed(idle.front(), absl::Seconds(10)),
              StartsWith("HTTP/1.1 503 Service Unavailable"));
  for (int fd : idle) close(fd);
  EXPECT_THAT(MetricsServer(&registry_,
                            [] {
                              MetricsServerOptions bad = Opts();
                              bad.max_connections = 1;
                              return bad;
                            }())
                  .Start(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "metrics server: max_connections must be >= num_threads"));
}

TEST_F(MetricsServerTest, RawRequestsQueryStringAndGarbage) {
  MetricsServer server(&registry_, Opts());
  ASSERT_TRUE(server.Start().ok());
  episodes_->Get().Inc(3);
  const std::string ok = RawExchange(server.port(), "GET /metrics?x=1 HTTP/1.0\r\nHost: a\r\n\r\n");
  EXPECT_THAT(ok, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(ok, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(ok, HasSubstr("\nwindquant_learner_episodes_total 3\n"));
  EXPECT_THAT(RawExchange(server.port(), "garbage\r\n\r\n"), StartsWith("HTTP/1.1 400"));
  EXPECT_THAT(RawExchange(server.port(), "GET /" + std::string(20000, 'a') + " HTTP/1.1\r\n"),
              StartsWith("HTTP/1.1 431"));
}

TEST(ParseMetricsAddressTest, HostPortForms) {
  MetricsServerOptions o;
  ASSERT_TRUE(ParseMetricsAddress("0.0.0.0:9464", "k", &o).ok());
  EXPECT_EQ(o.address, "0.0.0.0");
  EXPECT_EQ(o.port, 9464);
  ASSERT_TRUE(ParseMetricsAddress("[::1]:0", "k", &o).ok());
  EXPECT_EQ(o.address, "::1");
  EXPECT_EQ(o.port, 0);
  for (const char* bad : {"", "9464", "localhost:1", "1.2.3.4:70000", "1.2.3.4:x", ":1"}) {
    absl::Status s = ParseMetricsAddress(bad, "service.metrics_address", &o);
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, "service.metrics_address: "))
        << bad;
    EXPECT_THAT(std::string(s.message()), StartsWith("service.metrics_address: ")) << bad;
  }
}

}  // namespace
}  // namespace windquant::metrics
