#include "common/net/status_convert.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace windquant::net {
namespace {

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
  EXPECT_TRUE(RequireFinite("plan.effective_bits", 2.5).ok());
  const absl::Status nan = RequireFinite("plan.effective_bits", std::nan(""));
  EXPECT_EQ(nan.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(nan.message().find("plan.effective_bits"), absl::string_view::npos);
  EXPECT_FALSE(RequireFinite("x", std::numeric_limits<double>::infinity()).ok());
  EXPECT_TRUE(RequireInRange("report.lambda", 1.0, 0.0, 100.0).ok());
  EXPECT_FALSE(RequireInRange("report.lambda", 101.0, 0.0, 100.0).ok());
  EXPECT_FALSE(RequireInRange("report.lambda", std::nan(""), 0.0, 100.0).ok());
  EXPECT_FALSE(RequirePositive("batch.state_dim", 0).ok());
  EXPECT_TRUE(RequireNonNegative("request.tokens", 0).ok());
  EXPECT_FALSE(RequireNonNegative("request.tokens", -2).ok());
  EXPECT_FALSE(RequireNonEmpty("actor_id", "").ok());
  EXPECT_TRUE(RequireIdentifier("plan.plan_id", "rl-00012_a.b").ok());
  for (const char* bad : {"", ".", "..", "a/b", "../x", "a b"}) {
    const absl::Status s = RequireIdentifier("plan.plan_id", bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("plan.plan_id"), absl::string_view::npos);
  }
  EXPECT_FALSE(RequireIdentifier("id", std::string(129, 'a')).ok());
}

}  // namespace
}  // namespace windquant::net
