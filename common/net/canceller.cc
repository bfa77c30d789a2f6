#include "common/net/canceller.h"

namespace windquant::net {

grpc::Status CancelledStatus() {
  return grpc::Status(grpc::StatusCode::CANCELLED, "shutting down");
}

void Canceller::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  // TryCancel never calls back into this object.
  for (grpc::ClientContext* c : contexts_) c->TryCancel();
}

bool Canceller::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

bool Canceller::SleepFor(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&cancelled_), d);
  return !cancelled_;
}

SleepFn Canceller::Sleeper() {
  return [this](absl::Duration d) { SleepFor(d); };
}

Canceller::Scope::Scope(Canceller* canceller, grpc::ClientContext* context)
    : canceller_(canceller), context_(context) {
  absl::MutexLock lock(&canceller_->mu_);
  if (canceller_->cancelled_) context_->TryCancel();
  canceller_->contexts_.insert(context_);
}

Canceller::Scope::~Scope() {
  absl::MutexLock lock(&canceller_->mu_);
  canceller_->contexts_.erase(context_);
}

}  // namespace windquant::net
