#include "common/net/server.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/net/auth.h"
#include "common/net/rpc_metrics.h"
#include "common/net/stream_idle_reaper.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace windquant::net {
namespace {

absl::string_view SliceView(const grpc_slice& slice) {
  return absl::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)),
                           GRPC_SLICE_LENGTH(slice));
}

// State of one port's auth metadata processor.
struct AuthProcessorState {
  BearerTokenChecker checker;
  // The server's RPC metrics, if any. A refused call fails in gRPC core's auth filter,
  // before the C++ layer (and so the metrics interceptor) sees it: it is counted here.
  std::optional<RpcMetrics> metrics;
};

// Core auth metadata processor running BearerTokenChecker on every call. Using the core
// API (not grpc::AuthMetadataProcessor) lets plaintext ports check tokens too: grpc++'s
// InsecureServerCredentials refuses a processor.
void ProcessAuthMetadata(void* state, grpc_auth_context* /*context*/, const grpc_metadata* md,
                         size_t num_md, grpc_process_auth_metadata_done_cb cb, void* user_data) {
  auto* auth = static_cast<AuthProcessorState*>(state);
  const BearerTokenChecker* checker = &auth->checker;
  absl::string_view path, authorization;
  for (size_t i = 0; i < num_md; ++i) {
    const absl::string_view key = SliceView(md[i].key);
    if (key == ":path") path = SliceView(md[i].value);
    if (key == kAuthorizationHeader) authorization = SliceView(md[i].value);
  }
  const absl::Status status = checker->Check(path, authorization);
  if (status.ok()) {
    cb(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_OK, nullptr);
  } else {
    const std::string message(status.message());  // never contains the token
    if (auth->metrics.has_value()) auth->metrics->CountError(grpc::StatusCode::UNAUTHENTICATED);
    cb(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_UNAUTHENTICATED, message.c_str());
  }
}

void DestroyAuthState(void* state) { delete static_cast<AuthProcessorState*>(state); }

// Server credentials built from the core API: plaintext or TLS, plus the token processor.
class WindquantServerCredentials final : public grpc::ServerCredentials {
 public:
  WindquantServerCredentials(std::string cert_pem, std::string key_pem, std::string ca_pem,
                             bool require_client_cert, std::string bearer_token,
                             std::optional<RpcMetrics> metrics)
      : cert_pem_(std::move(cert_pem)),
        key_pem_(std::move(key_pem)),
        ca_pem_(std::move(ca_pem)),
        require_client_cert_(require_client_cert),
        bearer_token_(std::move(bearer_token)),
        metrics_(metrics) {}

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/) override {
    // Tokens are configured through the constructor; nothing else installs processors.
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    grpc_server_credentials* creds = nullptr;
    if (cert_pem_.empty()) {
      creds = grpc_insecure_server_credentials_create();
    } else {
      grpc_ssl_pem_key_cert_pair pair{key_pem_.c_str(), cert_pem_.c_str()};
      const grpc_ssl_client_certificate_request_type request =
          require_client_cert_ ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
          : ca_pem_.empty()    ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                               : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
      creds = grpc_ssl_server_credentials_create_ex(ca_pem_.empty() ? nullptr : ca_pem_.c_str(),
                                                    &pair, 1, request, nullptr);
    }
    if (!bearer_token_.empty()) {
      grpc_auth_metadata_processor processor{
          ProcessAuthMetadata, DestroyAuthState,
          new AuthProcessorState{BearerTokenChecker(bearer_token_), metrics_}};
      grpc_server_credentials_set_auth_metadata_processor(creds, processor);
    }
    const int port = grpc_server_add_http2_port(server, addr.c_str(), creds);
    grpc_server_credentials_release(creds);
    return port;
  }

  const std::string cert_pem_, key_pem_, ca_pem_;
  const bool require_client_cert_;
  const std::string bearer_token_;
  const std::optional<RpcMetrics> metrics_;  // counts refused calls; borrows the registry
};

// max_threads, max_streams_per_connection, keepalive (ServerOptions).
absl::Status ApplyConcurrencyBounds(const ServerOptions& o, grpc::ServerBuilder* builder) {
  if (o.max_threads < 2 || o.max_streams_per_connection < 1 ||
      o.stream_idle_timeout <= absl::ZeroDuration() || o.keepalive_time <= absl::ZeroDuration() ||
      o.keepalive_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "server: max_threads >= 2, max_streams_per_connection >= 1 and positive durations");
  }
  grpc::ResourceQuota quota("windquant-server");
  quota.SetMaxThreads(o.max_threads);
  builder->SetResourceQuota(quota);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, o.max_streams_per_connection);
  const auto ms = [](absl::Duration d) {
    return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(d), INT32_MAX));
  };
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms(o.keepalive_time));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(o.keepalive_timeout));
  // Ping connections whose streams are all stalled too (no data frames flow).
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerOptions> ServerOptionsFromConfig(const PeerOptions& service,
                                                      const std::string& address) {
  ServerOptions options;
  options.address = address;
  options.max_message_bytes = service.max_message_bytes;
  options.cert_file = service.tls.cert_file;
  options.key_file = service.tls.key_file;
  options.ca_file = service.tls.ca_file;
  options.require_client_cert = service.tls.require_client_cert;
  if (!service.tls.bearer_token_file.empty()) {
    WQ_ASSIGN_OR_RETURN(options.bearer_token, ReadBearerTokenFile(service.tls.bearer_token_file));
  }
  return options;
}

class GrpcServer::Impl {
 public:
  explicit Impl(ServerOptions options) : options_(std::move(options)) {}

  ServerOptions options_;
  std::vector<std::pair<grpc::Service*, std::string>> services_;
  // Registered when no service is: grpc++ refuses a server without methods, and a
  // health-only server is legitimate. Answers UNIMPLEMENTED to every call.
  grpc::CallbackGenericService no_methods_;
  std::unique_ptr<StreamIdleReaper> idle_reaper_;  // outlives server_ (declared first)
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_started_ ABSL_GUARDED_BY(mu_) = false;
};

GrpcServer::GrpcServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

GrpcServer::~GrpcServer() {
  if (impl_->server_ != nullptr) Shutdown(absl::Now());
}

void GrpcServer::AddService(grpc::Service* service, const std::string& health_name) {
  impl_->services_.emplace_back(service, health_name);
}

absl::Status GrpcServer::Start() {
  if (impl_->server_ != nullptr) return absl::FailedPreconditionError("server already started");
  const ServerOptions& o = impl_->options_;
  if (o.max_message_bytes <= 0 || o.max_message_bytes > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("service.max_message_bytes: must be in [1, 2^31), got ", o.max_message_bytes));
  }
  if (o.cert_file.empty() != o.key_file.empty()) {
    return absl::InvalidArgumentError("service.tls: cert_file and key_file must be set together");
  }
  if (o.require_client_cert && (o.cert_file.empty() || o.ca_file.empty())) {
    return absl::InvalidArgumentError(
        "service.tls.require_client_cert: needs cert_file, key_file and ca_file");
  }
  // A ca_file asks to verify clients, which only a TLS port can: never serve plaintext.
  if (!o.ca_file.empty() && o.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "service.tls.ca_file: set without cert_file and key_file (a plaintext server cannot "
        "verify clients)");
  }
  std::string cert_pem, key_pem, ca_pem;
  if (!o.cert_file.empty()) {
    auto cert = ReadPemFile(o.cert_file, "service.tls.cert_file", PemKind::kCertificates);
    if (!cert.ok()) return cert.status();
    auto key = ReadPemFile(o.key_file, "service.tls.key_file", PemKind::kPrivateKey);
    if (!key.ok()) return key.status();
    cert_pem = *std::move(cert);
    key_pem = *std::move(key);
    if (!o.ca_file.empty()) {
      auto ca = ReadPemFile(o.ca_file, "service.tls.ca_file", PemKind::kCertificates);
      if (!ca.ok()) return ca.status();
      ca_pem = *std::move(ca);
    }
  }

  std::optional<RpcMetrics> metrics;
  if (o.registry != nullptr) {
    auto created = RpcMetrics::Create(o.registry);
    if (!created.ok()) return created.status();
    metrics = *created;
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  auto creds = std::make_shared<WindquantServerCredentials>(
      std::move(cert_pem), std::move(key_pem), std::move(ca_pem), o.require_client_cert,
      o.bearer_token, metrics);
  builder.AddListeningPort(o.address, creds, &impl_->port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(o.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(o.handshake_timeout)));
  WQ_RETURN_IF_ERROR(ApplyConcurrencyBounds(o, &builder));
  for (auto& [service, name] : impl_->services_) builder.RegisterService(service);
  if (impl_->services_.empty()) builder.RegisterCallbackGenericService(&impl_->no_methods_);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> f;
  if (o.stream_idle_timeout != absl::InfiniteDuration()) {
    impl_->idle_reaper_ = std::make_unique<StreamIdleReaper>(o.stream_idle_timeout);
    f.push_back(impl_->idle_reaper_->InterceptorFactory());  // first: see its header
  }
  if (metrics.has_value()) {
    f.push_back(std::make_unique<RpcMetricsServerInterceptorFactory>(*metrics));
  }
  if (!f.empty()) builder.experimental().SetInterceptorCreators(std::move(f));
  impl_->server_ = builder.BuildAndStart();
  if (impl_->server_ == nullptr || impl_->port_ == 0) {
    impl_->server_.reset();
    impl_->port_ = 0;
    return absl::UnavailableError(absl::StrCat("service: cannot listen on ", o.address));
  }
  grpc::HealthCheckServiceInterface* health = impl_->server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus("", true);
    for (auto& [service, name] : impl_->services_) health->SetServingStatus(name, true);
  }
  return absl::OkStatus();
}

int GrpcServer::port() const { return impl_->port_; }

std::string GrpcServer::address() const {
  const std::string& a = impl_->options_.address;
  const size_t colon = a.rfind(':');
  return absl::StrCat(colon == std::string::npos ? a : a.substr(0, colon), ":", impl_->port_);
}

void GrpcServer::SetServing(const std::string& service, bool serving) {
  if (impl_->server_ == nullptr) return;
  grpc::HealthCheckServiceInterface* health = impl_->server_->GetHealthCheckService();
  if (health != nullptr) health->SetServingStatus(service, serving);
}

void GrpcServer::EnterNotServing() {
  if (impl_->server_ == nullptr) return;
  grpc::HealthCheckServiceInterface* health = impl_->server_->GetHealthCheckService();
  if (health != nullptr) health->SetServingStatus(false);
}

void GrpcServer::Drain(absl::Time deadline) {
  EnterNotServing();
  Shutdown(deadline);
}

void GrpcServer::Shutdown(absl::Time deadline) {
  if (impl_->server_ == nullptr) return;
  {
    absl::MutexLock lock(&impl_->mu_);
    if (impl_->shutdown_started_) {
      impl_->mu_.Await(absl::Condition(&impl_->shut_down_));
      return;
    }
    impl_->shutdown_started_ = true;
  }
  impl_->server_->Shutdown(absl::ToChronoTime(deadline));
  impl_->server_->Wait();
  absl::MutexLock lock(&impl_->mu_);
  impl_->shut_down_ = true;
}

void GrpcServer::Wait() {
  if (impl_->server_ == nullptr) return;
  absl::MutexLock lock(&impl_->mu_);
  impl_->mu_.Await(absl::Condition(&impl_->shut_down_));
}

std::shared_ptr<grpc::Channel> GrpcServer::InProcessChannel(
    const grpc::ChannelArguments& args,
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
        interceptors) {
  if (impl_->server_ == nullptr) return nullptr;
  if (interceptors.empty()) return impl_->server_->InProcessChannel(args);
  return impl_->server_->experimental().InProcessChannelWithInterceptors(args,
                                                                         std::move(interceptors));
}

absl::StatusOr<std::unique_ptr<GrpcServer>> StartServer(const PeerOptions& service,
                                                        const std::string& address,
                                                        metrics::Registry* registry,
                                                        grpc::Service* impl,
                                                        const std::string& health_name) {
  absl::StatusOr<ServerOptions> options = ServerOptionsFromConfig(service, address);
  if (!options.ok()) return options.status();
  options->registry = registry;
  auto server = std::make_unique<GrpcServer>(*std::move(options));
  server->AddService(impl, health_name);
  absl::Status s = server->Start();
  if (!s.ok()) return s;
  return server;
}

}  // namespace windquant::net
