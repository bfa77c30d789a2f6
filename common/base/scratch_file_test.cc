#include "common/base/scratch_file.h"

#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing/scoped_test_dir.h"

namespace windquant::base {
namespace {

int64_t EntriesIn(const std::string& dir) {
  return std::distance(std::filesystem::directory_iterator(dir),
                       std::filesystem::directory_iterator());
}

TEST(ScratchFileTest, ReadsBackWhatWasAppendedAndLeavesNoName) {
  testing::ScopedTestDir dir("scratch");
  const std::string where = dir.path() + "/nested/deeper";  // created on demand
  absl::StatusOr<std::unique_ptr<ScratchFile>> f = ScratchFile::Create(where);
  ASSERT_TRUE(f.ok()) << f.status();
  std::vector<int32_t> a(1000), b(37);
  std::iota(a.begin(), a.end(), 5);
  std::iota(b.begin(), b.end(), -100);
  absl::StatusOr<int64_t> at_a = (*f)->Append(a.data(), a.size() * 4);
  absl::StatusOr<int64_t> at_b = (*f)->Append(b.data(), b.size() * 4);
  ASSERT_TRUE(at_a.ok() && at_b.ok());
  EXPECT_EQ(*at_a, 0);
  EXPECT_EQ(*at_b, 4000);
  EXPECT_EQ((*f)->size(), 4000 + 37 * 4);
  // The directory holds no file while the scratch file is open.
  EXPECT_EQ(EntriesIn(where), 0);
  // Reads from several threads at once, in any order.
  std::vector<std::thread> readers;
  std::vector<char> ok(8, 0);  // one byte per reader (std::vector<bool>'s bits share words)
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      std::vector<int32_t> got_b(b.size()), got_a(10);
      ok[t] = (*f)->Read(*at_b, b.size() * 4, got_b.data()).ok() &&
              (*f)->Read(4 * (100 + t), 40, got_a.data()).ok() && got_b == b &&
              got_a == std::vector<int32_t>(a.begin() + 100 + t, a.begin() + 110 + t);
    });
  }
  for (std::thread& r : readers) r.join();
  for (int t = 0; t < 8; ++t) EXPECT_TRUE(ok[t]) << "reader " << t;
}

TEST(ScratchFileTest, ReadPastTheEndIsOutOfRange) {
  testing::ScopedTestDir dir("scratch");
  absl::StatusOr<std::unique_ptr<ScratchFile>> f = ScratchFile::Create(dir.path());
  ASSERT_TRUE(f.ok()) << f.status();
  const char data[16] = {};
  ASSERT_TRUE((*f)->Append(data, 16).ok());
  char out[16];
  EXPECT_TRUE((*f)->Read(8, 8, out).ok());
  EXPECT_EQ((*f)->Read(8, 9, out).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*f)->Read(-1, 1, out).code(), absl::StatusCode::kOutOfRange);
}

TEST(ScratchFileTest, ADirectoryThatIsAFileNamesIt) {
  testing::ScopedTestDir dir("scratch");
  const std::string file = dir.path() + "/plain";
  std::ofstream(file) << "x";
  absl::StatusOr<std::unique_ptr<ScratchFile>> f = ScratchFile::Create(file + "/sub");
  ASSERT_EQ(f.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(f.status().message().find(file), std::string::npos) << f.status();
  f = ScratchFile::Create(file);
  ASSERT_EQ(f.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(f.status().message().find(file), std::string::npos) << f.status();
}

}  // namespace
}  // namespace windquant::base
