// Canceller: lets a component's shutdown interrupt its outgoing calls and the
// sleeps of its retry loops, so that Stop() returns promptly even while a peer
// is down (a retry loop with wait_for_ready calls otherwise blocks for whole
// deadlines, and a 24-hour streaming call until the peer returns).
//
//   net::Canceller cancel;
//   grpc::Status s = net::RetryWithBackoff([&] {
//     grpc::ClientContext ctx;
//     net::ConfigureContext(ctx, deadline, /*wait_for_ready=*/true);
//     net::Canceller::Scope scope(&cancel, &ctx);          // Cancel() -> ctx.TryCancel()
//     if (scope.cancelled()) return net::CancelledStatus();
//     return stub->Call(&ctx, req, &reply);
//   }, policy, cancel.Sleeper());                          // sleeps end on Cancel()
//   ...
//   cancel.Cancel();   // from Stop(): every registered call ends with CANCELLED
//
// Thread-safety: thread-safe. A Scope must end before its ClientContext.
#ifndef WINDQUANT_COMMON_NET_CANCELLER_H_
#define WINDQUANT_COMMON_NET_CANCELLER_H_

#include <set>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/net/retry.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace windquant::net {

// grpc CANCELLED "shutting down": what a call answers once its Canceller fired.
grpc::Status CancelledStatus();

class Canceller {
 public:
  Canceller() = default;
  Canceller(const Canceller&) = delete;
  Canceller& operator=(const Canceller&) = delete;

  // Cancels every registered call (and any registered later) and wakes sleepers.
  // Idempotent; there is no way back.
  void Cancel();
  bool cancelled() const;

  // Sleeps for `d` unless cancelled first; false when cancelled.
  bool SleepFor(absl::Duration d);
  // SleepFor as a RetryWithBackoff sleep function (borrowing this Canceller).
  SleepFn Sleeper();

  // Registers `context` for the scope's lifetime; a context registered after
  // Cancel() is cancelled at once.
  class Scope {
   public:
    Scope(Canceller* canceller, grpc::ClientContext* context);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    bool cancelled() const { return canceller_->cancelled(); }

   private:
    Canceller* const canceller_;
    grpc::ClientContext* const context_;
  };

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::set<grpc::ClientContext*> contexts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace windquant::net

#endif  // WINDQUANT_COMMON_NET_CANCELLER_H_
