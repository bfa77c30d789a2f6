// StreamIdleReaper: the per-stream idle deadline of a GrpcServer. A streaming call
// (client, server or bidi streaming) that neither receives nor sends a message for
// `idle_timeout` is cancelled by the server, so that a client that opens a stream and
// then never writes or reads cannot hold one of the server's handler threads forever
// (the thread count is bounded: ServerOptions::max_threads). Unary calls are bounded
// by their clients' deadlines and are not watched.
//
// Our clients reopen their streams (actor/rollout_loop.cc retries a transitions batch
// on a new stream; WatchPolicy reconnects and is sent the current snapshot first), so
// an idle stream that is cancelled costs one reconnect.
//
//   auto reaper = std::make_unique<StreamIdleReaper>(absl::Minutes(10));
//   creators.push_back(reaper->InterceptorFactory());   // first in the list
//
// The interceptor it creates must be the first of the server's interceptors: a call
// being destroyed unregisters itself (blocking while the reaper cancels it) before
// any other interceptor of the call goes.
// Ownership: must outlive the server's calls (destroy it after the server's Wait).
// Thread-safety: thread-safe; one background thread, woken every idle_timeout / 4.
#ifndef WINDQUANT_COMMON_NET_STREAM_IDLE_REAPER_H_
#define WINDQUANT_COMMON_NET_STREAM_IDLE_REAPER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_interceptor.h"

namespace windquant::net {

class StreamIdleReaper {
 public:
  // `idle_timeout` > 0 (finite).
  explicit StreamIdleReaper(absl::Duration idle_timeout);
  ~StreamIdleReaper();
  StreamIdleReaper(const StreamIdleReaper&) = delete;
  StreamIdleReaper& operator=(const StreamIdleReaper&) = delete;

  // The interceptor factory that reports the server's streaming calls to this reaper.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

  // Streams cancelled for idleness so far.
  int64_t cancelled() const;

  // Called by the interceptors.
  void Register(grpc::ServerContextBase* context);
  void Touch(grpc::ServerContextBase* context);
  void Unregister(grpc::ServerContextBase* context);

 private:
  void Run();

  const absl::Duration idle_timeout_;
  mutable absl::Mutex mu_;
  // Last message (or start) of every watched call; entries are cancelled once.
  struct Entry {
    absl::Time last;
    bool cancelled = false;
  };
  std::map<grpc::ServerContextBase*, Entry> calls_ ABSL_GUARDED_BY(mu_);
  // The call the reaper is cancelling (outside the lock: TryCancel may run a callback
  // call's completion, and so Unregister, on the reaper's thread); Unregister from
  // another thread waits until it is done, so the call stays alive meanwhile.
  grpc::ServerContextBase* cancelling_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::CondVar cancel_done_;
  int64_t cancelled_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace windquant::net

#endif  // WINDQUANT_COMMON_NET_STREAM_IDLE_REAPER_H_
