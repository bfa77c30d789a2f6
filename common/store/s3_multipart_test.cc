#include "common/store/s3_multipart.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::windquant::testing::StatusIs;

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(S3PartSizeForTest, KeepsTheConfiguredSizeWhileTenThousandPartsSuffice) {
  EXPECT_EQ(*S3PartSizeFor(12 * kMiB, 5 * kMiB), 5 * kMiB);
  EXPECT_EQ(*S3PartSizeFor(10000 * 64 * kMiB, 64 * kMiB), 64 * kMiB);
  EXPECT_EQ(*S3PartSizeFor(1, 1), kS3MinPartBytes) << "never below S3's 5 MiB";
}

// A 70B model's fake-quant export in FP32 (~280 GB) and the largest object
// S3 accepts both fit in 10,000 parts of at least 5 MiB.
TEST(S3PartSizeForTest, GrowsPartsSoThatHugeFilesFitInTenThousandParts) {
  for (int64_t size : {int64_t{280'000'000'000}, 10000 * 64 * kMiB + 1, kS3MaxObjectBytes}) {
    auto part = S3PartSizeFor(size, 64 * kMiB);
    ASSERT_TRUE(part.ok()) << size;
    EXPECT_LE((size + *part - 1) / *part, kS3MaxParts) << size;
    EXPECT_GE(*part, 64 * kMiB) << size;
    EXPECT_LE(*part, kS3MaxPartBytes) << size;
    EXPECT_EQ(*part % kMiB, 0) << size;
  }
  EXPECT_THAT(S3PartSizeFor(kS3MaxObjectBytes + 1, 64 * kMiB),
              StatusIs(absl::StatusCode::kInvalidArgument, "object size limit"));
}

TEST(S3MultipartXmlTest, CompleteBodyListsPartsInOrderWithEscapedETags) {
  const std::string xml = CompleteMultipartUploadXml({{1, "\"a1\""}, {2, "\"b<2\""}});
  EXPECT_THAT(xml, HasSubstr("<Part><PartNumber>1</PartNumber><ETag>&quot;a1&quot;</ETag></Part>"
                             "<Part><PartNumber>2</PartNumber><ETag>&quot;b&lt;2&quot;</ETag>"));
  EXPECT_THAT(xml, HasSubstr("<CompleteMultipartUpload xmlns="));
}

TEST(S3MultipartXmlTest, ParsesUploadIdsAndOpenUploads) {
  EXPECT_EQ(*ParseUploadId("<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>"
                           "<UploadId>id&amp;1</UploadId></InitiateMultipartUploadResult>"),
            "id&1");
  EXPECT_THAT(ParseUploadId("<InitiateMultipartUploadResult/>"),
              StatusIs(absl::StatusCode::kDataLoss, "no <UploadId>"));
  auto open = ParseListMultipartUploads(
      "<ListMultipartUploadsResult><Bucket>b</Bucket><UploadIdMarker></UploadIdMarker>"
      "<Upload><Key>p/a.bin</Key><UploadId>u1</UploadId><Initiator><ID>x</ID></Initiator>"
      "</Upload><Upload><Key>p/b.bin</Key><UploadId>u2</UploadId></Upload>"
      "</ListMultipartUploadsResult>");
  ASSERT_TRUE(open.ok()) << open.status();
  ASSERT_EQ(open->size(), 2u);
  EXPECT_EQ((*open)[1].key, "p/b.bin");
  EXPECT_EQ((*open)[1].upload_id, "u2");
  EXPECT_THAT(
      *ParseListMultipartUploads("<ListMultipartUploadsResult></ListMultipartUploadsResult>"),
      ElementsAre());
  EXPECT_EQ(ParseListMultipartUploads("<Error/>").status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace windquant::store
