// The tokenizer.json field readers: defaults for missing or mistyped fields, the
// String pattern, and prepend_scheme with its older add_prefix_space spelling.
#include "common/model/tokenizer_json.h"

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace windquant::model::tokenizer_json {
namespace {

using ::windquant::testing::StatusIs;

TEST(TokenizerJsonTest, GettersFallBackToTheDefault) {
  const Json j = Json::parse(R"({"s": "x", "n": 1, "b": true})");
  EXPECT_EQ(GetString(j, "s"), "x");
  EXPECT_EQ(GetString(j, "n", "d"), "d");
  EXPECT_EQ(GetString(j, "missing"), "");
  EXPECT_TRUE(GetBool(j, "b", false));
  EXPECT_FALSE(GetBool(j, "s", false));
  EXPECT_TRUE(GetBool(Json(), "b", true));
}

TEST(TokenizerJsonTest, StringPatternOnly) {
  EXPECT_EQ(*StringPattern(Json::parse(R"({"String": " "})"), "w"), " ");
  EXPECT_THAT(StringPattern(Json::parse(R"({"Regex": " +"})"), "w"),
              StatusIs(absl::StatusCode::kInvalidArgument, "w.pattern: only"));
  EXPECT_THAT(StringPattern(Json(), "w"),
              StatusIs(absl::StatusCode::kInvalidArgument, "w.pattern"));
}

TEST(TokenizerJsonTest, PrependScheme) {
  EXPECT_EQ(*ParsePrependScheme(Json::object(), "w"), PrependScheme::kAlways);
  EXPECT_EQ(*ParsePrependScheme(Json::parse(R"({"prepend_scheme": "first"})"), "w"),
            PrependScheme::kFirst);
  EXPECT_EQ(*ParsePrependScheme(Json::parse(R"({"add_prefix_space": false})"), "w"),
            PrependScheme::kNever);
  EXPECT_EQ(*ParsePrependScheme(Json::parse(R"({"add_prefix_space": true})"), "w"),
            PrependScheme::kAlways);
  // prepend_scheme wins over add_prefix_space.
  EXPECT_EQ(*ParsePrependScheme(
                Json::parse(R"({"prepend_scheme": "always", "add_prefix_space": false})"), "w"),
            PrependScheme::kAlways);
  EXPECT_THAT(ParsePrependScheme(Json::parse(R"({"prepend_scheme": "x"})"), "w"),
              StatusIs(absl::StatusCode::kInvalidArgument, "w.prepend_scheme: unknown value x"));
}

}  // namespace
}  // namespace windquant::model::tokenizer_json
