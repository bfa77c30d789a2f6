#include "common/net/stream_idle_reaper.h"

#include <algorithm>
#include <vector>

#include "absl/time/clock.h"

namespace windquant::net {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::ServerRpcInfo;

// Reports one streaming call's messages to the reaper. Created per call by gRPC.
class IdleInterceptor final : public grpc::experimental::Interceptor {
 public:
  IdleInterceptor(StreamIdleReaper* reaper, grpc::ServerContextBase* context)
      : reaper_(reaper), context_(context) {
    reaper_->Register(context_);
  }
  // The call is going: it must not be cancelled any more (blocks while it is).
  ~IdleInterceptor() override { reaper_->Unregister(context_); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    // PRE_SEND_CANCEL comes from the reaper's own TryCancel, which holds the reaper's
    // lock: only the hooks below touch the reaper, never that one.
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) ||
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      reaper_->Touch(context_);
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_CLOSE)) {
      reaper_->Unregister(context_);  // the call is over (finished or cancelled)
    }
    methods->Proceed();
  }

 private:
  StreamIdleReaper* const reaper_;
  grpc::ServerContextBase* const context_;
};

class IdleInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit IdleInterceptorFactory(StreamIdleReaper* reaper) : reaper_(reaper) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(ServerRpcInfo* info) override {
    if (info->type() == ServerRpcInfo::Type::UNARY) return nullptr;  // not watched
    return new IdleInterceptor(reaper_, info->server_context());
  }

 private:
  StreamIdleReaper* const reaper_;
};

}  // namespace

StreamIdleReaper::StreamIdleReaper(absl::Duration idle_timeout)
    : idle_timeout_(idle_timeout), thread_([this] { Run(); }) {}

StreamIdleReaper::~StreamIdleReaper() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
StreamIdleReaper::InterceptorFactory() {
  return std::make_unique<IdleInterceptorFactory>(this);
}

int64_t StreamIdleReaper::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

void StreamIdleReaper::Register(grpc::ServerContextBase* context) {
  absl::MutexLock lock(&mu_);
  calls_[context] = Entry{absl::Now(), false};
}

void StreamIdleReaper::Touch(grpc::ServerContextBase* context) {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(context);
  if (it != calls_.end()) it->second.last = absl::Now();
}

void StreamIdleReaper::Unregister(grpc::ServerContextBase* context) {
  absl::MutexLock lock(&mu_);
  if (std::this_thread::get_id() != thread_.get_id()) {
    while (cancelling_ == context) cancel_done_.Wait(&mu_);
  }
  calls_.erase(context);
}

void StreamIdleReaper::Run() {
  // Checked four times per timeout: a stream goes at most 1.25 x idle_timeout idle.
  const absl::Duration period = std::max(idle_timeout_ / 4, absl::Milliseconds(10));
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), period)) {
    std::vector<grpc::ServerContextBase*> idle;
    const absl::Time now = absl::Now();
    for (auto& [context, entry] : calls_) {
      if (entry.cancelled || now - entry.last < idle_timeout_) continue;
      entry.cancelled = true;
      idle.push_back(context);
    }
    for (grpc::ServerContextBase* context : idle) {
      if (calls_.count(context) == 0) continue;  // went while another was cancelled
      cancelling_ = context;
      ++cancelled_;
      mu_.Unlock();
      // The handler's pending Read or Write fails, and the client sees CANCELLED.
      context->TryCancel();
      mu_.Lock();
      cancelling_ = nullptr;
      cancel_done_.SignalAll();
    }
  }
}

}  // namespace windquant::net
