// Client channels of windquant processes: plaintext, TLS or mutual TLS, a bearer token on
// every call (any transport), max message size, RPC metrics, fast reconnects; and
// in-process channels to a GrpcServer (`windquant quantize` wires all services in one
// process with the same stubs).
//
//   net::ChannelOptions options =
//       net::ChannelOptionsFromConfig(config.service, config.service.learner_address).value();
//   auto channel = net::MakeChannel(options).value();
//   auto stub = windquant::v1::Learner::NewStub(channel);
//   grpc::Status s = net::RetryWithBackoff([&] {
//     grpc::ClientContext ctx;
//     net::ConfigureContext(ctx, options.default_deadline);
//     return stub->GetRunStatus(&ctx, request, &reply);
//   }, net::RetryPolicy{});
//
// Thread-safety: the functions are thread-safe; channels are thread-safe.
#ifndef WINDQUANT_COMMON_NET_CHANNEL_H_
#define WINDQUANT_COMMON_NET_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "common/net/peer_options.h"
#include "common/net/server.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace windquant::net {

struct ChannelOptions {
  std::string target;  // "host:port" (or any gRPC target URI)
  // TLS when ca_file is set: the server must present a certificate signed by it (and
  // valid for the target host, or for server_name_override). cert_file + key_file:
  // the client certificate for mutual TLS.
  std::string ca_file, cert_file, key_file;
  std::string server_name_override;  // tests / IP targets with a DNS-name certificate
  std::string bearer_token;          // the token itself; empty = none
  int64_t max_message_bytes = 64 << 20;
  absl::Duration default_deadline = absl::Seconds(30);
  // Reconnect backoff of the channel (gRPC's default starts at 1 s). Retries of
  // RetryWithBackoff cannot be faster than the channel's reconnects.
  absl::Duration min_reconnect_backoff = absl::Milliseconds(100);
  absl::Duration max_reconnect_backoff = absl::Seconds(5);
  metrics::Registry* registry = nullptr;  // RPC metrics; nullptr = none
};

// The client side of the `service` section for `target`: TLS files (ca_file verifies the
// server; cert_file/key_file are presented as client certificate when
// require_client_cert), bearer_token_file, max_message_bytes, rpc_deadline_ms. A ca_file
// alone means TLS (never plaintext); require_client_cert without cert_file is an error.
// Errors name the key ("service.tls.bearer_token_file: ...").
absl::StatusOr<ChannelOptions> ChannelOptionsFromConfig(const PeerOptions& service,
                                                        const std::string& target);

// A channel to options.target (connects lazily). Errors: INVALID_ARGUMENT (empty target,
// cert without key, message size), NOT_FOUND / INVALID_ARGUMENT for PEM files (missing,
// or holding no certificate / key OpenSSL can parse, checked before any connection).
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ChannelOptions& options);
// MakeChannel(ChannelOptionsFromConfig(service, target)) with RPC metrics in `registry`
// (nullptr = none): the channel of every windquant process to a peer.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannelFromConfig(const PeerOptions& service,
                                                                     const std::string& target,
                                                                     metrics::Registry* registry);

// A channel into `server` in this process (started); target and TLS fields are ignored,
// the token, message size and metrics apply. FAILED_PRECONDITION if not started.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeInProcessChannel(GrpcServer& server,
                                                                    const ChannelOptions& options);

// Prepares a context for one call: deadline now + `timeout` (every windquant call has a
// deadline). `wait_for_ready` queues the call while the channel connects instead of
// failing fast with UNAVAILABLE (use for calls that may precede the server's start).
void ConfigureContext(grpc::ClientContext& context, absl::Duration timeout,
                      bool wait_for_ready = false);

}  // namespace windquant::net

#endif  // WINDQUANT_COMMON_NET_CHANNEL_H_
