// GrpcServer: the gRPC server of every windquant process (learner, evaluator, actor, the
// in-process `windquant quantize`).
//
//   net::ServerOptions options = net::ServerOptionsFromConfig(config.service, addr).value();
//   options.registry = &metrics::Registry::Default();
//   net::GrpcServer server(options);
//   server.AddService(&learner_service, windquant::v1::Learner::service_full_name());
//   WQ_RETURN_IF_ERROR(server.Start());           // binds; port() is the picked port
//   net::SignalWaiter::Block(); ... net::SignalWaiter().Wait();   // SIGTERM/SIGINT
//   server.Drain(absl::Now() + absl::Seconds(20));
//
// It provides: address with port 0 -> kernel-picked port; max message size both ways;
// grpc.health.v1 (grpc++'s default health service: "" and every added service SERVING
// after Start); TLS or mutual TLS (TlsOptions); a bearer-token check on every call when a
// token is set (auth.h: UNAUTHENTICATED before any handler; grpc.health.v1 exempt for
// kubelet probes); RPC metrics (rpc_metrics.h) when given a registry; graceful drain.
// No client can hold the server (server_stall_test.cc): at most max_threads handler
// threads run at once (a grpc::ResourceQuota; past it a call fails at once with
// RESOURCE_EXHAUSTED, which clients retry with backoff, while grpc.health.v1 runs on
// gRPC's callback threads and keeps answering); one connection has at most
// max_streams_per_connection streams open; a stream that sends and receives nothing for
// stream_idle_timeout is cancelled (stream_idle_reaper.h), freeing its thread; the server
// pings idle connections (keepalive) and closes those whose peer is gone; a connection
// that never completes its handshake is closed after handshake_timeout.
//
// Ownership: borrows the services and the registry; both must outlive the server.
// Thread-safety: Start before any other call except AddService; the rest is thread-safe.
#ifndef WINDQUANT_COMMON_NET_SERVER_H_
#define WINDQUANT_COMMON_NET_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "common/net/peer_options.h"
#include "grpcpp/channel.h"
#include "grpcpp/impl/service_type.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"

namespace windquant::net {

struct ServerOptions {
  std::string address = "127.0.0.1:0";  // host:port; port 0 = pick one
  int64_t max_message_bytes = 64 << 20;
  // TLS: PEM file paths. Empty cert_file and key_file = plaintext. ca_file verifies
  // client certificates; require_client_cert makes them mandatory (mutual TLS).
  std::string cert_file, key_file, ca_file;
  bool require_client_cert = false;
  std::string bearer_token;               // the token itself (not a path); empty = no check
  metrics::Registry* registry = nullptr;  // RPC metrics; nullptr = none
  // A connection must finish its TLS handshake and send its HTTP/2 settings within
  // this time, else the server closes it: silent or half-open clients cannot pile up
  // (gRPC's default is 120 s).
  absl::Duration handshake_timeout = absl::Seconds(20);
  // Bounded concurrency. Handler threads at once (streams in flight hold one each: the
  // learner's two per actor, the actors' Forward/Calibrate passes); the rest are refused
  // with RESOURCE_EXHAUSTED rather than growing the process without bound.
  int max_threads = 256;
  // HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: further streams of a connection wait at
  // its client.
  int max_streams_per_connection = 100;
  // A streaming call with no message either way for this long is cancelled (its
  // clients reconnect); InfiniteDuration() = never.
  absl::Duration stream_idle_timeout = absl::Minutes(10);
  // The server pings a connection after keepalive_time without activity and closes it
  // when the ping is not answered within keepalive_timeout (a vanished peer).
  absl::Duration keepalive_time = absl::Minutes(1);
  absl::Duration keepalive_timeout = absl::Seconds(20);
};

// Maps the `service` section (max message size, tls.*) onto ServerOptions for `address`,
// reading tls.bearer_token_file. Errors name the key ("service.tls.key_file: ...").
absl::StatusOr<ServerOptions> ServerOptionsFromConfig(const PeerOptions& service,
                                                      const std::string& address);

class GrpcServer;

// A started server of one windquant service: ServerOptionsFromConfig(service, address)
// with RPC metrics in `registry` (nullptr = none), `impl` added under `health_name`.
// Errors: those of ServerOptionsFromConfig and Start.
absl::StatusOr<std::unique_ptr<GrpcServer>> StartServer(const PeerOptions& service,
                                                        const std::string& address,
                                                        metrics::Registry* registry,
                                                        grpc::Service* impl,
                                                        const std::string& health_name);

class GrpcServer {
 public:
  explicit GrpcServer(ServerOptions options);
  // Shuts down at once (cancelling in-flight calls) if still running.
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Registers a service before Start, under its health name (the full proto name,
  // "windquant.v1.Learner" = windquant::v1::Learner::service_full_name()). Borrowed.
  void AddService(grpc::Service* service, const std::string& health_name);

  // Binds and starts. Errors: FAILED_PRECONDITION (started twice), INVALID_ARGUMENT
  // (options: message size, cert without key, require_client_cert without ca_file, ca_file
  // without cert_file: never a plaintext port when TLS was asked for; a PEM file that
  // OpenSSL cannot parse),
  // NOT_FOUND (a PEM file), UNAVAILABLE (cannot bind the address).
  absl::Status Start();

  // The bound port (the picked one for port 0); 0 before Start.
  int port() const;
  // "host:port" with the bound port, for clients.
  std::string address() const;

  // Health of one service ("" = the whole server). No-op after Shutdown.
  void SetServing(const std::string& service, bool serving);
  // Every health status NOT_SERVING; calls are still served (readiness drops first).
  void EnterNotServing();
  // EnterNotServing, then Shutdown(deadline).
  void Drain(absl::Time deadline);
  // Stops accepting calls, lets in-flight calls finish until `deadline`, then cancels the
  // rest; returns when every handler has returned. Idempotent.
  void Shutdown(absl::Time deadline);
  // Blocks until Shutdown has completed (from another thread).
  void Wait();

  // A channel to this server inside the process (no sockets, no TLS, no token check:
  // in-process callers are trusted). Use MakeInProcessChannel (channel.h).
  std::shared_ptr<grpc::Channel> InProcessChannel(
      const grpc::ChannelArguments& args,
      std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
          interceptors);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace windquant::net

#endif  // WINDQUANT_COMMON_NET_SERVER_H_
