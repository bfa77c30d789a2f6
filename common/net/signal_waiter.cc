#include "common/net/signal_waiter.h"

#include <pthread.h>
#include <signal.h>

#include <cerrno>

namespace windquant::net {
namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void SignalWaiter::BlockTerminationSignals() {
  const sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int SignalWaiter::Wait() {
  const sigset_t set = TerminationSignals();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
    // sigwait only fails with EINVAL for a bad set; retry is harmless.
  }
  return sig;
}

}  // namespace windquant::net
