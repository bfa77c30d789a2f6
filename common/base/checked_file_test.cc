#include "common/base/checked_file.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/base/files.h"
#include "common/testing/scoped_test_dir.h"

namespace windquant::base {
namespace {

using ::testing::HasSubstr;

TEST(CheckedFileTest, RoundTripAndNotFound) {
  const ::windquant::testing::ScopedTestDir dir("wq-checked-file");
  const std::string path = dir.path() + "/a.pb";
  EXPECT_EQ(ReadCheckedFile(path).status().code(), absl::StatusCode::kNotFound);
  const std::string payload("plan\0bytes\nwith a newline", 25);
  ASSERT_TRUE(WriteCheckedFile(path, payload).ok());
  absl::StatusOr<std::string> back = ReadCheckedFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, payload);
  ASSERT_TRUE(WriteCheckedFile(path, "").ok());
  EXPECT_EQ(*ReadCheckedFile(path), "");
}

// Every cut of the file and every flipped byte is DATA_LOSS naming the path, never a payload.
TEST(CheckedFileTest, ACutOrAlteredFileIsNeverTrusted) {
  const ::windquant::testing::ScopedTestDir dir("wq-checked-file");
  const std::string path = dir.path() + "/lambda.txt";
  ASSERT_TRUE(WriteCheckedFile(path, "lambda 0.25 batch 3").ok());
  const std::string whole = *ReadFile(path);
  for (size_t n = 0; n < whole.size(); ++n) {
    ASSERT_TRUE(WriteFileAtomic(path, whole.substr(0, n)).ok());
    const absl::Status s = ReadCheckedFile(path).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << n << " bytes";
    EXPECT_THAT(s.message(), HasSubstr(path));
  }
  for (size_t i = 0; i < whole.size(); ++i) {
    std::string bad = whole;
    bad[i] ^= 0x04;
    ASSERT_TRUE(WriteFileAtomic(path, bad).ok());
    EXPECT_EQ(ReadCheckedFile(path).status().code(), absl::StatusCode::kDataLoss) << "byte " << i;
  }
  ASSERT_TRUE(WriteFileAtomic(path, whole.substr(0, whole.size() - 3)).ok());
  EXPECT_THAT(ReadCheckedFile(path).status().message(),
              HasSubstr("truncated (16 bytes, the header says 19)"));
  ASSERT_TRUE(WriteFileAtomic(path, whole + "x").ok());
  EXPECT_THAT(ReadCheckedFile(path).status().message(), HasSubstr("too long"));
  ASSERT_TRUE(WriteFileAtomic(path, "lambda 0.25").ok());  // an unchecked file
  EXPECT_THAT(ReadCheckedFile(path).status().message(), HasSubstr("no checksum header"));
}

}  // namespace
}  // namespace windquant::base
