#include "common/store/sigv4_signer.h"

#include "common/base/files.h"
#include "gtest/gtest.h"

namespace windquant::store {
namespace {

// AWS SigV4 test suite, "get-vanilla-query-order-key-case" (credentials
// AKIDEXAMPLE, us-east-1, service "service", 20150830T123600Z).
TEST(SigV4SignerTest, AwsTestSuiteGetVanillaQueryOrderKeyCase) {
  SigV4Signer signer("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1",
                     "service");
  SigV4Request req;
  req.method = "GET";
  req.canonical_uri = "/";
  req.query = {{"Param2", "value2"}, {"Param1", "value1"}};
  req.headers = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
  req.payload_sha256_hex = base::Sha256Hex("");
  SigV4Signature sig = signer.Sign(req, "20150830T123600Z");
  EXPECT_EQ(sig.canonical_request,
            "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\n"
            "x-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sig.string_to_sign,
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
            "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0");
  EXPECT_EQ(sig.signature, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
  EXPECT_EQ(sig.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
}

// The worked examples of the Amazon S3 API reference, "Signature Calculations
// for the Authorization Header: Transferring Payload in a Single Chunk".
class S3DocExampleTest : public ::testing::Test {
 protected:
  SigV4Signer signer_{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                      "us-east-1", "s3"};
  static constexpr char kDate[] = "20130524T000000Z";
};

TEST_F(S3DocExampleTest, GetObjectWithRange) {
  SigV4Request req{"GET", "/test.txt", {}, {}, base::Sha256Hex("")};
  req.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                 {"Range", "bytes=0-9"},
                 {"x-amz-content-sha256", req.payload_sha256_hex},
                 {"x-amz-date", kDate}};
  SigV4Signature sig = signer_.Sign(req, kDate);
  EXPECT_EQ(sig.signed_headers, "host;range;x-amz-content-sha256;x-amz-date");
  EXPECT_EQ(base::Sha256Hex(sig.canonical_request),
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(sig.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST_F(S3DocExampleTest, PutObjectWithPayloadHash) {
  const std::string body = "Welcome to Amazon S3.";
  SigV4Request req{
      "PUT", "/" + SigV4Signer::UriEncode("test$file.text", false), {}, {}, base::Sha256Hex(body)};
  EXPECT_EQ(req.canonical_uri, "/test%24file.text");
  EXPECT_EQ(req.payload_sha256_hex,
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  req.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                 {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                 {"x-amz-date", kDate},
                 {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                 {"x-amz-content-sha256", req.payload_sha256_hex}};
  EXPECT_EQ(signer_.Sign(req, kDate).signature,
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST_F(S3DocExampleTest, ListObjectsQuery) {
  SigV4Request req{"GET", "/", {{"max-keys", "2"}, {"prefix", "J"}}, {}, base::Sha256Hex("")};
  req.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                 {"x-amz-date", kDate},
                 {"x-amz-content-sha256", req.payload_sha256_hex}};
  EXPECT_EQ(signer_.Sign(req, kDate).signature,
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4SignerTest, UriEncodingAndDate) {
  EXPECT_EQ(SigV4Signer::UriEncode("a b/c~d_e.f-g+h=i&é", false),
            "a%20b/c~d_e.f-g%2Bh%3Di%26%C3%A9");
  EXPECT_EQ(SigV4Signer::UriEncode("a/b", true), "a%2Fb");
  EXPECT_EQ(SigV4Signer::CanonicalQueryString({{"prefix", "plans/"}, {"list-type", "2"}}),
            "list-type=2&prefix=plans%2F");
  EXPECT_EQ(SigV4Signer::AmzDate(1440938160), "20150830T123600Z");
}

TEST(SigV4SignerTest, HmacSha256Rfc4231Case2) {
  EXPECT_EQ(SigV4Signer::HexEncode(SigV4Signer::HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

}  // namespace
}  // namespace windquant::store
