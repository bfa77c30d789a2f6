// ServiceProber: what a Prometheus scrape and a kubelet probe see of a service, for
// load tests and distributed_bench. A thread asks, one after the other, every
// `interval`: GET /metrics and GET /healthz of a MetricsServer on 127.0.0.1, and
// grpc.health.v1 Check("") on a gRPC channel, and the service's own `rpc` when given
// (the learner's GetRunStatus, which actors call with a 5 s deadline), each with a
// deadline, and records the latency of each answer. A failure is a connection error, a timeout, an
// HTTP status other than 200, a /metrics body without `metrics_must_contain`, a /healthz body other
// than "ok", a health status other than SERVING, or an error of `rpc`.
//
//   ServiceProber prober(options);
//   prober.Start();
//   ... idle ... auto idle = prober.TakeSamples();
//   ... load ... auto load = prober.TakeSamples();
//   prober.Stop();
//
// Ownership: owns its thread; shares the channel. Thread-safety: Start and Stop from
// one thread; the rest from any.
#ifndef WINDQUANT_COMMON_TESTING_SERVICE_PROBER_H_
#define WINDQUANT_COMMON_TESTING_SERVICE_PROBER_H_

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace windquant::testing {

enum class Probe { kMetrics = 0, kHealthz = 1, kGrpcHealth = 2, kRpc = 3 };
inline constexpr int kNumProbes = 4;
// "/metrics", "/healthz", "grpc.health.v1", "rpc".
const char* ProbeName(Probe probe);

struct ServiceProberOptions {
  int metrics_port = 0;                   // the MetricsServer's port on 127.0.0.1
  std::shared_ptr<grpc::Channel> health;  // a channel to the gRPC server
  absl::Duration interval = absl::Milliseconds(50);
  // Each request's deadline (the HTTP requests' is HttpRequest's own 5 s).
  absl::Duration deadline = absl::Seconds(5);
  std::string metrics_must_contain;  // "" = any body
  // One call of the service's own with this deadline; empty = no such probe.
  std::function<absl::Status(absl::Duration deadline)> rpc;
};

// The latencies of one probe, in milliseconds (answered requests only) and its failures.
struct ProbeSamples {
  std::vector<double> ms;
  std::vector<std::string> failures;  // "what: why", one per failed request
};

// Percentiles of a set of latencies (nearest rank); all 0 for an empty set.
struct LatencySummary {
  int64_t count = 0;
  double p50 = 0, p99 = 0, max = 0;
};
LatencySummary Summarize(std::vector<double> ms);

class ServiceProber {
 public:
  explicit ServiceProber(ServiceProberOptions options);
  ~ServiceProber();  // Stop
  ServiceProber(const ServiceProber&) = delete;
  ServiceProber& operator=(const ServiceProber&) = delete;

  void Start();
  void Stop();  // after the round in flight; idempotent
  // Whether `n` rounds (each of the probes) completed within `timeout`.
  bool WaitForRounds(int64_t n, absl::Duration timeout);
  int64_t rounds() const;  // completed since Start
  // The samples since Start or the last call, per Probe, and clears them.
  std::array<ProbeSamples, kNumProbes> TakeSamples();

 private:
  void Run();
  void Record(Probe probe, absl::Time start, const std::string& failure);

  const ServiceProberOptions options_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t rounds_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<ProbeSamples, kNumProbes> samples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_SERVICE_PROBER_H_
