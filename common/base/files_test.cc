#include "common/base/files.h"

#include <filesystem>

#include "gtest/gtest.h"

namespace windquant::base {
namespace {

TEST(FilesTest, WriteAtomicThenReadBack) {
  const std::string dir = ::testing::TempDir() + "/wq_files_test/sub";
  const std::string path = dir + "/x.bin";
  ASSERT_TRUE(WriteFileAtomic(path, std::string("a\0b", 3)).ok());
  auto data = ReadFile(path);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, std::string("a\0b", 3));
  // No temporary left behind.
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  EXPECT_EQ(n, 1);
}

TEST(FilesTest, ReadMissingFileNamesPath) {
  auto data = ReadFile("/nonexistent/wq/file");
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("/nonexistent/wq/file"), std::string::npos);
}

TEST(FilesTest, Sha256OfKnownString) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace windquant::base
