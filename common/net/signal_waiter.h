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
// Signals are blocked in every thread (the mask is inherited by threads created later)
// and taken synchronously with sigwait, so no handler runs and nothing polls or sleeps.
// A thread created before BlockTerminationSignals keeps the default action (the process
// would die on SIGTERM without draining): call it first.
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
