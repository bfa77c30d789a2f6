// MetricsServer: the HTTP endpoint of every windquant process (civetweb).
//
// Serves exactly two resources and nothing else (no files, no directory listings):
//   GET/HEAD /metrics  -> the registry in text format 0.0.4 (text_format.h)
//   GET/HEAD /healthz  -> "ok"
// Any other path is 404, any other method 405.
//
// Ownership: borrows the Registry, which must outlive the server.
// Thread-safety: all methods are thread-safe; the destructor stops the server.
#ifndef WINDQUANT_COMMON_METRICS_HTTP_SERVER_H_
#define WINDQUANT_COMMON_METRICS_HTTP_SERVER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/registry.h"

struct mg_context;
struct mg_connection;

namespace windquant::metrics {

struct MetricsServerOptions {
  // IPv4 or IPv6 literal to bind (no host names): "0.0.0.0" in a pod, "127.0.0.1" for
  // local runs and tests.
  std::string address = "127.0.0.1";
  // 0 = let the kernel pick a free port; read it back with port().
  int port = 0;
  int num_threads = 2;
  int request_timeout_ms = 10000;
};

class MetricsServer {
 public:
  MetricsServer(Registry* registry, MetricsServerOptions options);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds and starts serving. Errors: INVALID_ARGUMENT (address/port/threads),
  // FAILED_PRECONDITION (already running), UNAVAILABLE (cannot bind, with civetweb's text).
  absl::Status Start();
  // Stops serving and waits for in-flight requests; no-op when not running.
  void Stop();

  // The bound port while running (the picked one when options.port == 0), else 0.
  int port() const;
  bool running() const;

 private:
  static int HandleRequest(struct mg_connection* conn);

  Registry* const registry_;
  const MetricsServerOptions options_;
  mutable absl::Mutex mu_;
  mg_context* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  int port_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace windquant::metrics

#endif  // WINDQUANT_COMMON_METRICS_HTTP_SERVER_H_
