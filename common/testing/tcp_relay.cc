#include "common/testing/tcp_relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace windquant::testing {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

// Closes `fd` with a reset (SO_LINGER 0): the client sees the connection refused mid-way.
void Reset(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  ::close(fd);
}

// Copies what `from` has to `to`; false at the end of either.
bool Pump(int from, int to) {
  char buf[1 << 14];
  const ssize_t n = ::recv(from, buf, sizeof(buf), 0);
  if (n <= 0) return false;
  for (ssize_t off = 0; off < n;) {
    const ssize_t w = ::send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
    if (w <= 0) return false;
    off += w;
  }
  return true;
}

}  // namespace

bool TcpRelay::Start(int target_port, std::string* error) {
  target_port_ = target_port;
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = Loopback(0);
  socklen_t len = sizeof(a);
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    *error = std::string("tcp relay: cannot listen on loopback: ") + std::strerror(errno);
    return false;
  }
  port_ = ntohs(a.sin_port);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return true;
}

void TcpRelay::Stop() {
  std::vector<std::thread> relays;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_ || listen_fd_ < 0) return;
    stopped_ = true;
    for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
  }
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  if (accept_thread_.joinable()) accept_thread_.join();
  ::close(listen_fd_);
  {
    absl::MutexLock lock(&mu_);
    relays = std::move(relays_);
  }
  for (std::thread& t : relays) t.join();
}

void TcpRelay::SetReachable(bool reachable) {
  absl::MutexLock lock(&mu_);
  reachable_ = reachable;
  if (!reachable) {
    for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
  }
}

int64_t TcpRelay::refused() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

void TcpRelay::AcceptLoop() {
  while (true) {
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down
    }
    absl::MutexLock lock(&mu_);
    if (stopped_) {
      ::close(client);
      return;
    }
    if (!reachable_) {
      ++refused_;
      Reset(client);
      continue;
    }
    const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_in target = Loopback(target_port_);
    if (upstream < 0 ||
        ::connect(upstream, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) != 0) {
      if (upstream >= 0) ::close(upstream);
      Reset(client);
      continue;
    }
    open_.insert(client);
    open_.insert(upstream);
    relays_.emplace_back([this, client, upstream] { Relay(client, upstream); });
  }
}

void TcpRelay::Relay(int client, int upstream) {
  pollfd fds[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
  while (true) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) && !Pump(client, upstream)) break;
    if ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) && !Pump(upstream, client)) break;
  }
  absl::MutexLock lock(&mu_);
  open_.erase(client);
  open_.erase(upstream);
  Reset(client);
  ::close(upstream);
}

}  // namespace windquant::testing
