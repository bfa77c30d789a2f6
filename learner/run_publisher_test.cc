#include "learner/run_publisher.h"

#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/plan/plan_io.h"
#include "common/store/run_repository.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/status_matchers.h"
#include "common/testing/synthetic_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::learner {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::windquant::testing::StatusIs;

constexpr absl::Duration kFlush = absl::Seconds(30);

class RunPublisherTest : public ::testing::Test {
 protected:
  RunPublisherTest() : dir_("run_publisher") {
    options_.model_dir = "/models/stories260k";
    options_.config_digest = "0123456789abcdef";  // a config::RunConfigDigest
    options_.target_bits = 2.0;
    options_.dir = dir_.path() + "/out";
    options_.store = "file://" + dir_.path() + "/store";
  }
  absl::StatusOr<std::unique_ptr<RunPublisher>> Open(bool fresh) {
    RunPublisherOptions o = options_;
    o.fresh = fresh;
    o.restore_timeout = absl::ZeroDuration();
    o.uploader.initial_backoff = absl::Milliseconds(1);
    return RunPublisher::Open(std::move(o));
  }
  // A checkpoint's files as the learner leaves them in output.dir.
  void WriteCheckpointFiles(const std::string& tag) {
    for (const char* f : {"checkpoint/run.ckpt", "unit_table.pb", "plans.jsonl"}) {
      ASSERT_TRUE(base::WriteFileAtomic(options_.dir + "/" + f, tag + f).ok());
    }
  }
  store::RunRepository Runs() {
    if (store_ == nullptr) store_ = *store::OpenArtifactStore(options_.store);
    return store::RunRepository(store_.get());
  }

  ::windquant::testing::ScopedTestDir dir_;
  RunPublisherOptions options_;
  std::unique_ptr<store::ArtifactStore> store_;
};

TEST_F(RunPublisherTest, CheckpointsGoToTheStoreAndAnEmptyDiskResumesFromThem) {
  auto p = Open(/*fresh=*/false);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string run_id = (*p)->run_id();
  EXPECT_THAT(run_id, StartsWith("stories260k-"));
  EXPECT_EQ(*base::ReadFile(options_.dir + "/run_id"), run_id + "\n");
  EXPECT_FALSE((*p)->restored());
  for (int update = 1; update <= 3; ++update) {
    WriteCheckpointFiles(absl::StrCat("u", update, ":"));
    (*p)->OnCheckpoint(update, update == 3);
    // A newer checkpoint replaces one still queued (coalesced): wait for each,
    // so that all three reach the store and pruning is what is tested.
    ASSERT_TRUE((*p)->Flush(kFlush));
  }
  auto info = Runs().GetRunInfo(run_id);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->updates, 3);
  EXPECT_EQ(info->model, "stories260k");
  auto checkpoints = Runs().Checkpoints(run_id).ListPlans();
  ASSERT_TRUE(checkpoints.ok());
  EXPECT_EQ(checkpoints->size(), 2u) << "the two newest are kept";
  p->reset();

  // The learner's disk is gone; a new one with the same config finds the run
  // and gets the newest checkpoint's files back, byte for byte.
  fs::remove_all(options_.dir);
  auto again = Open(/*fresh=*/false);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->run_id(), run_id);
  EXPECT_TRUE((*again)->restored());
  for (const char* f : {"checkpoint/run.ckpt", "unit_table.pb", "plans.jsonl"}) {
    EXPECT_EQ(*base::ReadFile(options_.dir + "/" + f), absl::StrCat("u3:", f)) << f;
  }
  again->reset();

  // Local files win over the store's (a restart on the same disk).
  WriteCheckpointFiles("local:");
  auto local = Open(/*fresh=*/false);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_FALSE((*local)->restored());
  EXPECT_EQ(*base::ReadFile(options_.dir + "/unit_table.pb"), "local:unit_table.pb");
  local->reset();

  // A fresh run (quantize without --resume) is another run; a changed config too.
  auto fresh = Open(/*fresh=*/true);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_NE((*fresh)->run_id(), run_id);
  EXPECT_THAT((*fresh)->run_id(), StartsWith(run_id.substr(0, run_id.rfind('-') + 1)));
  fresh->reset();
  fs::remove_all(options_.dir);
  options_.config_digest = "fedcba9876543210";  // another config
  auto other = Open(/*fresh=*/false);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE((*other)->run_id().substr(0, run_id.rfind('-')), run_id.substr(0, run_id.rfind('-')));
  EXPECT_FALSE((*other)->restored());
}

TEST_F(RunPublisherTest, BestPlansOncePerPlanAndTheFinalPlanWithItsFiles) {
  auto p = Open(/*fresh=*/true);
  ASSERT_TRUE(p.ok()) << p.status();
  const plan::UnitTable table = windquant::testing::SyntheticTable(14, 1);
  rl::CandidatePlan best;
  best.actions.assign(table.units.size(), 4);
  best.evaluation.effective_bits = 2.25;
  best.evaluation.eval_ppl = 17.5;
  best.target_bits = 2.5;
  best.source = "rl";
  best.update = 4;
  (*p)->OnBestPlan(best, table);
  (*p)->OnBestPlan(best, table);  // the same plan again (e.g. after a restart)
  best.actions[0] = 2;
  best.evaluation.eval_ppl = 16.0;
  (*p)->OnBestPlan(best, table);
  const std::string out = options_.dir + "/final";
  ASSERT_TRUE(base::WriteFileAtomic(out + "/plan.json", "{}").ok());
  ASSERT_TRUE(base::WriteFileAtomic(out + "/quantized/model.safetensors", "tensors").ok());
  (*p)->PublishFinal(out, {"plan.json", "quantized"}, {{"perplexity", "16.000000"}});
  ASSERT_TRUE((*p)->Flush(kFlush));
  EXPECT_TRUE(*(*p)->HasFinal());

  auto plans = Runs().ListPlans((*p)->run_id());
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), 3u);
  EXPECT_EQ((*plans)[0].plan_id, "final");
  EXPECT_EQ((*plans)[0].metadata.at("perplexity"), "16.000000");
  EXPECT_THAT((*plans)[1].plan_id, StartsWith("best-"));
  EXPECT_EQ((*plans)[1].metadata.at("perplexity"), "16.000000") << "newest first";
  EXPECT_EQ((*plans)[2].metadata.at("perplexity"), "17.500000");
  EXPECT_EQ((*plans)[2].metadata.at("effective_bits"), "2.250000");
  auto pulled = Runs().Plans((*p)->run_id()).Pull("final");
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  ASSERT_EQ(pulled->size(), 2u);
  EXPECT_EQ((*pulled)[1].name, "quantized/model.safetensors");
  EXPECT_EQ((*pulled)[1].bytes, "tensors");
  // A best plan pulled from the store is a plan of the table.
  auto best_files = Runs().Plans((*p)->run_id()).Pull((*plans)[1].plan_id);
  ASSERT_TRUE(best_files.ok()) << best_files.status();
  auto plan = plan::PlanFromBinary((*best_files)[0].bytes, table, "plan.bin");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->actions, best.actions);
  auto info = Runs().GetRunInfo((*p)->run_id());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, "done");
  EXPECT_EQ(info->best_plan, (*plans)[1].plan_id);
}

TEST_F(RunPublisherTest, ErrorsNameTheKey) {
  options_.store = "";
  EXPECT_THAT(Open(false).status(), StatusIs(absl::StatusCode::kInvalidArgument, "output.store"));
  options_.store = "s3://Bad_Bucket";
  EXPECT_THAT(Open(false).status(), StatusIs(absl::StatusCode::kInvalidArgument, "output.store"));
}

}  // namespace
}  // namespace windquant::learner
