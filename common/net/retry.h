// RetryWithBackoff: retries a call on transient failures with exponential backoff and
// full jitter (sleep ~ U[0, min(max_backoff, initial_backoff * multiplier^n)]), bounded by
// attempts and by total sleep time. STYLE.md: "UNAVAILABLE means retry with backoff".
//
// The call returns absl::Status, absl::StatusOr<T> or grpc::Status; the result of the
// last attempt is returned as is. Each attempt must build its own grpc::ClientContext
// (a context cannot be reused): use ConfigureContext (channel.h) inside `fn`.
//
// Tests inject `sleep` (record the delays, no real sleeping) and a fixed `seed`.
// Thread-safety: Backoff is not thread-safe; RetryWithBackoff is reentrant.
#ifndef WINDQUANT_COMMON_NET_RETRY_H_
#define WINDQUANT_COMMON_NET_RETRY_H_

#include <cstdint>
#include <functional>
#include <random>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/net/status_convert.h"
#include "grpcpp/support/status.h"

namespace windquant::net {

struct RetryPolicy {
  int max_attempts = 6;  // >= 1, including the first call
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);       // cap of one sleep
  double multiplier = 2.0;                             // >= 1
  absl::Duration max_total_sleep = absl::Seconds(60);  // no sleep past this budget
  bool retry_deadline_exceeded = false;                // also retry DEADLINE_EXCEEDED
  uint64_t seed = 0;                                   // 0 = nondeterministic
};

// OK or INVALID_ARGUMENT naming the bad field ("retry.max_attempts: ...").
absl::Status ValidateRetryPolicy(const RetryPolicy& policy);

// True for UNAVAILABLE, and for DEADLINE_EXCEEDED when the policy says so.
bool IsRetryable(absl::StatusCode code, const RetryPolicy& policy);

// The jittered delay sequence of one retry loop.
class Backoff {
 public:
  explicit Backoff(const RetryPolicy& policy);
  // Upper bound of the n-th delay (n = 0 for the first retry): min(max, initial * mult^n).
  absl::Duration Cap(int n) const;
  // The next delay, uniform in [0, Cap(retries so far)].
  absl::Duration Next();
  int retries() const { return retries_; }

 private:
  const RetryPolicy policy_;
  std::mt19937_64 rng_;
  int retries_ = 0;
};

using SleepFn = std::function<void(absl::Duration)>;
// absl::SleepFor.
SleepFn RealSleep();

namespace internal {
inline absl::StatusCode CodeOf(const absl::Status& s) { return s.code(); }
template <typename T>
absl::StatusCode CodeOf(const absl::StatusOr<T>& s) {
  return s.status().code();
}
inline absl::StatusCode CodeOf(const grpc::Status& s) {
  return static_cast<absl::StatusCode>(static_cast<int>(s.error_code()));
}
}  // namespace internal

// Calls `fn` until it succeeds, fails with a non-retryable code, max_attempts is reached or
// the next sleep would exceed max_total_sleep; returns the last result. An invalid policy
// is a programmer error: it is clamped (max_attempts >= 1, multiplier >= 1).
template <typename Fn>
auto RetryWithBackoff(Fn&& fn, const RetryPolicy& policy, const SleepFn& sleep = RealSleep())
    -> std::invoke_result_t<Fn&> {
  Backoff backoff(policy);
  absl::Duration slept = absl::ZeroDuration();
  const int attempts = policy.max_attempts < 1 ? 1 : policy.max_attempts;
  for (int attempt = 1;; ++attempt) {
    auto result = fn();
    if (attempt >= attempts || !IsRetryable(internal::CodeOf(result), policy)) return result;
    const absl::Duration delay = backoff.Next();
    if (slept + delay > policy.max_total_sleep) return result;
    slept += delay;
    sleep(delay);
  }
}

}  // namespace windquant::net

#endif  // WINDQUANT_COMMON_NET_RETRY_H_
