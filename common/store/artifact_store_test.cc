#include "common/store/artifact_store.h"

#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::store {
namespace {

using ::windquant::testing::StatusIs;

using ::testing::HasSubstr;

TEST(ValidateArtifactKeyTest, AcceptsRelativeKeys) {
  for (const char* key : {"a", "plans/p1/plan.json", "a.b/c-d_e/f~g", "x/.hidden", "a..b/c"}) {
    EXPECT_TRUE(ValidateArtifactKey(key).ok()) << key;
  }
}

TEST(ValidateArtifactKeyTest, RejectsEscapesAndOddCharactersNamingTheKey) {
  const struct {
    std::string key;
    const char* rule;
  } kCases[] = {
      {"", "empty"},
      {"..", "'..' segment"},
      {"../etc/passwd", "'..' segment"},
      {"plans/../../x", "'..' segment"},
      {"a/..", "'..' segment"},
      {"./a", "'.' segment"},
      {"/abs/path", "absolute"},
      {"a//b", "empty path segment"},
      {"a/", "empty path segment"},
      {"a\\b", "backslash"},
      {"..\\x", "backslash"},
      {std::string("a\nb"), "control character"},
      {std::string("a\0b", 3), "control character"},
      {std::string("a\x7f"), "control character"},
      {std::string(kMaxArtifactKeyBytes + 1, 'k'), "longer than"},
  };
  for (const auto& c : kCases) {
    absl::Status st = ValidateArtifactKey(c.key);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.key;
    EXPECT_THAT(st.message(), HasSubstr(c.rule)) << c.key;
    EXPECT_THAT(st.message(), HasSubstr("artifact key '")) << c.key;
  }
  // The message names the key, escaped so it stays one line.
  EXPECT_THAT(ValidateArtifactKey("plans/../x").message(), HasSubstr("'plans/../x'"));
  EXPECT_THAT(ValidateArtifactKey("a\nb").message(), HasSubstr("'a\\nb'"));
}

TEST(ValidateArtifactPrefixTest, AllowsEmptyAndTrailingSlashOnly) {
  EXPECT_TRUE(ValidateArtifactPrefix("").ok());
  EXPECT_TRUE(ValidateArtifactPrefix("plans/").ok());
  EXPECT_TRUE(ValidateArtifactPrefix("plans/p").ok());
  EXPECT_THAT(ValidateArtifactPrefix("/"),
              StatusIs(absl::StatusCode::kInvalidArgument, "artifact prefix"));
  EXPECT_THAT(ValidateArtifactPrefix("../"),
              StatusIs(absl::StatusCode::kInvalidArgument, "artifact prefix"));
  EXPECT_THAT(ValidateArtifactPrefix("a//"),
              StatusIs(absl::StatusCode::kInvalidArgument, "artifact prefix"));
}

TEST(OpenArtifactStoreTest, ParsesUris) {
  auto file = OpenArtifactStore("file:///tmp/wq-store-x");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Describe(), "file:///tmp/wq-store-x");
  auto rel = OpenArtifactStore("");
  ASSERT_TRUE(rel.ok()) << rel.status();
  EXPECT_THAT((*rel)->Describe(), HasSubstr("/artifacts"));
  EXPECT_THAT((*rel)->Describe(), ::testing::StartsWith("file:///"));

  EXPECT_EQ(OpenArtifactStore("file://relative/x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenArtifactStore("gs://b/x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenArtifactStore("s3://Bad_Bucket/x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenArtifactStore("s3://bucket/../x").status().code(),
            absl::StatusCode::kInvalidArgument);

  S3Options s3;
  EXPECT_THAT(OpenArtifactStore("s3://bucket/p", s3).status().message(), HasSubstr("credentials"));
  s3.access_key_id = "AKID";
  s3.secret_access_key = "SECRET";
  s3.endpoint_url = "ftp://x";
  EXPECT_EQ(OpenArtifactStore("s3://bucket/p", s3).status().code(),
            absl::StatusCode::kInvalidArgument);
  s3.endpoint_url = "http://127.0.0.1:9/";
  auto st = OpenArtifactStore("s3://bucket/runs/", s3);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ((*st)->Describe(), "s3://bucket/runs");
}

}  // namespace
}  // namespace windquant::store
