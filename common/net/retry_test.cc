#include "common/net/retry.h"

#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace windquant::net {
namespace {

using ::windquant::testing::IsOk;
using ::windquant::testing::StatusIs;

RetryPolicy TestPolicy() {
  RetryPolicy p;
  p.max_attempts = 6;
  p.initial_backoff = absl::Milliseconds(100);
  p.max_backoff = absl::Milliseconds(1000);
  p.multiplier = 2.0;
  p.max_total_sleep = absl::Seconds(100);
  p.seed = 7;
  return p;
}

TEST(RetryTest, DelaysStayWithinGrowingJitterBounds) {
  const RetryPolicy policy = TestPolicy();
  std::vector<absl::Duration> delays;
  int calls = 0;
  const absl::Status s = RetryWithBackoff(
      [&] {
        ++calls;
        return absl::UnavailableError("down");
      },
      policy, [&](absl::Duration d) { delays.push_back(d); });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable, "down"));  // the last error, as it was
  EXPECT_EQ(calls, 6);
  ASSERT_EQ(delays.size(), 5u);
  Backoff caps(policy);
  const double expected_caps_ms[] = {100, 200, 400, 800, 1000};
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(absl::ToDoubleMilliseconds(caps.Cap(i)), expected_caps_ms[i], 1e-6);
    EXPECT_GE(delays[i], absl::ZeroDuration());
    EXPECT_LE(delays[i], caps.Cap(i));
  }
}

TEST(RetryTest, FullJitterMeanIsHalfTheCap) {
  // Over many seeded loops the mean of the n-th delay is Cap(n)/2 (uniform on [0, cap]):
  // the delays grow on average even though single draws may not.
  const RetryPolicy base = TestPolicy();
  constexpr int kLoops = 4000;
  constexpr double kRelTolerance = 0.05;
  std::vector<double> sum_ms(5, 0.0);
  for (int loop = 0; loop < kLoops; ++loop) {
    RetryPolicy p = base;
    p.seed = 1000 + loop;
    Backoff b(p);
    for (int i = 0; i < 5; ++i) sum_ms[i] += absl::ToDoubleMilliseconds(b.Next());
  }
  Backoff caps(base);
  for (int i = 0; i < 5; ++i) {
    const double half_cap = absl::ToDoubleMilliseconds(caps.Cap(i)) / 2;
    EXPECT_NEAR(sum_ms[i] / kLoops, half_cap, kRelTolerance * half_cap) << i;
  }
}

TEST(RetryTest, SameSeedSameDelays) {
  Backoff a(TestPolicy()), b(TestPolicy());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.Next(), b.Next());
}

TEST(RetryTest, StopsOnNonRetryableCode) {
  int calls = 0, sleeps = 0;
  const absl::Status s = RetryWithBackoff(
      [&] {
        ++calls;
        return absl::InvalidArgumentError("plan.actions: bad");
      },
      TestPolicy(), [&](absl::Duration) { ++sleeps; });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, "plan.actions: bad"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(sleeps, 0);
}

TEST(RetryTest, SucceedsAfterTransientUnavailable) {
  int calls = 0, sleeps = 0;
  const absl::StatusOr<int> r = RetryWithBackoff(
      [&]() -> absl::StatusOr<int> {
        if (++calls < 3) return absl::UnavailableError("not yet");
        return 42;
      },
      TestPolicy(), [&](absl::Duration) { ++sleeps; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 42);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(sleeps, 2);
}

TEST(RetryTest, DeadlineExceededRetriedOnlyWhenEnabled) {
  RetryPolicy p = TestPolicy();
  int calls = 0;
  auto fn = [&] {
    ++calls;
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "slow");
  };
  auto no_sleep = [](absl::Duration) {};
  grpc::Status s = RetryWithBackoff(fn, p, no_sleep);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(s.error_message(), "slow");
  EXPECT_EQ(calls, 1);
  calls = 0;
  p.retry_deadline_exceeded = true;
  s = RetryWithBackoff(fn, p, no_sleep);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(s.error_message(), "slow");
  EXPECT_EQ(calls, p.max_attempts);
}

TEST(RetryTest, TotalSleepBudgetBoundsRetries) {
  RetryPolicy p = TestPolicy();
  p.max_attempts = 1000;
  p.max_total_sleep = absl::Seconds(3);
  absl::Duration slept;
  int calls = 0;
  const absl::Status s = RetryWithBackoff(
      [&] {
        ++calls;
        return absl::UnavailableError("down");
      },
      p, [&](absl::Duration d) { slept += d; });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable, "down"));
  EXPECT_LE(slept, absl::Seconds(3));
  EXPECT_LT(calls, 1000);
  EXPECT_GT(calls, 3);
}

TEST(RetryTest, ValidatesPolicy) {
  constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(ValidateRetryPolicy(TestPolicy()), IsOk());
  RetryPolicy p = TestPolicy();
  p.max_attempts = 0;
  EXPECT_THAT(ValidateRetryPolicy(p),
              StatusIs(kInvalid, "retry.max_attempts: must be >= 1, got 0"));
  p = TestPolicy();
  p.initial_backoff = absl::ZeroDuration();
  EXPECT_THAT(ValidateRetryPolicy(p), StatusIs(kInvalid, "retry.initial_backoff: must be > 0"));
  p = TestPolicy();
  p.multiplier = 0.5;
  EXPECT_THAT(ValidateRetryPolicy(p),
              StatusIs(kInvalid, "retry.multiplier: must be finite and >= 1"));
  p = TestPolicy();
  p.max_backoff = absl::Milliseconds(1);
  EXPECT_THAT(ValidateRetryPolicy(p), StatusIs(kInvalid, "retry.max_backoff: must be >= initial"));
  p = TestPolicy();
  p.max_total_sleep = -absl::Seconds(1);
  EXPECT_THAT(ValidateRetryPolicy(p), StatusIs(kInvalid, "retry.max_total_sleep: must be >= 0"));
}

}  // namespace
}  // namespace windquant::net
