#include "common/rl/run_checkpoint.h"

#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/base/files.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/status_matchers.h"
#include "common/testing/synthetic_table.h"
#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

using ::windquant::testing::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

TEST(RunCheckpointTest, RoundTrip) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-run-checkpoint");
  RunCheckpoint c;
  c.fingerprint = "abc123";
  c.update = 7;
  c.stage = 1;
  c.updates_in_stage = 2;
  c.warm_started_stage = 1;
  c.lambda = 3.25;
  c.rng_seed = 42;
  c.next_episode_id = 112;
  c.learner_state = std::string("\0\1\2binary", 9);
  c.best.actions = {0, 4, 6};
  c.best.evaluation.eval_ppl = 5.5;
  c.best.evaluation.effective_bits = 1.99;
  c.best.source = "rl";
  c.best_stage.evaluation.eval_ppl = std::numeric_limits<double>::infinity();
  c.curve.push_back(UpdateRecord{7, 1, 2.5, -0.5, 6.0, 2.4, 5.5, 1.99, 3.25});
  c.stages.push_back({0, 3.0, 5, "max_updates"});
  const std::string dir = test_dir.path() + "/rt";
  ASSERT_TRUE(WriteRunCheckpoint(dir, c).ok());
  auto r = ReadRunCheckpoint(dir, "abc123");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->update, 7);
  EXPECT_EQ(r->stage, 1);
  EXPECT_EQ(r->updates_in_stage, 2);
  EXPECT_EQ(r->warm_started_stage, 1);
  EXPECT_DOUBLE_EQ(r->lambda, 3.25);
  EXPECT_EQ(r->rng_seed, 42u);
  EXPECT_EQ(r->next_episode_id, 112);
  EXPECT_EQ(r->learner_state, c.learner_state);
  EXPECT_EQ(r->best.actions, c.best.actions);
  EXPECT_DOUBLE_EQ(r->best.evaluation.eval_ppl, 5.5);
  EXPECT_TRUE(std::isinf(r->best_stage.evaluation.eval_ppl));
  ASSERT_EQ(r->curve.size(), 1u);
  EXPECT_DOUBLE_EQ(r->curve[0].mean_ppl, 6.0);
  ASSERT_EQ(r->stages.size(), 1u);
  EXPECT_EQ(r->stages[0].reason, "max_updates");
}

TEST(RunCheckpointTest, RefusesAnotherRunsCheckpoint) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-run-checkpoint");
  RunCheckpoint c;
  c.fingerprint = "aaaaaaaaaaaaaaaa";
  const std::string dir = test_dir.path() + "/fp";
  ASSERT_TRUE(WriteRunCheckpoint(dir, c).ok());
  auto r = ReadRunCheckpoint(dir, "bbbbbbbbbbbbbbbb");
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition, "different run"));
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition, RunCheckpointPath(dir)));
  EXPECT_THAT(ReadRunCheckpoint(test_dir.path() + "/none", "x"),
              StatusIs(absl::StatusCode::kNotFound, ": no checkpoint"));
  // Corruption is detected.
  auto bytes = *base::ReadFile(RunCheckpointPath(dir));
  bytes.back() ^= 1;
  bytes += "x";
  ASSERT_TRUE(base::WriteFileAtomic(RunCheckpointPath(dir), bytes).ok());
  EXPECT_THAT(ReadRunCheckpoint(dir, c.fingerprint),
              StatusIs(absl::StatusCode::kDataLoss, RunCheckpointPath(dir)));
  ASSERT_TRUE(base::WriteFileAtomic(RunCheckpointPath(dir), "junk").ok());
  EXPECT_THAT(ReadRunCheckpoint(dir, c.fingerprint),
              StatusIs(absl::StatusCode::kDataLoss,
                       RunCheckpointPath(dir) + ": not a windquant run checkpoint"));
}

// The quality-target mode's epsilon is part of the checkpoint: a resume with
// another one (or across modes) is refused in one line naming lagrange.epsilon
// and both values; a fixed-budget checkpoint has no such key.
// error-case: learner.resume-other-quality-target
TEST(RunCheckpointTest, RefusesAResumeWithAnotherQualityTarget) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-run-checkpoint");
  const std::string dir = test_dir.path() + "/eps";
  RunCheckpoint c;
  c.fingerprint = "fp";
  ASSERT_TRUE(WriteRunCheckpoint(dir, c).ok());
  EXPECT_EQ(base::ReadFile(RunCheckpointPath(dir))->find("max_ppl_increase"), std::string::npos);
  EXPECT_THAT(ReadRunCheckpoint(dir, "fp", 0.02),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       RunCheckpointPath(dir) +
                           ": checkpoint is of a fixed-budget run (no lagrange.epsilon target), "
                           "this run is a quality-target run (lagrange.epsilon 0.02)"));
  c.max_ppl_increase = 0.02;
  ASSERT_TRUE(WriteRunCheckpoint(dir, c).ok());
  auto same = ReadRunCheckpoint(dir, "fp", 0.02);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_DOUBLE_EQ(same->max_ppl_increase, 0.02);
  const auto other = ReadRunCheckpoint(dir, "fp", 0.05);
  EXPECT_THAT(other, StatusIs(absl::StatusCode::kFailedPrecondition,
                              "checkpoint is of a quality-target run (lagrange.epsilon 0.02), this "
                              "run is a quality-target run (lagrange.epsilon 0.05)"));
  EXPECT_EQ(std::count(other.status().message().begin(), other.status().message().end(), '\n'), 0);
  EXPECT_THAT(ReadRunCheckpoint(dir, "fp"),
              StatusIs(absl::StatusCode::kFailedPrecondition, "this run is a fixed-budget run"));
  // The quality target is checked before the fingerprint: its message names the key.
  EXPECT_THAT(ReadRunCheckpoint(dir, "other", 0.05),
              StatusIs(absl::StatusCode::kFailedPrecondition, "lagrange.epsilon 0.05"));
}

// A checkpoint whose write fails part-way: the previous one still loads, no
// temporary is left, and the error names the checkpoint's path.
void ExpectOldCheckpointSurvives(const std::string& dir, const absl::Status& failed) {
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find(RunCheckpointPath(dir)), absl::string_view::npos) << failed;
  EXPECT_EQ(std::count(failed.message().begin(), failed.message().end(), '\n'), 0) << failed;
  auto old = ReadRunCheckpoint(dir, "fp");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->update, 1);
  EXPECT_EQ(old->learner_state, "old state");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename(), "run.ckpt") << "left behind: " << entry.path();
  }
}

RunCheckpoint Checkpoint(int64_t update, std::string state) {
  RunCheckpoint c;
  c.fingerprint = "fp";
  c.update = update;
  c.learner_state = std::move(state);
  return c;
}

// The file size limit (RLIMIT_FSIZE, SIGXFSZ ignored: write() fails with EFBIG)
// cuts the new checkpoint off at several places: in its header, in its state.
// error-case: learner.checkpoint-disk-full
TEST(RunCheckpointTest, FailedWriteKeepsThePreviousCheckpoint) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-run-checkpoint");
  const std::string dir = test_dir.path() + "/full";
  ASSERT_TRUE(WriteRunCheckpoint(dir, Checkpoint(1, "old state")).ok());
  const RunCheckpoint next = Checkpoint(2, std::string(1 << 20, 'n'));
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto previous_handler = signal(SIGXFSZ, SIG_IGN);
  for (rlim_t limit : {rlim_t{16}, rlim_t{4096}, rlim_t{512 << 10}}) {
    rlimit small = saved;
    small.rlim_cur = limit;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    const absl::Status st = WriteRunCheckpoint(dir, next);
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
    EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << limit;
    EXPECT_NE(st.message().find("File too large"), absl::string_view::npos) << st;
    ExpectOldCheckpointSurvives(dir, st);
  }
  signal(SIGXFSZ, previous_handler);
  // With room again, the next checkpoint replaces the old one.
  ASSERT_TRUE(WriteRunCheckpoint(dir, next).ok());
  EXPECT_EQ(ReadRunCheckpoint(dir, "fp")->update, 2);
}

// A real full file system (a 64 KiB tmpfs, ENOSPC) where this process may mount
// one (root with CAP_SYS_ADMIN); skipped elsewhere.
TEST(RunCheckpointTest, FullTmpfsKeepsThePreviousCheckpoint) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-run-checkpoint");
  const std::string mount_point = test_dir.path() + "/tmpfs";
  std::filesystem::create_directories(mount_point);
  if (mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=64k") != 0) {
    const std::string why = std::strerror(errno);
    GTEST_SKIP() << "cannot mount a tmpfs here: " << why;
  }
  const std::string dir = mount_point + "/checkpoint";
  ASSERT_TRUE(WriteRunCheckpoint(dir, Checkpoint(1, "old state")).ok());
  const absl::Status st = WriteRunCheckpoint(dir, Checkpoint(2, std::string(1 << 20, 'n')));
  EXPECT_NE(st.message().find("No space left on device"), absl::string_view::npos) << st;
  ExpectOldCheckpointSurvives(dir, st);
  EXPECT_EQ(umount(mount_point.c_str()), 0) << std::strerror(errno);
}

}  // namespace
}  // namespace windquant::rl
