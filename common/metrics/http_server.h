// MetricsServer: the HTTP endpoint of every windquant process.
//
// Serves exactly two resources and nothing else (no files, no directory listings):
//   GET/HEAD /metrics  -> the registry in text format 0.0.4 (text_format.h), then the
//                         process_* families of this process (process_metrics.h)
//   GET/HEAD /healthz  -> "ok"
// Any other path is 404, any other method 405. One request per connection
// (HTTP/1.1 with "Connection: close"); a request must arrive within
// request_timeout_ms and its head must fit in 16 KiB (else 408 / 431).
// No client can hold the server: every loop serves all its connections at once
// on non-blocking sockets, so clients that connect and send nothing, send half a
// request or never read the answer delay nobody else, and at max_connections the
// oldest connection is dropped for a new one.
//
// A minimal server of its own on POSIX sockets rather than civetweb: the Debian
// civetweb is built with a fixed 100 KiB thread stack (USE_STACK_SIZE=102400),
// smaller than the static TLS block of a process that links libtorch (OpenBLAS
// alone reserves 60 KiB per thread), so its worker threads could not even be
// created in the service binaries ("Cannot create first worker thread"). The
// threads here are std::threads with the default stack.
//
// Ownership: borrows the Registry, which must outlive the server.
// Thread-safety: all methods are thread-safe; the destructor stops the server.
#ifndef WINDQUANT_COMMON_METRICS_HTTP_SERVER_H_
#define WINDQUANT_COMMON_METRICS_HTTP_SERVER_H_

#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/registry.h"

namespace windquant::metrics {

struct MetricsServerOptions {
  // IPv4 or IPv6 literal to bind (no host names): "0.0.0.0" in a pod, "127.0.0.1" for
  // local runs and tests.
  std::string address = "127.0.0.1";
  // 0 = let the kernel pick a free port; read it back with port().
  int port = 0;
  // Serving loops; each serves many connections at once (non-blocking sockets).
  int num_threads = 2;
  // Time a connection may take from accept to the end of its answer (else 408).
  int request_timeout_ms = 10000;
  // Open connections at most (split over the loops); at the limit the oldest
  // connection is dropped (503) for the new one.
  int max_connections = 64;
};

class MetricsServer {
 public:
  MetricsServer(Registry* registry, MetricsServerOptions options);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds and starts serving. Errors: INVALID_ARGUMENT (address/port/threads),
  // FAILED_PRECONDITION (already running), UNAVAILABLE (cannot bind, naming the
  // address and the system's reason).
  absl::Status Start();
  // Stops serving and waits for in-flight requests; no-op when not running.
  void Stop();

  // The bound port while running (the picked one when options.port == 0), else 0.
  int port() const;
  bool running() const;

 private:
  // One serving loop: accepts and serves connections until the wake pipe becomes
  // readable.
  void Serve(int listen_fd, int wake_fd) const;

  Registry* const registry_;
  const MetricsServerOptions options_;
  mutable absl::Mutex mu_;
  int listen_fd_ ABSL_GUARDED_BY(mu_) = -1;
  int wake_read_fd_ ABSL_GUARDED_BY(mu_) = -1;
  int wake_write_fd_ ABSL_GUARDED_BY(mu_) = -1;
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
  int port_ ABSL_GUARDED_BY(mu_) = 0;
};

// Parses "host:port" (host an IPv4/IPv6 literal, IPv6 optionally in brackets;
// port 0..65535) into options.address/port. `key` names the setting in errors
// ("service.metrics_address: ..."). INVALID_ARGUMENT for anything else.
absl::Status ParseMetricsAddress(const std::string& host_port, const std::string& key,
                                 MetricsServerOptions* options);

}  // namespace windquant::metrics

#endif  // WINDQUANT_COMMON_METRICS_HTTP_SERVER_H_
