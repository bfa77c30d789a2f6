// SignalWaiter: the end of every windquant `main` — block until SIGTERM (Kubernetes) or
// SIGINT (Ctrl-C), then drain the server.
//
//   int main(int argc, char** argv) {
//     net::SignalWaiter::BlockTerminationSignals();   // first, before any thread exists
//     ... start servers ...
//     const int sig = net::SignalWaiter::Wait();
//     server.Drain(absl::Now() + absl::Seconds(20));
//   }
//
// Signals are blocked in the calling thread and in every thread created after it (the
// mask is inherited); a handler that only writes the signal to a pipe takes them on a
// thread that does not block them (one a shared library started before main), and Wait
// reads that pipe, so the process never dies of SIGTERM while it is not in Wait (starting
// up, draining). Nothing polls or sleeps. Call BlockTerminationSignals first in main.
// Thread-safety: Wait may be called from one thread at a time.
#ifndef WINDQUANT_COMMON_NET_SIGNAL_WAITER_H_
#define WINDQUANT_COMMON_NET_SIGNAL_WAITER_H_

namespace windquant::net {

class SignalWaiter {
 public:
  // Blocks SIGTERM and SIGINT in the calling thread.
  static void BlockTerminationSignals();
  // Blocks the calling thread until SIGTERM or SIGINT arrives; returns the signal number.
  // Requires BlockTerminationSignals.
  static int Wait();
};

}  // namespace windquant::net

#endif  // WINDQUANT_COMMON_NET_SIGNAL_WAITER_H_
