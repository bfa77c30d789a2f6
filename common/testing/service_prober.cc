#include "common/testing/service_prober.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/net/health_client.h"
#include "common/testing/http_client.h"

namespace windquant::testing {

const char* ProbeName(Probe probe) {
  switch (probe) {
    case Probe::kMetrics:
      return "/metrics";
    case Probe::kHealthz:
      return "/healthz";
    case Probe::kGrpcHealth:
      return "grpc.health.v1";
    case Probe::kRpc:
      return "rpc";
  }
  return "?";
}

LatencySummary Summarize(std::vector<double> ms) {
  LatencySummary s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  auto rank = [&ms](double q) {
    const size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(ms.size())));
    return ms[std::min(ms.size() - 1, i == 0 ? 0 : i - 1)];
  };
  s.count = static_cast<int64_t>(ms.size());
  s.p50 = rank(0.50);
  s.p99 = rank(0.99);
  s.max = ms.back();
  return s;
}

ServiceProber::ServiceProber(ServiceProberOptions options) : options_(std::move(options)) {}

ServiceProber::~ServiceProber() { Stop(); }

void ServiceProber::Start() {
  thread_ = std::thread([this] { Run(); });
}

void ServiceProber::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool ServiceProber::WaitForRounds(int64_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return rounds_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

int64_t ServiceProber::rounds() const {
  absl::MutexLock lock(&mu_);
  return rounds_;
}

std::array<ProbeSamples, kNumProbes> ServiceProber::TakeSamples() {
  absl::MutexLock lock(&mu_);
  return std::exchange(samples_, std::array<ProbeSamples, kNumProbes>());
}

void ServiceProber::Record(Probe probe, absl::Time start, const std::string& failure) {
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  absl::MutexLock lock(&mu_);
  ProbeSamples& s = samples_[static_cast<int>(probe)];
  if (failure.empty()) {
    s.ms.push_back(ms);
  } else {
    s.failures.push_back(absl::StrCat(ProbeName(probe), ": ", failure));
  }
}

void ServiceProber::Run() {
  const std::string base = absl::StrCat("http://127.0.0.1:", options_.metrics_port);
  auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
  absl::Time next = absl::Now();
  while (true) {
    absl::Time t = absl::Now();
    absl::StatusOr<HttpResponse> m = HttpRequest(base + "/metrics");
    std::string why;
    if (!m.ok()) {
      why = std::string(m.status().message());
    } else if (m->status != 200) {
      why = absl::StrCat("HTTP ", m->status);
    } else if (m->body.find(options_.metrics_must_contain) == std::string::npos) {
      why = absl::StrCat("no ", options_.metrics_must_contain, " in the answer");
    }
    Record(Probe::kMetrics, t, why);
    t = absl::Now();
    absl::StatusOr<HttpResponse> h = HttpRequest(base + "/healthz");
    why = !h.ok() ? std::string(h.status().message())
          : h->status != 200 || h->body.find("ok") != 0
              ? absl::StrCat("HTTP ", h->status, " ", h->body)
              : "";
    Record(Probe::kHealthz, t, why);
    t = absl::Now();
    absl::StatusOr<net::ServingStatus> g = net::CheckHealth(options_.health, "", options_.deadline);
    why = !g.ok()                                                ? std::string(g.status().message())
          : *g != grpc::health::v1::HealthCheckResponse::SERVING ? net::ServingStatusName(*g)
                                                                 : "";
    Record(Probe::kGrpcHealth, t, why);
    if (options_.rpc) {
      t = absl::Now();
      const absl::Status s = options_.rpc(options_.deadline);
      Record(Probe::kRpc, t, s.ok() ? "" : std::string(s.message()));
    }
    absl::MutexLock lock(&mu_);
    ++rounds_;
    next = std::max(next + options_.interval, absl::Now());
    if (mu_.AwaitWithDeadline(absl::Condition(&stopped), next)) return;
  }
}

}  // namespace windquant::testing
