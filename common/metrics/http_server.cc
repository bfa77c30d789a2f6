#include "common/metrics/http_server.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>

#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/metrics/text_format.h"

namespace windquant::metrics {
namespace {

void InitCivetwebOnce() {
  static std::once_flag once;
  std::call_once(once, [] { mg_init_library(0); });
}

// civetweb logs bind failures etc. to stderr by default; they reach the caller through
// mg_start2's error text instead.
int SilenceLog(const struct mg_connection*, const char*) { return 1; }

int Reply(struct mg_connection* conn, int status, const char* content_type,
          const std::string& body, bool head, const char* extra_header = nullptr) {
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", content_type, -1);
  mg_response_header_add(conn, "Content-Length", std::to_string(body.size()).c_str(), -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  if (extra_header != nullptr) mg_response_header_add_lines(conn, extra_header);
  {
    // civetweb 1.15 formats the Date header with gmtime(), whose static buffer is shared
    // by all worker threads (ThreadSanitizer reports it); serialise our header sends.
    static std::mutex* const header_mu = new std::mutex;
    std::lock_guard<std::mutex> lock(*header_mu);
    mg_response_header_send(conn);
  }
  if (!head && !body.empty()) mg_write(conn, body.data(), body.size());
  return status;
}

}  // namespace

MetricsServer::MetricsServer(Registry* registry, MetricsServerOptions options)
    : registry_(registry), options_(std::move(options)) {}

MetricsServer::~MetricsServer() { Stop(); }

int MetricsServer::HandleRequest(struct mg_connection* conn) {
  const struct mg_request_info* info = mg_get_request_info(conn);
  auto* self = static_cast<MetricsServer*>(info->user_data);
  const char* uri = info->local_uri != nullptr ? info->local_uri : "";
  const char* method = info->request_method != nullptr ? info->request_method : "";
  const bool head = std::strcmp(method, "HEAD") == 0;
  const bool get = std::strcmp(method, "GET") == 0;
  const bool known = std::strcmp(uri, "/metrics") == 0 || std::strcmp(uri, "/healthz") == 0;
  const char* kPlain = "text/plain; charset=utf-8";
  if (!known) return Reply(conn, 404, kPlain, "not found\n", head);
  if (!get && !head) return Reply(conn, 405, kPlain, "method not allowed\n", false, "Allow: GET, HEAD");
  if (std::strcmp(uri, "/healthz") == 0) return Reply(conn, 200, kPlain, "ok\n", head);
  return Reply(conn, 200, kTextContentType, self->registry_->TextExposition(), head);
}

absl::Status MetricsServer::Start() {
  if (options_.address.empty()) {
    return absl::InvalidArgumentError("metrics server: address must not be empty");
  }
  unsigned char addr[sizeof(struct in6_addr)];
  const bool ipv4 = inet_pton(AF_INET, options_.address.c_str(), addr) == 1;
  const bool ipv6 = !ipv4 && inet_pton(AF_INET6, options_.address.c_str(), addr) == 1;
  if (!ipv4 && !ipv6) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics server: address '", options_.address, "' is not an IPv4/IPv6 literal"));
  }
  if (options_.port < 0 || options_.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics server: port ", options_.port, " not in [0, 65535]"));
  }
  if (options_.num_threads < 1) {
    return absl::InvalidArgumentError("metrics server: num_threads must be >= 1");
  }
  absl::MutexLock lock(&mu_);
  if (context_ != nullptr) {
    return absl::FailedPreconditionError("metrics server: already running");
  }
  InitCivetwebOnce();
  const std::string listen = ipv6 ? absl::StrCat("[", options_.address, "]:", options_.port)
                                  : absl::StrCat(options_.address, ":", options_.port);
  const std::string threads = std::to_string(options_.num_threads);
  const std::string timeout = std::to_string(options_.request_timeout_ms);
  const char* config[] = {"listening_ports", listen.c_str(),
                          "num_threads", threads.c_str(),
                          "request_timeout_ms", timeout.c_str(),
                          "enable_directory_listing", "no",
                          "enable_keep_alive", "no",
                          nullptr};
  struct mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.begin_request = &MetricsServer::HandleRequest;  // handles every request
  callbacks.log_message = &SilenceLog;
  struct mg_init_data init;
  std::memset(&init, 0, sizeof(init));
  init.callbacks = &callbacks;
  init.user_data = this;
  init.configuration_options = config;
  char error_text[256] = {0};
  unsigned error_code = 0;
  struct mg_error_data error;
  std::memset(&error, 0, sizeof(error));
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof(error_text);
  mg_context* context = mg_start2(&init, &error);
  if (context == nullptr) {
    return absl::UnavailableError(absl::StrCat("metrics server: cannot listen on ", listen, ": ",
                                               error_text[0] ? error_text : "unknown error"));
  }
  struct mg_server_port ports[4];
  std::memset(ports, 0, sizeof(ports));
  const int n = mg_get_server_ports(context, 4, ports);
  if (n < 1 || ports[0].port <= 0) {
    mg_stop(context);
    return absl::UnavailableError(
        absl::StrCat("metrics server: cannot read the bound port of ", listen));
  }
  context_ = context;
  port_ = ports[0].port;
  return absl::OkStatus();
}

void MetricsServer::Stop() {
  // Holding mu_ through mg_stop serialises Start/Stop; request handlers never take mu_,
  // so waiting for them here cannot deadlock.
  absl::MutexLock lock(&mu_);
  if (context_ == nullptr) return;
  mg_stop(context_);
  context_ = nullptr;
  port_ = 0;
}

int MetricsServer::port() const {
  absl::MutexLock lock(&mu_);
  return port_;
}

bool MetricsServer::running() const {
  absl::MutexLock lock(&mu_);
  return context_ != nullptr;
}

}  // namespace windquant::metrics
