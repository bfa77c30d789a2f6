#include "common/metrics/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics/process_metrics.h"
#include "common/metrics/text_format.h"

namespace windquant::metrics {
namespace {

constexpr size_t kMaxRequestHead = 16 << 10;
constexpr size_t kMaxDiscardedBody = 64 << 10;
constexpr char kPlain[] = "text/plain; charset=utf-8";

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

// Milliseconds left until `deadline` for poll(), at least 0.
int MillisLeft(absl::Time deadline) {
  const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  return ms <= 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, 60000));
}

std::string Reply(int status, absl::string_view content_type, absl::string_view body, bool head,
                  absl::string_view extra_header = "") {
  std::string out = absl::StrCat(
      "HTTP/1.1 ", status, " ", Reason(status), "\r\nContent-Type: ", content_type,
      "\r\nContent-Length: ", body.size(), "\r\nCache-Control: no-store\r\nConnection: close\r\n");
  if (!extra_header.empty()) absl::StrAppend(&out, extra_header, "\r\n");
  absl::StrAppend(&out, "\r\n");
  if (!head) absl::StrAppend(&out, body);
  return out;
}

// The value of header `name` (case-insensitive) in a request head, or "".
absl::string_view HeaderValue(absl::string_view head, absl::string_view name) {
  size_t pos = head.find("\r\n");
  while (pos != absl::string_view::npos && pos + 2 < head.size()) {
    const size_t start = pos + 2;
    const size_t end = head.find("\r\n", start);
    absl::string_view line =
        head.substr(start, end == absl::string_view::npos ? absl::string_view::npos : end - start);
    const size_t colon = line.find(':');
    if (colon != absl::string_view::npos &&
        absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(line.substr(0, colon)), name)) {
      return absl::StripAsciiWhitespace(line.substr(colon + 1));
    }
    pos = end;
  }
  return "";
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// One client connection of a serving loop: it reads the request head, writes the
// answer, then drains a request body (closing with unread bytes would reset the
// connection before the client has read the answer). Every step is non-blocking.
struct Connection {
  enum class Phase { kHead, kWrite, kDrain };
  int fd = -1;
  absl::Time deadline;
  Phase phase = Phase::kHead;
  std::string in;
  std::string out;
  size_t sent = 0;
  size_t body_left = 0;  // request body bytes still to drain after the answer
};

// Sends what the socket takes now; false when the client is gone.
bool SendSome(Connection& c) {
  while (c.sent < c.out.size()) {
    const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  }
  return true;
}

// Reads what the socket has now into c.in (kHead) or drops it (kDrain); false on EOF
// or an error.
bool ReadSome(Connection& c) {
  char buf[4096];
  while (true) {
    const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
    if (n > 0) {
      if (c.phase == Connection::Phase::kHead) {
        c.in.append(buf, static_cast<size_t>(n));
        if (c.in.size() > kMaxRequestHead || c.in.find("\r\n\r\n") != std::string::npos) {
          return true;
        }
      } else {
        c.body_left -= std::min(c.body_left, static_cast<size_t>(n));
        if (c.body_left == 0) return true;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

// After the answer: drain the body if one is announced; false when done.
bool Finished(Connection& c) {
  if (c.body_left == 0) return false;
  c.phase = Connection::Phase::kDrain;
  return true;
}

// The answer to a request head ending with one "\r\n"; *body_len: the announced body to drain.
std::string Answer(const Registry& registry, absl::string_view head, size_t* body_len) {
  const absl::string_view line = head.substr(0, head.find("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == absl::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == absl::string_view::npos) return Reply(400, kPlain, "bad request\n", false);
  const absl::string_view method = line.substr(0, sp1);
  absl::string_view path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  // A body (e.g. of a POST) is read and dropped after the answer.
  size_t length = 0;
  if (absl::SimpleAtoi(HeaderValue(head, "Content-Length"), &length) &&
      length <= kMaxDiscardedBody) {
    *body_len = length;
  }
  const bool is_head = method == "HEAD";
  const bool is_get = method == "GET";
  const bool metrics = path == "/metrics";
  const bool healthz = path == "/healthz";
  if (!metrics && !healthz) return Reply(404, kPlain, "not found\n", is_head);
  if (!is_get && !is_head) {
    return Reply(405, kPlain, "method not allowed\n", false, "Allow: GET, HEAD");
  }
  if (healthz) return Reply(200, kPlain, "ok\n", is_head);
  // The registry's families, then the standard process_* ones (memory, CPU) of this process.
  return Reply(200, kTextContentType, registry.TextExposition() + ProcessMetricsText(), is_head);
}

// Moves `c` on after poll() saw it ready; false when it is done (to be closed).
bool Step(const Registry& registry, Connection& c) {
  switch (c.phase) {
    case Connection::Phase::kHead: {
      if (!ReadSome(c)) return false;
      const size_t head_end = c.in.find("\r\n\r\n");
      if (head_end == std::string::npos && c.in.size() <= kMaxRequestHead) return true;
      if (head_end == std::string::npos) {
        c.out = Reply(431, kPlain, "request head too large\n", false);
      } else {
        size_t body_len = 0;
        c.out = Answer(registry, absl::string_view(c.in).substr(0, head_end + 2), &body_len);
        const size_t have = c.in.size() - (head_end + 4);
        c.body_left = body_len > have ? body_len - have : 0;
      }
      c.phase = Connection::Phase::kWrite;
      return SendSome(c) && (c.sent < c.out.size() || Finished(c));
    }
    case Connection::Phase::kWrite:
      return SendSome(c) && (c.sent < c.out.size() || Finished(c));
    case Connection::Phase::kDrain:
      return ReadSome(c) && c.body_left > 0;
  }
  return false;
}

}  // namespace

absl::Status ParseMetricsAddress(const std::string& host_port, const std::string& key,
                                 MetricsServerOptions* options) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": '", host_port, "' is not HOST:PORT (HOST an IP literal)"));
  }
  std::string host = host_port.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = -1;
  if (!absl::SimpleAtoi(host_port.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": port of '", host_port, "' is not in [0, 65535]"));
  }
  unsigned char buf[sizeof(struct in6_addr)];
  if (inet_pton(AF_INET, host.c_str(), buf) != 1 && inet_pton(AF_INET6, host.c_str(), buf) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": host '", host, "' is not an IPv4/IPv6 literal"));
  }
  options->address = host;
  options->port = port;
  return absl::OkStatus();
}

MetricsServer::MetricsServer(Registry* registry, MetricsServerOptions options)
    : registry_(registry), options_(std::move(options)) {}

MetricsServer::~MetricsServer() { Stop(); }

absl::Status MetricsServer::Start() {
  if (options_.address.empty()) {
    return absl::InvalidArgumentError("metrics server: address must not be empty");
  }
  in_addr addr4{};
  in6_addr addr6{};
  const bool ipv4 = inet_pton(AF_INET, options_.address.c_str(), &addr4) == 1;
  const bool ipv6 = !ipv4 && inet_pton(AF_INET6, options_.address.c_str(), &addr6) == 1;
  if (!ipv4 && !ipv6) {
    return absl::InvalidArgumentError(absl::StrCat("metrics server: address '", options_.address,
                                                   "' is not an IPv4/IPv6 literal"));
  }
  if (options_.port < 0 || options_.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics server: port ", options_.port, " not in [0, 65535]"));
  }
  if (options_.num_threads < 1) {
    return absl::InvalidArgumentError("metrics server: num_threads must be >= 1");
  }
  if (options_.max_connections < options_.num_threads || options_.request_timeout_ms < 1) {
    return absl::InvalidArgumentError(
        "metrics server: max_connections must be >= num_threads, request_timeout_ms >= 1");
  }
  absl::MutexLock lock(&mu_);
  if (listen_fd_ >= 0) return absl::FailedPreconditionError("metrics server: already running");
  const std::string listen_text = ipv6 ? absl::StrCat("[", options_.address, "]:", options_.port)
                                       : absl::StrCat(options_.address, ":", options_.port);
  auto fail = [&](int& fd, const char* what) {
    const std::string reason = std::strerror(errno);
    CloseFd(fd);
    return absl::UnavailableError(
        absl::StrCat("metrics server: cannot listen on ", listen_text, ": ", what, ": ", reason));
  };
  int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return fail(fd, "socket");
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (ipv6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(static_cast<uint16_t>(options_.port));
    sa.sin6_addr = addr6;
    rc = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  } else {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(options_.port));
    sa.sin_addr = addr4;
    rc = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  }
  if (rc != 0) return fail(fd, "bind");
  if (listen(fd, 64) != 0) return fail(fd, "listen");
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return fail(fd, "getsockname");
  }
  const int port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) return fail(fd, "pipe");
  listen_fd_ = fd;
  wake_read_fd_ = wake[0];
  wake_write_fd_ = wake[1];
  port_ = port;
  for (int i = 0; i < options_.num_threads; ++i) {
    workers_.emplace_back([this, fd, r = wake[0]] { Serve(fd, r); });
  }
  return absl::OkStatus();
}

void MetricsServer::Stop() {
  // Holding mu_ while joining serialises Start/Stop; workers never take mu_.
  absl::MutexLock lock(&mu_);
  if (listen_fd_ < 0) return;
  const char byte = 1;
  // The byte is never read: every worker sees the pipe readable and returns.
  while (write(wake_write_fd_, &byte, 1) < 0 && errno == EINTR) {
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  CloseFd(listen_fd_);
  CloseFd(wake_read_fd_);
  CloseFd(wake_write_fd_);
  port_ = 0;
}

int MetricsServer::port() const {
  absl::MutexLock lock(&mu_);
  return port_;
}

bool MetricsServer::running() const {
  absl::MutexLock lock(&mu_);
  return listen_fd_ >= 0;
}

void MetricsServer::Serve(int listen_fd, int wake_fd) const {
  // Each loop serves many connections at once, so a client that sends nothing (or
  // half a request, or never reads the answer) holds only its own connection until
  // request_timeout_ms; at the connection limit the oldest one is dropped for a new
  // one, so idle connections cannot lock scrapers out either.
  const size_t max_connections = static_cast<size_t>(
      std::max(1, options_.max_connections / std::max(1, options_.num_threads)));
  std::vector<Connection> conns;
  std::vector<pollfd> fds;
  while (true) {
    fds.assign({{listen_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}});
    absl::Time next = absl::InfiniteFuture();
    for (const Connection& c : conns) {
      fds.push_back(
          {c.fd, c.phase == Connection::Phase::kWrite ? short{POLLOUT} : short{POLLIN}, 0});
      next = std::min(next, c.deadline);
    }
    const int n =
        poll(fds.data(), fds.size(), next == absl::InfiniteFuture() ? -1 : MillisLeft(next));
    if (n < 0 && errno != EINTR) break;
    if (fds[1].revents != 0) break;
    if ((fds[0].revents & (POLLERR | POLLNVAL)) != 0) break;
    const absl::Time now = absl::Now();
    std::vector<Connection> kept;
    for (size_t i = 0; i < conns.size(); ++i) {
      Connection& c = conns[i];
      if (now >= c.deadline) {  // also a client that trickles bytes
        if (c.phase == Connection::Phase::kHead) {
          c.out = Reply(408, kPlain, "request timeout\n", false);
          SendSome(c);  // one non-blocking try: the client has had its time
        }
        CloseFd(c.fd);
      } else if (n > 0 && fds[i + 2].revents != 0 && !Step(*registry_, c)) {
        CloseFd(c.fd);
      } else {
        kept.push_back(std::move(c));
      }
    }
    conns = std::move(kept);
    if (n <= 0 || (fds[0].revents & POLLIN) == 0) continue;
    // Non-blocking: another loop may have taken the connection (EAGAIN).
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    if (conns.size() >= max_connections) {
      auto oldest = std::min_element(
          conns.begin(), conns.end(),
          [](const Connection& a, const Connection& b) { return a.deadline < b.deadline; });
      if (oldest->phase == Connection::Phase::kHead) {
        oldest->out = Reply(503, kPlain, "too many connections\n", false);
        SendSome(*oldest);  // one non-blocking try
      }
      CloseFd(oldest->fd);
      conns.erase(oldest);
    }
    Connection c;
    c.fd = fd;
    c.deadline = now + absl::Milliseconds(options_.request_timeout_ms);
    conns.push_back(std::move(c));
  }
  for (Connection& c : conns) CloseFd(c.fd);
}

}  // namespace windquant::metrics
