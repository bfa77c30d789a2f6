#include "common/net/retry.h"

#include <vector>

#include "gtest/gtest.h"

namespace windquant::net {
namespace {

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
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
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
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
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
  EXPECT_EQ(RetryWithBackoff(fn, p, no_sleep).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(calls, 1);
  calls = 0;
  p.retry_deadline_exceeded = true;
  EXPECT_FALSE(RetryWithBackoff(fn, p, no_sleep).ok());
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
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_LE(slept, absl::Seconds(3));
  EXPECT_LT(calls, 1000);
  EXPECT_GT(calls, 3);
}

TEST(RetryTest, ValidatesPolicy) {
  EXPECT_TRUE(ValidateRetryPolicy(TestPolicy()).ok());
  RetryPolicy p = TestPolicy();
  p.max_attempts = 0;
  EXPECT_NE(ValidateRetryPolicy(p).message().find("retry.max_attempts"), absl::string_view::npos);
  p = TestPolicy();
  p.multiplier = 0.5;
  EXPECT_FALSE(ValidateRetryPolicy(p).ok());
  p = TestPolicy();
  p.max_backoff = absl::Milliseconds(1);
  EXPECT_FALSE(ValidateRetryPolicy(p).ok());
}

}  // namespace
}  // namespace windquant::net
