// Bearer-token authentication of windquant RPCs (DESIGN.md section 6: "a bearer token
// checked on every call when configured").
//
// Client side: BearerTokenInterceptorFactory adds "authorization: Bearer <token>" to every
// call of a channel (plaintext or TLS; AccessTokenCredentials would refuse plaintext).
// Server side: BearerTokenChecker decides per call from the request metadata; server.cc
// installs it as a core auth metadata processor on the listening port, so a call with a
// missing or wrong token fails with UNAUTHENTICATED before any handler runs.
// Each refused call counts in windquant_net_rpc_errors_total{code="UNAUTHENTICATED"}
// when the server has a metrics registry (rpc_metrics.h).
//
// Exemption: calls to grpc.health.v1.Health are not checked, because Kubernetes' gRPC
// liveness/readiness probes cannot send metadata; health answers carry no run data.
// In-process channels (GrpcServer::InProcessChannel) bypass transport security and the
// check: they exist only inside one trusted process.
//
// Tokens never appear in logs, status messages or metrics.
#ifndef WINDQUANT_COMMON_NET_AUTH_H_
#define WINDQUANT_COMMON_NET_AUTH_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/client_interceptor.h"

namespace windquant::net {

inline constexpr absl::string_view kAuthorizationHeader = "authorization";
inline constexpr absl::string_view kHealthServicePathPrefix = "/grpc.health.v1.Health/";

// Reads the token file named by service.tls.bearer_token_file; surrounding whitespace
// (the trailing newline) is dropped. NOT_FOUND / INVALID_ARGUMENT
// ("service.tls.bearer_token_file: <path>: bearer token file is empty", or has
// characters outside printable ASCII). The message never contains the token.
absl::StatusOr<std::string> ReadBearerTokenFile(const std::string& path);

// What a PEM file given for TLS must hold.
enum class PemKind { kCertificates, kPrivateKey };

// Reads a PEM file named by `key` ("service.tls.ca_file") and checks that OpenSSL parses
// it as `kind` (at least one X.509 certificate, or a private key), so that a bogus file is
// refused before any connection instead of failing (or being skipped) at the handshake.
// NOT_FOUND / INVALID_ARGUMENT "KEY: PATH: no PEM certificate OpenSSL can parse".
absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view key,
                                        PemKind kind);

// Compares in time independent of where the strings differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// Decides whether one call may proceed. Thread-safe (immutable).
class BearerTokenChecker {
 public:
  explicit BearerTokenChecker(std::string token) : token_(std::move(token)) {}

  // `path` is the ":path" of the call ("/windquant.v1.Learner/GetRunStatus"), empty if
  // unknown; `authorization` the value of the authorization header, empty if absent.
  // OK, or UNAUTHENTICATED "missing bearer token" / "invalid bearer token".
  absl::Status Check(absl::string_view path, absl::string_view authorization) const;

 private:
  const std::string token_;
};

// Adds the bearer token to every call of the channels it is installed on.
class BearerTokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(const std::string& token)
      : header_value_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override;

 private:
  const std::string header_value_;
};

}  // namespace windquant::net

#endif  // WINDQUANT_COMMON_NET_AUTH_H_
