#include "common/testing/status_matchers.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::testing {
namespace {

using ::testing::Not;

TEST(StatusMatchersTest, StatusIsChecksCodeAndMessage) {
  const absl::Status s = absl::InvalidArgumentError("ppo.clip_ratio: must be in (0, 1)");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, "ppo.clip_ratio"));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kNotFound)));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kInvalidArgument, "ppo.gamma")));
  EXPECT_THAT(s, Not(IsOk()));
  EXPECT_THAT(absl::OkStatus(), IsOk());
  EXPECT_THAT(absl::OkStatus(), Not(StatusIs(absl::StatusCode::kInvalidArgument)));
}

TEST(StatusMatchersTest, WorksOnStatusOr) {
  const absl::StatusOr<int> bad = absl::NotFoundError("missing /x/config.json");
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kNotFound, "/x/config.json"));
  EXPECT_THAT(bad, Not(IsOk()));
  const absl::StatusOr<std::string> good = std::string("v");
  EXPECT_THAT(good, IsOk());
  EXPECT_THAT(good, StatusIs(absl::StatusCode::kOk));
}

TEST(StatusMatchersTest, ExplainsAMismatchWithTheWholeStatus) {
  const absl::Status s = absl::UnavailableError("actor gone");
  ::testing::StringMatchResultListener listener;
  const auto m = StatusIs(absl::StatusCode::kInvalidArgument, "field");
  EXPECT_FALSE(::testing::ExplainMatchResult(m, s, &listener));
  EXPECT_THAT(listener.str(), ::testing::HasSubstr("actor gone"));
  EXPECT_THAT(::testing::DescribeMatcher<absl::Status>(m),
              ::testing::HasSubstr("INVALID_ARGUMENT and a message containing \"field\""));
}

}  // namespace
}  // namespace windquant::testing
