#include "common/net/status_convert.h"

#include <cmath>
#include <limits>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace windquant::net {
namespace {

using ::windquant::testing::IsOk;
using ::windquant::testing::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

TEST(StatusConvertTest, RoundTripsEveryCanonicalCodeAndMessage) {
  for (int c = 0; c <= 16; ++c) {
    const absl::Status in(static_cast<absl::StatusCode>(c), c == 0 ? "" : "msg");
    const grpc::Status g = ToGrpcStatus(in);
    EXPECT_EQ(static_cast<int>(g.error_code()), c);
    EXPECT_EQ(FromGrpcStatus(g), in) << c;
  }
  EXPECT_EQ(ToGrpcStatus(absl::UnavailableError("down")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ToGrpcStatus(absl::UnavailableError("down")).error_message(), "down");
}

TEST(StatusConvertTest, CodeNames) {
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::OK), "OK");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::UNAVAILABLE), "UNAVAILABLE");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_EQ(GrpcCodeName(static_cast<grpc::StatusCode>(42)), "UNKNOWN_CODE_42");
}

TEST(StatusConvertTest, ValidationNamesTheField) {
  EXPECT_THAT(RequireFinite("plan.effective_bits", 2.5), IsOk());
  EXPECT_THAT(RequireFinite("plan.effective_bits", std::nan("")),
              StatusIs(kInvalid, "plan.effective_bits: must be finite, got nan"));
  EXPECT_THAT(RequireFinite("x", std::numeric_limits<double>::infinity()),
              StatusIs(kInvalid, "x: must be finite, got inf"));
  EXPECT_THAT(RequireInRange("report.lambda", 1.0, 0.0, 100.0), IsOk());
  EXPECT_THAT(RequireInRange("report.lambda", 101.0, 0.0, 100.0),
              StatusIs(kInvalid, "report.lambda: must be in [0, 100], got 101"));
  EXPECT_THAT(RequireInRange("report.lambda", std::nan(""), 0.0, 100.0),
              StatusIs(kInvalid, "report.lambda: must be in [0, 100], got nan"));
  EXPECT_THAT(RequirePositive("batch.state_dim", 0),
              StatusIs(kInvalid, "batch.state_dim: must be > 0, got 0"));
  EXPECT_THAT(RequireNonNegative("request.tokens", 0), IsOk());
  EXPECT_THAT(RequireNonNegative("request.tokens", -2),
              StatusIs(kInvalid, "request.tokens: must be >= 0, got -2"));
  EXPECT_THAT(RequireNonEmpty("actor_id", ""), StatusIs(kInvalid, "actor_id: must not be empty"));
  EXPECT_THAT(RequireIdentifier("plan.plan_id", "rl-00012_a.b"), IsOk());
  for (const char* bad : {"", ".", "..", "a/b", "../x", "a b"}) {
    EXPECT_THAT(RequireIdentifier("plan.plan_id", bad), StatusIs(kInvalid, "plan.plan_id: "))
        << bad;
  }
  EXPECT_THAT(RequireIdentifier("plan.plan_id", "a/b"),
              StatusIs(kInvalid, "only [A-Za-z0-9._-] allowed, got byte 47"));
  EXPECT_THAT(RequireIdentifier("id", std::string(129, 'a')),
              StatusIs(kInvalid, "id: must be 1..128 characters, got 129"));
}

}  // namespace
}  // namespace windquant::net
