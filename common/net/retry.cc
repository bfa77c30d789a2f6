#include "common/net/retry.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace windquant::net {

absl::Status ValidateRetryPolicy(const RetryPolicy& policy) {
  if (policy.max_attempts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("retry.max_attempts: must be >= 1, got ", policy.max_attempts));
  }
  if (policy.initial_backoff <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("retry.initial_backoff: must be > 0");
  }
  if (policy.max_backoff < policy.initial_backoff) {
    return absl::InvalidArgumentError("retry.max_backoff: must be >= initial_backoff");
  }
  if (!(policy.multiplier >= 1.0) || !std::isfinite(policy.multiplier)) {
    return absl::InvalidArgumentError(
        absl::StrCat("retry.multiplier: must be finite and >= 1, got ", policy.multiplier));
  }
  if (policy.max_total_sleep < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("retry.max_total_sleep: must be >= 0");
  }
  return absl::OkStatus();
}

bool IsRetryable(absl::StatusCode code, const RetryPolicy& policy) {
  return code == absl::StatusCode::kUnavailable ||
         (policy.retry_deadline_exceeded && code == absl::StatusCode::kDeadlineExceeded);
}

Backoff::Backoff(const RetryPolicy& policy)
    : policy_(policy), rng_(policy.seed != 0 ? policy.seed : std::random_device{}()) {}

absl::Duration Backoff::Cap(int n) const {
  const double initial_s = absl::ToDoubleSeconds(policy_.initial_backoff);
  const double max_s = absl::ToDoubleSeconds(policy_.max_backoff);
  const double mult = std::max(1.0, policy_.multiplier);
  // initial * mult^n, computed in log space so large n cannot overflow.
  const double log_cap = std::log(std::max(initial_s, 1e-9)) + n * std::log(mult);
  const double cap_s = log_cap >= std::log(max_s) ? max_s : std::exp(log_cap);
  return absl::Seconds(cap_s);
}

absl::Duration Backoff::Next() {
  const double cap_s = absl::ToDoubleSeconds(Cap(retries_));
  ++retries_;
  std::uniform_real_distribution<double> uniform(0.0, cap_s);  // full jitter
  return absl::Seconds(uniform(rng_));
}

SleepFn RealSleep() {
  return [](absl::Duration d) { absl::SleepFor(d); };
}

}  // namespace windquant::net
