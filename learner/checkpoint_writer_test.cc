// CheckpointWriter on a full disk (RLIMIT_FSIZE, testing/file_size_limit.h):
// the last good checkpoint stays, the failure is logged, counted and the next
// write is due at once.
#include "learner/checkpoint_writer.h"

#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/base/split_mix64.h"
#include "common/metrics/registry.h"
#include "common/testing/file_size_limit.h"
#include "common/testing/scoped_test_dir.h"

namespace windquant::learner {
namespace {

using ::testing::HasSubstr;

// A checkpoint of `update` whose learner state is `bytes` seeded bytes.
rl::RunCheckpoint MakeCheckpoint(int64_t update, size_t bytes) {
  rl::RunCheckpoint c;
  c.fingerprint = "fp";
  c.update = update;
  c.learner_state.resize(bytes);
  uint64_t x = static_cast<uint64_t>(update);
  for (char& ch : c.learner_state) ch = static_cast<char>((x = base::SplitMix64(x)) & 0xff);
  return c;
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  return out;
}

TEST(CheckpointWriterTest, AFailedWriteKeepsTheLastGoodCheckpointAndSaysSo) {
  const ::windquant::testing::ScopedTestDir temp("wq-checkpoint-writer");
  const std::string dir = temp.path() + "/checkpoint";
  std::vector<std::string> log;
  metrics::Registry registry;
  CheckpointWriter writer(dir, /*every_updates=*/5,
                          [&](const std::string& line) { log.push_back(line); });
  ASSERT_TRUE(writer.Register(registry).ok());
  writer.Restored(nullptr);
  EXPECT_THAT(registry.TextExposition(),
              HasSubstr("\nwindquant_learner_checkpoint_last_good_update -1\n"));
  ASSERT_TRUE(writer.Write(MakeCheckpoint(5, 1 << 16)));
  EXPECT_EQ(log.back(), "learner: checkpoint: update 5 written to " + dir);
  EXPECT_FALSE(writer.Due(6));
  {  // The disk is full: 4 KiB per file.
    ::windquant::testing::ScopedFileSizeLimit full(4096);
    ASSERT_TRUE(full.ok());
    EXPECT_FALSE(writer.Write(MakeCheckpoint(10, 1 << 16)));
  }
  EXPECT_EQ(log.back(), "learner: checkpoint: update 10 NOT written to " + dir + ": " +
                            rl::RunCheckpointPath(dir) +
                            ": write failed: File too large; the last good checkpoint is update 5");
  EXPECT_EQ(writer.failures(), 1);
  EXPECT_EQ(writer.last_good_update(), 5);
  const std::string text = registry.TextExposition();
  EXPECT_THAT(text, HasSubstr("\nwindquant_learner_checkpoint_failures_total 1\n"));
  EXPECT_THAT(text, HasSubstr("\nwindquant_learner_checkpoint_last_good_update 5\n"));
  // The file is update 5's, whole; no temporary is left beside it.
  absl::StatusOr<rl::RunCheckpoint> kept = rl::ReadRunCheckpoint(dir, "fp");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->update, 5);
  EXPECT_EQ(kept->learner_state, MakeCheckpoint(5, 1 << 16).learner_state);
  EXPECT_EQ(Files(dir), std::vector<std::string>{"run.ckpt"});
  // Due at the next update, not at the next multiple of 5; written once there is room.
  EXPECT_TRUE(writer.Due(11));
  ASSERT_TRUE(writer.Write(MakeCheckpoint(11, 1 << 16)));
  EXPECT_FALSE(writer.Due(12));
  EXPECT_EQ(writer.last_good_update(), 11);
  EXPECT_THAT(registry.TextExposition(),
              HasSubstr("\nwindquant_learner_checkpoint_last_good_update 11\n"));
  EXPECT_EQ(rl::ReadRunCheckpoint(dir, "fp")->update, 11);
}

TEST(CheckpointWriterTest, TheRestoredCheckpointIsTheLastGoodOne) {
  const ::windquant::testing::ScopedTestDir temp("wq-checkpoint-writer");
  metrics::Registry registry;
  CheckpointWriter writer(temp.path(), 1, nullptr);
  ASSERT_TRUE(writer.Register(registry).ok());
  const rl::RunCheckpoint restored = MakeCheckpoint(7, 16);
  writer.Restored(&restored);
  EXPECT_EQ(writer.last_good_update(), 7);
  EXPECT_THAT(registry.TextExposition(),
              HasSubstr("\nwindquant_learner_checkpoint_last_good_update 7\n"));
}

}  // namespace
}  // namespace windquant::learner
