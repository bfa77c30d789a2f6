#include "common/net/channel.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/net/auth.h"
#include "common/net/rpc_metrics.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace windquant::net {
namespace {

using InterceptorFactories =
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>;

absl::Status CheckCommon(const ChannelOptions& options) {
  if (options.max_message_bytes <= 0 || options.max_message_bytes > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "service.max_message_bytes: must be in [1, 2^31), got ", options.max_message_bytes));
  }
  return absl::OkStatus();
}

grpc::ChannelArguments MakeArguments(const ChannelOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  args.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  const int min_ms = static_cast<int>(absl::ToInt64Milliseconds(options.min_reconnect_backoff));
  const int max_ms = static_cast<int>(absl::ToInt64Milliseconds(options.max_reconnect_backoff));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, min_ms);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, min_ms);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_ms);
  if (!options.server_name_override.empty()) {
    args.SetSslTargetNameOverride(options.server_name_override);
  }
  return args;
}

absl::StatusOr<InterceptorFactories> MakeInterceptors(const ChannelOptions& options) {
  InterceptorFactories factories;
  if (options.registry != nullptr) {
    auto metrics = RpcMetrics::Create(options.registry);
    if (!metrics.ok()) return metrics.status();
    factories.push_back(std::make_unique<RpcMetricsClientInterceptorFactory>(*metrics));
  }
  if (!options.bearer_token.empty()) {
    factories.push_back(std::make_unique<BearerTokenInterceptorFactory>(options.bearer_token));
  }
  return factories;
}

}  // namespace

absl::StatusOr<ChannelOptions> ChannelOptionsFromConfig(const PeerOptions& service,
                                                        const std::string& target) {
  ChannelOptions options;
  options.target = target;
  options.max_message_bytes = service.max_message_bytes;
  options.default_deadline = absl::Milliseconds(service.rpc_deadline_ms);
  // A TLS server (cert_file set) is verified against ca_file. A ca_file alone (a client
  // such as `windquant status --ca-file`) asks for TLS too: it is never dropped for
  // plaintext, so a plaintext server fails the handshake instead of being trusted.
  if (!service.tls.cert_file.empty() && service.tls.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "service.tls.ca_file: required to verify TLS servers when cert_file is set");
  }
  if (service.tls.require_client_cert && service.tls.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "service.tls.require_client_cert: needs cert_file and key_file (the client certificate)");
  }
  options.ca_file = service.tls.ca_file;
  if (service.tls.require_client_cert) {
    options.cert_file = service.tls.cert_file;
    options.key_file = service.tls.key_file;
  }
  if (!service.tls.bearer_token_file.empty()) {
    WQ_ASSIGN_OR_RETURN(options.bearer_token, ReadBearerTokenFile(service.tls.bearer_token_file));
  }
  return options;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ChannelOptions& options) {
  if (options.target.empty()) return absl::InvalidArgumentError("channel: empty target");
  absl::Status common = CheckCommon(options);
  if (!common.ok()) return common;
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "service.tls: client cert_file and key_file must be set together");
  }
  if (!options.cert_file.empty() && options.ca_file.empty()) {
    return absl::InvalidArgumentError("service.tls.ca_file: required for a client certificate");
  }
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options.ca_file.empty()) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    auto ca = ReadPemFile(options.ca_file, "service.tls.ca_file", PemKind::kCertificates);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
    if (!options.cert_file.empty()) {
      auto cert = ReadPemFile(options.cert_file, "service.tls.cert_file", PemKind::kCertificates);
      if (!cert.ok()) return cert.status();
      auto key = ReadPemFile(options.key_file, "service.tls.key_file", PemKind::kPrivateKey);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    creds = grpc::SslCredentials(ssl);
  }
  auto interceptors = MakeInterceptors(options);
  if (!interceptors.ok()) return interceptors.status();
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      options.target, creds, MakeArguments(options), *std::move(interceptors));
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannelFromConfig(const PeerOptions& service,
                                                                     const std::string& target,
                                                                     metrics::Registry* registry) {
  absl::StatusOr<ChannelOptions> options = ChannelOptionsFromConfig(service, target);
  if (!options.ok()) return options.status();
  options->registry = registry;
  return MakeChannel(*options);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeInProcessChannel(GrpcServer& server,
                                                                    const ChannelOptions& options) {
  absl::Status common = CheckCommon(options);
  if (!common.ok()) return common;
  auto interceptors = MakeInterceptors(options);
  if (!interceptors.ok()) return interceptors.status();
  auto channel = server.InProcessChannel(MakeArguments(options), *std::move(interceptors));
  if (channel == nullptr) {
    return absl::FailedPreconditionError("in-process channel: server not started");
  }
  return channel;
}

void ConfigureContext(grpc::ClientContext& context, absl::Duration timeout, bool wait_for_ready) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  if (wait_for_ready) context.set_wait_for_ready(true);
}

}  // namespace windquant::net
