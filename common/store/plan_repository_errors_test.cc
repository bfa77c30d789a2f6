// All-or-nothing plan transfers on a real file store: an empty push is
// refused, a pull that fails verification leaves no folder, and an existing
// output folder is refused or replaced whole, never mixed with another plan.
#include <unistd.h>

#include <filesystem>

#include "common/base/files.h"
#include "common/store/file_artifact_store.h"
#include "common/store/plan_repository.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::store {
namespace {

namespace fs = std::filesystem;
using ::windquant::testing::IsOk;
using ::windquant::testing::StatusIs;

class PlanRepositoryErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() / ("wq_plan_repo_errors_" + std::to_string(getpid()));
    fs::remove_all(tmp_);
    fs::create_directories(tmp_ / "in");
    store_ = std::make_unique<FileArtifactStore>((tmp_ / "store").string());
    repo_ = std::make_unique<PlanRepository>(store_.get());
  }
  void TearDown() override { fs::remove_all(tmp_); }
  void PushSample(const std::string& id, const std::string& bytes) {
    ASSERT_THAT(repo_->Push(id, {{"plan.bin", bytes}, {"sub/report.md", "# r\n"}}), IsOk());
  }

  fs::path tmp_;
  std::unique_ptr<FileArtifactStore> store_;
  std::unique_ptr<PlanRepository> repo_;
};

// error-case: store.push-empty-folder
TEST_F(PlanRepositoryErrorsTest, PushOfAnEmptyFolderIsRefused) {
  const std::string in = (tmp_ / "in").string();
  EXPECT_THAT(repo_->PushDirectory("p1", in),
              StatusIs(absl::StatusCode::kInvalidArgument, in + ": no files to push"));
  EXPECT_THAT(repo_->Push("p1", {}),
              StatusIs(absl::StatusCode::kInvalidArgument, "plan 'p1': no objects to push"));
  EXPECT_TRUE(repo_->ListPlans()->empty());
}

// error-case: store.pull-corrupt-object
TEST_F(PlanRepositoryErrorsTest, PullThatFailsVerificationLeavesNoFolder) {
  PushSample("p1", "0123456789");
  ASSERT_THAT(store_->Put("plans/p1/sub/report.md", "# R\n"), IsOk());  // same size, other bytes
  const std::string out = (tmp_ / "out").string();
  EXPECT_THAT(repo_->PullToDirectory("p1", out),
              StatusIs(absl::StatusCode::kDataLoss, "object 'sub/report.md': sha256"));
  EXPECT_FALSE(fs::exists(out));
  int entries = 0;
  for (const auto& e : fs::directory_iterator(tmp_))
    entries += e.path().filename() != "in" && e.path().filename() != "store";
  EXPECT_EQ(entries, 0);  // no temporary folder either
}

// error-case: store.pull-existing-folder
TEST_F(PlanRepositoryErrorsTest, PullIntoAnExistingFolderIsRefusedOrReplacesItWhole) {
  PushSample("p1", "first plan");
  PushSample("p2", "second plan");
  const std::string out = (tmp_ / "out").string();
  ASSERT_THAT(repo_->PullToDirectory("p1", out), IsOk());
  ASSERT_THAT(base::WriteFileAtomic(out + "/extra.txt", "mine"), IsOk());
  EXPECT_THAT(repo_->PullToDirectory("p2", out),
              StatusIs(absl::StatusCode::kAlreadyExists, out + ": exists and is not empty"));
  EXPECT_EQ(*base::ReadFile(out + "/plan.bin"), "first plan");  // untouched
  ASSERT_THAT(repo_->PullToDirectory("p2", out, /*replace=*/true), IsOk());
  EXPECT_EQ(*base::ReadFile(out + "/plan.bin"), "second plan");
  EXPECT_FALSE(fs::exists(out + "/extra.txt"));  // replaced whole, not merged
}

}  // namespace
}  // namespace windquant::store
