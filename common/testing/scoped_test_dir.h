// ScopedTestDir: a fresh, empty directory for one test under
// ::testing::TempDir(), named after `prefix`, the running test and this
// process, so that test binaries running at once (ctest -j, other checkouts
// on the machine) never share one; removed (best effort) when it goes.
// Test-only, header-only; not thread-safe (one per test).
#ifndef WINDQUANT_COMMON_TESTING_SCOPED_TEST_DIR_H_
#define WINDQUANT_COMMON_TESTING_SCOPED_TEST_DIR_H_

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace windquant::testing {

class ScopedTestDir {
 public:
  explicit ScopedTestDir(const std::string& prefix) {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = ::testing::TempDir();  // "/tmp/": no "//" in the paths tests compare
    if (path_.empty() || path_.back() != '/') path_ += "/";
    path_ += prefix + "-" + std::to_string(::getpid());
    if (info != nullptr) {
      // Parameterized tests are named "Prefix/Suite.Test/0": one folder, not nested ones.
      std::string name = std::string(info->test_suite_name()) + "." + info->name();
      std::replace(name.begin(), name.end(), '/', '_');
      path_ += "-" + name;
    }
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::create_directories(path_, ec);
  }
  ~ScopedTestDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTestDir(const ScopedTestDir&) = delete;
  ScopedTestDir& operator=(const ScopedTestDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_SCOPED_TEST_DIR_H_
