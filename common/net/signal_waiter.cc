#include "common/net/signal_waiter.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

namespace windquant::net {
namespace {

// The write end gets one byte (the signal number) per termination signal.
int g_pipe[2] = {-1, -1};

void OnTerminationSignal(int sig) {
  const int saved = errno;
  const char byte = static_cast<char>(sig);
  [[maybe_unused]] ssize_t n = write(g_pipe[1], &byte, 1);  // async-signal-safe
  errno = saved;
}

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

// Threads that shared libraries start before main (OpenBLAS's pool, say) never block
// the signals, and the kernel hands a process-wide signal to any thread that does not:
// with the default action that would kill the process whenever the main thread is not
// waiting. So the signals get a handler (it runs on whichever thread takes them and only
// writes to a pipe), and Wait reads the pipe.
void SignalWaiter::BlockTerminationSignals() {
  const sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  if (g_pipe[0] >= 0) return;
  if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;  // Wait then falls back to sigwait
  // Reads block; the handler's writes never do (a full pipe drops a repeated signal).
  fcntl(g_pipe[0], F_SETFL, fcntl(g_pipe[0], F_GETFL) & ~O_NONBLOCK);
  struct sigaction action = {};
  action.sa_handler = OnTerminationSignal;
  sigemptyset(&action.sa_mask);
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer runs a handler only when its thread leaves an intercepted call; with
  // SA_RESTART the main thread's read in Wait restarts in the kernel and never leaves, so
  // the signal would never be handled. Without it the read returns EINTR (Wait retries).
  action.sa_flags = 0;
#else
  action.sa_flags = SA_RESTART;
#endif
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int SignalWaiter::Wait() {
  const sigset_t set = TerminationSignals();
  if (g_pipe[0] < 0) {
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    return sig;
  }
  // A signal pending on this thread is delivered (to the handler) once unblocked.
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  char byte = 0;
  while (read(g_pipe[0], &byte, 1) != 1) {
    // EINTR: the handler ran on this thread; its byte is in the pipe now.
  }
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return static_cast<unsigned char>(byte);
}

}  // namespace windquant::net
