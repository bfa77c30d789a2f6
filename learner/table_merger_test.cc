#include "learner/table_merger.h"

#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/base/files.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/status_matchers.h"
#include "common/testing/synthetic_table.h"

namespace windquant::learner {
namespace {

using ::windquant::testing::ScopedTestDir;

using ::windquant::testing::IsOk;
using ::windquant::testing::StatusIs;

// A synthetic table of 3 layers (21 units) and its three stage parts.
class TableMergerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_.path();
    whole_ = windquant::testing::SyntheticTable(21, 3);
    whole_.num_layers = 3;
    for (int s = 0; s < 3; ++s) {
      plan::UnitTable part = whole_;
      part.first_layer = s;
      part.end_layer = s + 1;
      part.units.clear();
      for (const auto& u : whole_.units) {
        if (u.layer == s) part.units.push_back(u);
      }
      stages_.push_back(part);
    }
  }
  TableMerger Merger() const { return TableMerger(3, 2, 256, path()); }
  std::string path() const { return dir_ + "/unit_table.pb"; }

  ScopedTestDir temp_{"wq-table-merger"};
  std::string dir_;
  plan::UnitTable whole_;
  std::vector<plan::UnitTable> stages_;
};

TEST_F(TableMergerTest, MergesTheStagesInAnyOrderAndSavesTheTable) {
  TableMerger m = Merger();
  EXPECT_THAT(m.CompleteOrUnavailable(), StatusIs(absl::StatusCode::kUnavailable, "0 of 3"));
  bool completed = true;
  absl::StatusOr<RegisterResult> r = m.Register(2, 0, stages_[2], &completed);
  ASSERT_THAT(r, IsOk());
  EXPECT_FALSE(completed);
  EXPECT_EQ(r->registered_stages, 1);
  EXPECT_EQ(r->expected_stages, 3);
  EXPECT_FALSE(r->complete);
  ASSERT_THAT(m.Register(2, 1, stages_[2], &completed), IsOk());  // another replica
  ASSERT_THAT(m.Register(0, 0, stages_[0], nullptr), IsOk());
  EXPECT_THAT(m.CompleteOrUnavailable(), StatusIs(absl::StatusCode::kUnavailable, "2 of 3"));
  EXPECT_EQ(m.table(), nullptr);
  EXPECT_FALSE(std::filesystem::exists(path()));
  r = m.Register(1, 0, stages_[1], &completed);
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE(completed);
  EXPECT_TRUE(r->complete);
  EXPECT_EQ(r->registered_stages, 3);
  EXPECT_EQ(r->total_units, 21u);
  ASSERT_NE(m.table(), nullptr);
  EXPECT_EQ(m.table()->units.size(), 21u);
  EXPECT_THAT(m.CompleteOrUnavailable(), IsOk());
  // A restarted actor registers again: it only has to agree.
  r = m.Register(0, 1, stages_[0], &completed);
  ASSERT_THAT(r, IsOk());
  EXPECT_FALSE(completed);
  EXPECT_TRUE(r->complete);

  // A restarted learner finds the merged table on disk.
  TableMerger again = Merger();
  ASSERT_THAT(again.LoadSaved(), IsOk());
  ASSERT_NE(again.table(), nullptr);
  EXPECT_EQ(again.table()->units.size(), 21u);
  EXPECT_EQ(again.table()->fingerprint, whole_.fingerprint);
}

TEST_F(TableMergerTest, RejectsRegistrationsInconsistentWithTheRun) {
  TableMerger m = Merger();
  EXPECT_THAT(m.Register(3, 0, stages_[0], nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, "stage: 3 outside [0, 3)"));
  EXPECT_THAT(m.Register(-1, 0, stages_[0], nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, "stage: -1"));
  EXPECT_THAT(m.Register(0, 2, stages_[0], nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, "replica: 2 outside [0, 2)"));
  plan::UnitTable narrow = stages_[0];
  narrow.chunk_size = 128;
  EXPECT_THAT(m.Register(0, 0, narrow, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, "table.chunk_size: 128"));
  ASSERT_THAT(m.Register(0, 0, stages_[0], nullptr), IsOk());
  plan::UnitTable other = stages_[1];
  other.fingerprint = "another model";
  EXPECT_THAT(m.Register(1, 0, other, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "table.model_fingerprint: differs from stage 0's"));
  plan::UnitTable shorter = stages_[0];
  shorter.units.pop_back();
  EXPECT_THAT(m.Register(0, 1, shorter, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, "replica 1 of stage 0 disagrees"));
  ASSERT_THAT(m.Register(1, 0, stages_[1], nullptr), IsOk());
  ASSERT_THAT(m.Register(2, 0, stages_[2], nullptr), IsOk());
  EXPECT_THAT(m.Register(1, 1, other, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "table.model_fingerprint: differs from the run's table"));
}

// error-case: learner.register.not-the-runs-fingerprint
TEST_F(TableMergerTest, AnExpectedFingerprintRefusesEveryOtherFromTheFirstStageOn) {
  TableMerger m = Merger();
  plan::UnitTable stale = stages_[0];
  stale.fingerprint = "0123456789abcdef-old-calibration";
  ASSERT_NE(stale.fingerprint, whole_.fingerprint);
  // Without an expectation the first table sets the run's fingerprint.
  ASSERT_THAT(m.Register(0, 0, stale, nullptr), IsOk());
  TableMerger expecting = Merger();
  expecting.set_expected_fingerprint(whole_.fingerprint);
  EXPECT_THAT(expecting.Register(0, 0, stale, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "table.model_fingerprint: 0123456789ab is not the run's " +
                           whole_.fingerprint.substr(0, 12)));
  bool completed = false;
  for (int s = 0; s < 3; ++s) ASSERT_THAT(expecting.Register(s, 0, stages_[s], &completed), IsOk());
  EXPECT_TRUE(completed);
  EXPECT_EQ(expecting.table()->fingerprint, whole_.fingerprint);
}

TEST_F(TableMergerTest, NoSavedTableIsNoError) {
  TableMerger m = Merger();
  EXPECT_THAT(m.LoadSaved(), IsOk());
  EXPECT_EQ(m.table(), nullptr);
}

TEST_F(TableMergerTest, ASavedFileThatIsNoTableIsDataLossNamingIt) {
  ASSERT_THAT(base::WriteFileAtomic(path(), std::string("\x07\x07\x07", 3)), IsOk());
  TableMerger m = Merger();
  EXPECT_THAT(m.LoadSaved(), StatusIs(absl::StatusCode::kDataLoss, path()));
  EXPECT_EQ(m.table(), nullptr);
}

// Every cut of the saved file (some of which parse as a smaller table) and
// an altered byte are DATA_LOSS naming the file: never a table.
TEST_F(TableMergerTest, ASavedFileCutShortOrAlteredIsNeverTrusted) {
  {
    TableMerger m = Merger();
    for (int s = 0; s < 3; ++s) ASSERT_THAT(m.Register(s, 0, stages_[s], nullptr), IsOk());
    ASSERT_NE(m.table(), nullptr);
  }
  const std::string bytes = base::ReadFile(path()).value();
  auto not_trusted = [&](const std::string& what) {
    TableMerger m = Merger();
    const absl::Status s = m.LoadSaved();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << what << ": " << s;
    EXPECT_EQ(s.message(), path() + ": its sha256 is not the one in " + path() +
                               ".sha256 (cut short or altered)");
    EXPECT_EQ(m.table(), nullptr) << what;
  };
  std::string altered = bytes;
  altered[altered.size() / 2] ^= 0x01;
  ASSERT_THAT(base::WriteFileAtomic(path(), altered), IsOk());
  not_trusted("a byte altered");
  ASSERT_THAT(base::WriteFileAtomic(path(), bytes), IsOk());
  // Every cut, the longest first (shrinking keeps the prefix; no fsync per cut).
  for (size_t cut = bytes.size(); cut-- > 0;) {
    std::filesystem::resize_file(path(), cut);
    not_trusted(std::to_string(cut) + " bytes");
  }
  ASSERT_THAT(base::WriteFileAtomic(path(), bytes), IsOk());
  TableMerger whole = Merger();
  EXPECT_THAT(whole.LoadSaved(), IsOk());
  EXPECT_NE(whole.table(), nullptr);
}

}  // namespace
}  // namespace windquant::learner
