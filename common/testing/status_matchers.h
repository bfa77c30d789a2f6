// gMock matchers for absl::Status and absl::StatusOr<T>, so that an error test
// says which code it expects and which culprit the message must name:
//   EXPECT_THAT(Load(path), StatusIs(absl::StatusCode::kNotFound, path));
//   EXPECT_THAT(store.Put("x", "y"), IsOk());
// On a mismatch the failure prints the whole status.
#ifndef WINDQUANT_COMMON_TESTING_STATUS_MATCHERS_H_
#define WINDQUANT_COMMON_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace windquant::testing {
namespace internal_status {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

// Matches a status (or a StatusOr's status) with `code` whose message contains
// `substring` (any message when empty).
class StatusIsMatcher {
 public:
  StatusIsMatcher(absl::StatusCode code, std::string substring)
      : code_(code), substring_(std::move(substring)) {}

  template <typename T>
  bool MatchAndExplain(const T& value, ::testing::MatchResultListener* listener) const {
    const absl::Status& s = GetStatus(value);
    *listener << "whose status is " << s;
    if (s.code() != code_) return false;
    return substring_.empty() || s.message().find(substring_) != absl::string_view::npos;
  }
  void DescribeTo(std::ostream* os) const {
    *os << "has status code " << absl::StatusCodeToString(code_);
    if (!substring_.empty()) *os << " and a message containing \"" << substring_ << "\"";
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "does not have status code " << absl::StatusCodeToString(code_);
    if (!substring_.empty()) *os << " with a message containing \"" << substring_ << "\"";
  }

 private:
  absl::StatusCode code_;
  std::string substring_;
};

class IsOkMatcher {
 public:
  template <typename T>
  bool MatchAndExplain(const T& value, ::testing::MatchResultListener* listener) const {
    const absl::Status& s = GetStatus(value);
    if (!s.ok()) *listener << "whose status is " << s;
    return s.ok();
  }
  void DescribeTo(std::ostream* os) const { *os << "is OK"; }
  void DescribeNegationTo(std::ostream* os) const { *os << "is not OK"; }
};

}  // namespace internal_status

// The status has `code` and, unless `message_substring` is empty, a message
// containing it (the field, file or key the error must name).
inline ::testing::PolymorphicMatcher<internal_status::StatusIsMatcher> StatusIs(
    absl::StatusCode code, std::string message_substring = "") {
  return ::testing::MakePolymorphicMatcher(
      internal_status::StatusIsMatcher(code, std::move(message_substring)));
}

// The status is OK.
inline ::testing::PolymorphicMatcher<internal_status::IsOkMatcher> IsOk() {
  return ::testing::MakePolymorphicMatcher(internal_status::IsOkMatcher());
}

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_STATUS_MATCHERS_H_
