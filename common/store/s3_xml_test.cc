#include "common/store/s3_xml.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::store {
namespace {

using ::windquant::testing::StatusIs;

TEST(S3XmlTest, ParsesListObjectsV2PageWithEscapesAndToken) {
  const char* xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix>plans/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <ContinuationToken>abc</ContinuationToken>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&amp;x</NextContinuationToken>
  <Contents><Key>plans/a&amp;b/x&lt;1&gt;.json</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>
    <ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag><Size>0</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>plans/caf&#233;/&#x41;</Key><Size>123456789012</Size></Contents>
</ListBucketResult>)";
  auto page = ParseListObjectsV2(xml);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "plans/a&b/x<1>.json");
  EXPECT_EQ(page->objects[0].size_bytes, 0);
  EXPECT_EQ(page->objects[1].key, "plans/caf\xc3\xa9/A");
  EXPECT_EQ(page->objects[1].size_bytes, 123456789012);
  EXPECT_TRUE(page->is_truncated);
  EXPECT_EQ(page->next_continuation_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&x");
}

TEST(S3XmlTest, EmptyAndLastPages) {
  auto empty = ParseListObjectsV2(
      "<ListBucketResult><Name>b</Name><Prefix/><KeyCount>0</KeyCount>"
      "<IsTruncated>false</IsTruncated></ListBucketResult>");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->objects.empty());
  EXPECT_FALSE(empty->is_truncated);
}

TEST(S3XmlTest, RejectsMalformedDocuments) {
  EXPECT_THAT(ParseListObjectsV2("<Error><Code>NoSuchBucket</Code></Error>"),
              StatusIs(absl::StatusCode::kDataLoss, "no <ListBucketResult>"));
  EXPECT_THAT(ParseListObjectsV2("<ListBucketResult><Contents><Key>a</Key>"),
              StatusIs(absl::StatusCode::kDataLoss, "S3 XML"));
  EXPECT_THAT(ParseListObjectsV2("<ListBucketResult><Contents><Key>a</Key><Size>x</Size></Contents>"
                                 "</ListBucketResult>"),
              StatusIs(absl::StatusCode::kDataLoss, "<Contents> without a valid Key/Size"));
  EXPECT_THAT(
      ParseListObjectsV2("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>"),
      StatusIs(absl::StatusCode::kDataLoss, "truncated page without NextContinuationToken"));
  EXPECT_THAT(XmlUnescape("a &bogus; b"),
              StatusIs(absl::StatusCode::kDataLoss, "unknown entity &bogus;"));
  EXPECT_THAT(XmlUnescape("a & b"), StatusIs(absl::StatusCode::kDataLoss, "bad entity reference"));
}

TEST(S3XmlTest, KeyDoesNotMatchKeyCount) {
  auto keys = XmlElements("<KeyCount>3</KeyCount><Key>k</Key><Key/>", "Key");
  ASSERT_TRUE(keys.ok());
  EXPECT_THAT(*keys, ::testing::ElementsAre("k", ""));
}

TEST(S3XmlTest, ParsesErrorBody) {
  S3Error err = ParseS3Error(
      "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The specified key does not "
      "exist.</Message><Key>a</Key></Error>");
  EXPECT_EQ(err.code, "NoSuchKey");
  EXPECT_EQ(err.message, "The specified key does not exist.");
  EXPECT_TRUE(ParseS3Error("not xml").code.empty());
}

}  // namespace
}  // namespace windquant::store
