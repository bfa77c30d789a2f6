// RPC metrics of every windquant process (metric_names.h, "net"):
//   windquant_net_sent_bytes_total, windquant_net_received_bytes_total  (message payloads)
//   windquant_net_rpc_errors_total{code}                                (failed RPCs)
// counted by a server interceptor (GrpcServer installs it when given a registry) and a
// client interceptor (MakeChannel installs it likewise). Each side counts what it
// observes: with both ends in one process and one registry, a failed call counts twice
// (once per side) and a message once as sent and once as received.
// Calls the server refuses in its bearer-token check (auth.h) fail in gRPC core before
// any interceptor runs; GrpcServer counts them from the check itself, as
// {code="UNAUTHENTICATED"}, so every refused call counts once on the server too.
//
// Bytes are the serialized protobuf sizes (before compression and framing). Messages are
// assumed to be protobufs, except on the server for grpc.health.v1 (grpc++'s default
// health service uses raw ByteBuffers): generic stubs/services must not be intercepted.
//
// Ownership: borrows the Registry, which must outlive every server/channel using it.
// Thread-safety: thread-safe.
#ifndef WINDQUANT_COMMON_NET_RPC_METRICS_H_
#define WINDQUANT_COMMON_NET_RPC_METRICS_H_

#include "absl/status/statusor.h"
#include "common/metrics/registry.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/server_interceptor.h"

namespace windquant::net {

// The cached families of one registry.
class RpcMetrics {
 public:
  // Registers (or looks up) the three families. Errors as Registry::Add*.
  static absl::StatusOr<RpcMetrics> Create(metrics::Registry* registry);

  void AddSentBytes(double n) { sent_->Inc(n); }
  void AddReceivedBytes(double n) { received_->Inc(n); }
  // No-op for OK.
  void CountError(grpc::StatusCode code);

 private:
  RpcMetrics() = default;
  metrics::Counter* sent_ = nullptr;
  metrics::Counter* received_ = nullptr;
  metrics::Family<metrics::Counter>* errors_ = nullptr;
};

class RpcMetricsServerInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsServerInterceptorFactory(RpcMetrics metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  RpcMetrics metrics_;
};

class RpcMetricsClientInterceptorFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit RpcMetricsClientInterceptorFactory(RpcMetrics metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override;

 private:
  RpcMetrics metrics_;
};

}  // namespace windquant::net

#endif  // WINDQUANT_COMMON_NET_RPC_METRICS_H_
