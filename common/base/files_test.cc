#include "common/base/files.h"
#include "common/base/output_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "common/testing/scoped_test_dir.h"
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

// A fresh directory under the test's temp dir.
int CountEntries(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// error-case: file.fifo
TEST(FilesTest, FifoIsRefusedWithoutBlocking) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-files");
  const std::string dir = test_dir.path();
  const std::string fifo = dir + "/model.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto data = ReadFile(fifo);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(data.status().message(), fifo + ": is a FIFO, not a regular file");
}

// error-case: file.symlink-loop
TEST(FilesTest, SymlinkLoopIsNamedAndNothingThrows) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-files");
  const std::string dir = test_dir.path();
  const std::string a = dir + "/a", b = dir + "/b";
  ASSERT_EQ(::symlink(b.c_str(), a.c_str()), 0);
  ASSERT_EQ(::symlink(a.c_str(), b.c_str()), 0);
  EXPECT_TRUE(PathExists(a));  // the entry is there; opening it names the loop
  auto data = ReadFile(a);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(data.status().message(), a + ": symlink loop");
}

// error-case: file.directory
TEST(FilesTest, DirectoryIsNotAFile) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-files");
  const std::string dir = test_dir.path();
  auto data = ReadFile(dir);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(data.status().message(), dir + ": is a directory, not a file");
}

TEST(FilesTest, SymlinkToARegularFileIsRead) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-files");
  const std::string dir = test_dir.path();
  ASSERT_TRUE(WriteFileAtomic(dir + "/real", "xyz").ok());
  ASSERT_EQ(::symlink((dir + "/real").c_str(), (dir + "/link").c_str()), 0);
  EXPECT_EQ(ReadFile(dir + "/link").value(), "xyz");
}

// error-case: output.dir-failed-fill
TEST(FilesTest, WriteDirAtomicLeavesNothingWhenFillFails) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-files");
  const std::string root = test_dir.path();
  const std::string out = root + "/out";
  absl::Status s = WriteDirAtomic(out, false, [](const std::string& tmp) {
    EXPECT_TRUE(WriteFileAtomic(tmp + "/half.bin", "half").ok());
    return absl::ResourceExhaustedError("disk full");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CountEntries(root), 0);  // neither out nor a temporary
}

// error-case: output.dir-exists
TEST(FilesTest, WriteDirAtomicRefusesOrReplacesAnExistingFolderWhole) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-files");
  const std::string root = test_dir.path();
  const std::string out = root + "/out";
  ASSERT_TRUE(WriteFileAtomic(out + "/old.bin", "old").ok());
  auto fill = [](const std::string& tmp) { return WriteFileAtomic(tmp + "/new.bin", "new"); };
  absl::Status refused = WriteDirAtomic(out, false, fill);
  EXPECT_EQ(refused.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(refused.message().find(out + ": exists and is not empty"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(out + "/old.bin"));
  ASSERT_TRUE(WriteDirAtomic(out, true, fill).ok());
  EXPECT_FALSE(std::filesystem::exists(out + "/old.bin"));  // replaced, not merged
  EXPECT_EQ(ReadFile(out + "/new.bin").value(), "new");
  EXPECT_EQ(CountEntries(root), 1);
  // An empty existing folder counts as absent.
  const std::string empty = root + "/empty";
  std::filesystem::create_directories(empty);
  EXPECT_TRUE(WriteDirAtomic(empty, false, fill).ok());
  EXPECT_EQ(ReadFile(empty + "/new.bin").value(), "new");
}

}  // namespace
}  // namespace windquant::base
