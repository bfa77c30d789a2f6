#include "common/store/run_repository.h"

#include "common/store/fake_artifact_store.h"
#include "common/store/run_listing.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::windquant::testing::StatusIs;

RunInfo Info(const std::string& id, const std::string& created) {
  RunInfo r;
  r.run_id = id;
  r.model = "stories260k";
  r.config_digest = "abc";
  r.target_bits = 2.0;
  r.created = created;
  r.updated = created;
  return r;
}

TEST(RunRepositoryTest, RunInfoRoundTripsAndRunsListNewestFirst) {
  FakeArtifactStore store;
  RunRepository runs(&store);
  RunInfo a = Info("m-1234-20250101T000000Z", "2025-01-01T00:00:00Z");
  RunInfo b = Info("m-1234-20250102T000000Z", "2025-01-02T00:00:00Z");
  RunInfo c = Info("other-99-20250103T000000Z", "2025-01-03T00:00:00Z");
  b.state = "done";
  b.updates = 12;
  b.best_plan = "best-0123456789ab";
  b.best_bits = 1.99;
  b.best_perplexity = 12.5;
  for (const RunInfo& r : {a, b, c}) ASSERT_TRUE(runs.PutRunInfo(r).ok());
  auto got = runs.GetRunInfo(b.run_id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->state, "done");
  EXPECT_EQ(got->updates, 12);
  EXPECT_EQ(got->best_plan, "best-0123456789ab");
  EXPECT_DOUBLE_EQ(got->best_perplexity, 12.5);

  auto all = runs.ListRuns();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].run_id, c.run_id);
  EXPECT_EQ((*all)[2].run_id, a.run_id);
  EXPECT_EQ(*runs.LatestRun("m-1234-"), b.run_id);
  EXPECT_THAT(runs.LatestRun("nothing-").status(),
              StatusIs(absl::StatusCode::kNotFound, "nothing-"));
  EXPECT_THAT(runs.GetRunInfo("absent").status(), StatusIs(absl::StatusCode::kNotFound, "absent"));
  EXPECT_THAT(runs.GetRunInfo("../x").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "../x"));
}

TEST(RunRepositoryTest, BadRunInfoIsDataLossNamingTheRun) {
  FakeArtifactStore store;
  store.SetRaw("runs/r1/run.json", "{not json");
  store.SetRaw("runs/r2/run.json", R"({"format":"windquant.run.v1","run_id":"r9","created":"x"})");
  RunRepository runs(&store);
  EXPECT_THAT(runs.GetRunInfo("r1").status(), StatusIs(absl::StatusCode::kDataLoss, "run 'r1'"));
  EXPECT_THAT(runs.GetRunInfo("r2").status(), StatusIs(absl::StatusCode::kDataLoss, "run_id"));
}

TEST(RunRepositoryTest, PlansAndCheckpointsLiveUnderTheRun) {
  FakeArtifactStore store;
  RunRepository runs(&store);
  ASSERT_TRUE(runs.Plans("r")
                  .Push("best-aaa", {{"plan.json", "{}"}},
                        {{"created", "2025-01-01T00:00:01Z"}, {"perplexity", "9"}})
                  .ok());
  ASSERT_TRUE(runs.Plans("r")
                  .Push("final", {{"plan.json", "{}"}, {"quantized/a.bin", "xy"}},
                        {{"created", "2025-01-01T00:00:02Z"}})
                  .ok());
  EXPECT_TRUE(store.Objects().count("runs/r/plans/final/quantized/a.bin"));
  auto plans = runs.ListPlans("r");
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), 2u);
  EXPECT_EQ((*plans)[0].plan_id, "final");  // newest first
  EXPECT_EQ((*plans)[0].size_bytes, 4);
  EXPECT_EQ((*plans)[1].metadata.at("perplexity"), "9");
  // Root-level plans are another collection.
  EXPECT_THAT(*PlanRepository(&store).ListPlans(), ElementsAre());

  EXPECT_THAT(runs.LatestCheckpoint("r").status(), StatusIs(absl::StatusCode::kNotFound, "r"));
  const absl::Time t0 = absl::FromUnixMillis(1700000000000);
  const std::string c2 = RunRepository::CheckpointId(2, t0);
  const std::string c10 = RunRepository::CheckpointId(10, t0 - absl::Hours(1));
  const std::string c10b = RunRepository::CheckpointId(10, t0);
  EXPECT_EQ(c2, "u00000002-1700000000000");
  for (const std::string& id : {c10, c2, c10b}) {
    ASSERT_TRUE(runs.Checkpoints("r").Push(id, {{"run.ckpt", id}}).ok());
  }
  EXPECT_EQ(*runs.LatestCheckpoint("r"), c10b) << "update first, then time";
  ASSERT_TRUE(runs.PruneCheckpoints("r", 2).ok());
  EXPECT_THAT(*runs.Checkpoints("r").ListPlans(), ElementsAre(c10, c10b));
  for (const auto& [key, bytes] : store.Objects()) {
    EXPECT_THAT(key, ::testing::Not(HasSubstr(c2))) << "pruned checkpoint objects are deleted";
  }
}

TEST(RunListingTest, RunsNewestFirstWithTheirPlansThenPlansOutsideRuns) {
  FakeArtifactStore store;
  RunRepository runs(&store);
  RunInfo old_run = Info("m-1-20250101T000000Z", "2025-01-01T00:00:00Z");
  RunInfo new_run = Info("m-1-20250102T000000Z", "2025-01-02T00:00:00Z");
  new_run.state = "done";
  new_run.updates = 7;
  for (const RunInfo& r : {old_run, new_run}) ASSERT_TRUE(runs.PutRunInfo(r).ok());
  ASSERT_TRUE(runs.Plans(new_run.run_id)
                  .Push("best-aaa", {{"plan.json", "{}"}},
                        {{"created", "2025-01-02T00:00:01Z"},
                         {"effective_bits", "1.990000"},
                         {"perplexity", "12.5"},
                         {"perplexity_on", "evaluation slice"},
                         {"source", "rl"}})
                  .ok());
  ASSERT_TRUE(runs.Plans(new_run.run_id)
                  .Push("final", {{"plan.json", "{}"}, {"quantized/q.bin", "xyz"}},
                        {{"created", "2025-01-02T00:00:02Z"}, {"exported_perplexity", "12.7"}})
                  .ok());
  ASSERT_TRUE(PlanRepository(&store).Push("loose", {{"plan.json", "{}"}}).ok());
  absl::StatusOr<std::string> text = FormatRunListing(store);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text,
            "run m-1-20250102T000000Z  done  model stories260k  target 2 bits  7 updates  "
            "created 2025-01-02T00:00:00Z\n"
            "  m-1-20250102T000000Z/final  bits -  ppl - (?)  exported ppl 12.7  -  5 bytes  "
            "2025-01-02T00:00:02Z\n"
            "  m-1-20250102T000000Z/best-aaa  bits 1.990000  ppl 12.5 (evaluation slice)  rl  "
            "2 bytes  2025-01-02T00:00:01Z\n"
            "run m-1-20250101T000000Z  running  model stories260k  target 2 bits  0 updates  "
            "created 2025-01-01T00:00:00Z\n"
            "plans outside runs:\n"
            "loose\n");
  // A run.json that cannot be read names its run.
  store.SetRaw("runs/bad/run.json", "{");
  EXPECT_THAT(FormatRunListing(store).status(), StatusIs(absl::StatusCode::kDataLoss, "run 'bad'"));
}

TEST(RunRepositoryTest, FormatTimeIsUtcRfc3339) {
  EXPECT_EQ(RunRepository::FormatTime(absl::FromUnixSeconds(1700000000)),
            "2023-11-14T22:13:20.000Z");
}

}  // namespace
}  // namespace windquant::store
