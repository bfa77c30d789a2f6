// TcpRelay: a loopback TCP forwarder whose far side can be made unreachable,
// for outage tests of network clients (the S3 store behind it). It listens on
// 127.0.0.1:0 and relays every connection to 127.0.0.1:<target_port>. While
// unreachable (SetReachable(false)) it resets every new connection at once
// and cuts the open ones, as a store whose endpoint went away looks to a
// client; reachable again, it relays as before, on the same port.
// Thread-safe; one thread for accepts and one per relayed connection.
// Test-only.
#ifndef WINDQUANT_COMMON_TESTING_TCP_RELAY_H_
#define WINDQUANT_COMMON_TESTING_TCP_RELAY_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace windquant::testing {

class TcpRelay {
 public:
  TcpRelay() = default;
  ~TcpRelay() { Stop(); }
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  // Listens on a free loopback port and relays to `target_port`. False (and
  // why in *error) when it cannot listen.
  bool Start(int target_port, std::string* error);
  // Closes the listener and every connection; joins the threads. Idempotent.
  void Stop();

  void SetReachable(bool reachable);
  // Connections reset because the far side was unreachable.
  int64_t refused() const;
  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  void AcceptLoop();
  void Relay(int client, int upstream);

  int target_port_ = -1;
  int port_ = -1;
  int listen_fd_ = -1;
  std::thread accept_thread_;
  mutable absl::Mutex mu_;
  bool reachable_ ABSL_GUARDED_BY(mu_) = true;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<int> open_ ABSL_GUARDED_BY(mu_);  // both ends of every relayed connection
  std::vector<std::thread> relays_ ABSL_GUARDED_BY(mu_);
};

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_TCP_RELAY_H_
