#include "common/model/safetensors.h"

#include <cstring>
#include <string>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/base/files.h"
#include "common/model/safetensors_writer.h"
#include "common/testing/status_matchers.h"

namespace windquant::model {
namespace {

using ::windquant::testing::StatusIs;

using ::testing::HasSubstr;

// A file from a header text and data bytes, with the header length prefix.
std::string RawFile(const std::string& header, const std::string& data) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header + data;
}

absl::Status ParseStatus(const std::string& bytes) {
  return SafetensorsFile::FromBuffer(bytes, "bad.safetensors").status();
}

std::string OneLine(const absl::Status& s) { return std::string(s.message()); }

TEST(SafetensorsWriterTest, HeaderIsAlignedAndRoundTripsF32) {
  at::manual_seed(1);
  at::Tensor a = at::randn({3, 5});
  at::Tensor b = at::randn({7});
  SafetensorsWriter w;
  ASSERT_TRUE(w.Add("a", a).ok());
  ASSERT_TRUE(w.Add("b", b).ok());
  std::string bytes = w.Serialize();
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  auto f = SafetensorsFile::FromBuffer(bytes, "mem");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->tensors().size(), 2u);
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  const TensorInfo* ia = (*f)->Find("a");
  ASSERT_NE(ia, nullptr);
  EXPECT_EQ(ia->dtype, Dtype::kF32);
  EXPECT_EQ(ia->shape, (std::vector<int64_t>{3, 5}));
  std::string_view da = (*f)->Data(*ia);
  ASSERT_EQ(da.size(), 15u * 4);
  EXPECT_EQ(std::memcmp(da.data(), a.data_ptr<float>(), da.size()), 0);
  EXPECT_EQ((*f)->Find("missing"), nullptr);
}

TEST(SafetensorsWriterTest, WritesF16AndBf16Bits) {
  at::Tensor a = at::tensor({1.0f, -2.5f, 3.140625f});
  SafetensorsWriter w;
  ASSERT_TRUE(w.Add("h", a, Dtype::kF16).ok());
  ASSERT_TRUE(w.Add("b", a, Dtype::kBF16).ok());
  const std::string path = ::testing::TempDir() + "/st_writer_halves.safetensors";
  ASSERT_TRUE(w.Write(path).ok());
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  at::Tensor h = a.to(at::kHalf), bf = a.to(at::kBFloat16);
  const TensorInfo* ih = (*f)->Find("h");
  const TensorInfo* ib = (*f)->Find("b");
  ASSERT_TRUE(ih && ib);
  EXPECT_EQ(ih->dtype, Dtype::kF16);
  EXPECT_EQ(ib->dtype, Dtype::kBF16);
  EXPECT_EQ(std::memcmp((*f)->Data(*ih).data(), h.data_ptr(), 6), 0);
  EXPECT_EQ(std::memcmp((*f)->Data(*ib).data(), bf.data_ptr(), 6), 0);
}

TEST(SafetensorsWriterTest, RejectsDuplicateAndBadRawSize) {
  SafetensorsWriter w;
  ASSERT_TRUE(w.Add("x", at::zeros({2})).ok());
  EXPECT_THAT(w.Add("x", at::zeros({2})),
              StatusIs(absl::StatusCode::kAlreadyExists, "tensor x: added twice"));
  EXPECT_THAT(w.AddRaw("y", Dtype::kF32, {3}, std::string(8, '\0')),
              StatusIs(absl::StatusCode::kInvalidArgument, "tensor y"));
  EXPECT_TRUE(w.AddRaw("y", Dtype::kU8, {3}, std::string(3, '\0')).ok());
  EXPECT_THAT(w.Add("z", at::zeros({2}), Dtype::kI8),
              StatusIs(absl::StatusCode::kInvalidArgument, "tensor z"));
}

TEST(SafetensorsFileTest, EmptyFileWithNoTensorsIsValid) {
  EXPECT_TRUE(ParseStatus(RawFile("{}", "")).ok());
  EXPECT_TRUE(ParseStatus(SafetensorsWriter().Serialize()).ok());
}

TEST(SafetensorsFileTest, MissingFileIsNotFound) {
  auto f = SafetensorsFile::Open(::testing::TempDir() + "/no_such.safetensors");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(OneLine(f.status()), HasSubstr("no_such.safetensors"));
}

TEST(SafetensorsFileTest, RejectsTruncatedFile) {
  // Shorter than the length prefix, on disk.
  const std::string path = ::testing::TempDir() + "/st_trunc.safetensors";
  ASSERT_TRUE(base::WriteFileAtomic(path, std::string(5, '\0')).ok());
  auto f = SafetensorsFile::Open(path);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(OneLine(f.status()), HasSubstr("st_trunc.safetensors: truncated file"));
  // A valid file cut in the middle of its data.
  SafetensorsWriter w;
  ASSERT_TRUE(w.Add("w", at::ones({4, 4})).ok());
  std::string bytes = w.Serialize();
  absl::Status s = ParseStatus(bytes.substr(0, bytes.size() - 10));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(OneLine(s), HasSubstr("bad.safetensors: tensor w: data_offsets [0, 64] outside"));
}

TEST(SafetensorsFileTest, RejectsHeaderLengthBeyondFile) {
  std::string bytes = RawFile("{}", "");
  bytes[0] = 100;
  absl::Status s = ParseStatus(bytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(OneLine(s), HasSubstr("bad.safetensors: header length 100 beyond the file"));
  // Huge length: no overflow.
  std::string huge(8, '\xff');
  EXPECT_THAT(OneLine(ParseStatus(huge + "{}")), HasSubstr("beyond the file"));
}

TEST(SafetensorsFileTest, RejectsInvalidJsonHeader) {
  absl::Status s = ParseStatus(RawFile("{\"a\": [1, 2", ""));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(OneLine(s), HasSubstr("bad.safetensors: invalid JSON header"));
  EXPECT_EQ(OneLine(s).find('\n'), std::string::npos);
  EXPECT_THAT(OneLine(ParseStatus(RawFile("[1,2]", ""))), HasSubstr("expected a JSON object"));
  EXPECT_THAT(OneLine(ParseStatus(RawFile(R"({"t": 3})", ""))),
              HasSubstr("tensor t: expected an object"));
  EXPECT_THAT(OneLine(ParseStatus(RawFile(
                  R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}})", ""))),
              HasSubstr("tensor t: shape: invalid dimension -1"));
  EXPECT_THAT(OneLine(ParseStatus(
                  RawFile(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", ""))),
              HasSubstr("tensor t: data_offsets: expected [begin, end]"));
}

TEST(SafetensorsFileTest, RejectsUnknownDtype) {
  absl::Status s = ParseStatus(
      RawFile(R"({"t": {"dtype": "Q4_K", "shape": [2], "data_offsets": [0, 2]}})", "ab"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(OneLine(s), HasSubstr("bad.safetensors: tensor t: unknown dtype \"Q4_K\""));
}

TEST(SafetensorsFileTest, RejectsOffsetsOutsideData) {
  absl::Status s = ParseStatus(
      RawFile(R"({"t": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})", "abcd"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(OneLine(s), HasSubstr("tensor t: data_offsets [2, 6] outside the data (4 bytes)"));
  EXPECT_THAT(OneLine(ParseStatus(RawFile(
                  R"({"t": {"dtype": "U8", "shape": [0], "data_offsets": [3, 1]}})", "abcd"))),
              HasSubstr("end before begin"));
}

TEST(SafetensorsFileTest, RejectsSizeDisagreeingWithShape) {
  absl::Status s = ParseStatus(
      RawFile(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", "abcd"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(OneLine(s),
              HasSubstr("tensor t: data_offsets [0, 4] hold 4 bytes but F32 [2] needs 8"));
  // Element count overflow is caught, not wrapped.
  EXPECT_THAT(
      OneLine(ParseStatus(RawFile(
          R"({"t": {"dtype": "F32", "shape": [4611686018427387904, 4611686018427387904], "data_offsets": [0, 0]}})",
          ""))),
      HasSubstr("too many"));
}

TEST(SafetensorsFileTest, RejectsOverlappingOffsets) {
  absl::Status s = ParseStatus(RawFile(
      R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})",
      "abcdef"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(OneLine(s), HasSubstr("tensor b: data_offsets [2, 6] overlap tensor a"));
}

TEST(SafetensorsFileTest, RejectsDataNotCovered) {
  // A gap between tensors.
  absl::Status gap = ParseStatus(RawFile(
      R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}, "b": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]}})",
      "abcdef"));
  EXPECT_EQ(gap.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(OneLine(gap), HasSubstr("tensor b: data_offsets [4, 6] leave bytes [2, 4)"));
  // Trailing bytes after the last tensor.
  absl::Status tail = ParseStatus(
      RawFile(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", "abcdef"));
  EXPECT_THAT(OneLine(tail), HasSubstr("4 bytes of data after the last tensor (a)"));
}

TEST(SafetensorsFileTest, RejectsBadMetadata) {
  EXPECT_THAT(OneLine(ParseStatus(RawFile(R"({"__metadata__": {"k": 1}})", ""))),
              HasSubstr("__metadata__.k: expected a string"));
}

}  // namespace
}  // namespace windquant::model
