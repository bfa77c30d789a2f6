// Kill-and-resume of a real training process: this binary starts itself as
// a child that trains (synthetic table and evaluator, a checkpoint after
// every update), is killed with SIGKILL once it reports its first
// checkpoint, and is restarted with resume; the resumed run must continue
// from the saved update and end where an uninterrupted run ends.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rl/synthetic_table.h"
#include "common/rl/trainer.h"
#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

constexpr int kUpdates = 10;

// The child's work: train with checkpoints in $WQ_RESUME_CHILD_DIR, printing
// "LOG <line>" for every trainer event and "RESULT <updates> <best ppl>".
TEST(TrainerResumeChild, Run) {
  const char* dir = std::getenv("WQ_RESUME_CHILD_DIR");
  if (dir == nullptr) GTEST_SKIP() << "only runs as the child of TrainerResumeTest";
  const quant::UnitTable t = testing::SyntheticTable(60, 3);
  testing::SyntheticEvaluator ev(&t);
  TrainerOptions o;
  o.config.curriculum.target_bits = {2.0};
  o.config.curriculum.min_updates = kUpdates;
  o.config.curriculum.max_updates = kUpdates;
  o.config.training.episodes_per_update = 8;
  o.config.training.warm_start = "none";
  o.config.training.checkpoint_every_updates = 1;
  o.config.ppo.hidden = {32, 32};
  o.checkpoint_dir = dir;
  o.fingerprint = "synthetic-resume";
  o.resume = std::string(std::getenv("WQ_RESUME_CHILD_RESUME")) == "1";
  o.show_progress = false;
  o.log = [](const std::string& line) {
    std::printf("LOG %s\n", line.c_str());
    std::fflush(stdout);
  };
  auto trainer = Trainer::Create(t, &ev, o);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto r = (*trainer)->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  std::printf("RESULT %lld %.17g\n", static_cast<long long>(r->updates), r->best.evaluation.eval_ppl);
  std::fflush(stdout);
}

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;
};

Child Start(const std::string& dir, bool resume) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    setenv("WQ_RESUME_CHILD_DIR", dir.c_str(), 1);
    setenv("WQ_RESUME_CHILD_RESUME", resume ? "1" : "0", 1);
    execl("/proc/self/exe", "child", "--gtest_filter=TrainerResumeChild.Run", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  c.out = fdopen(fds[0], "r");
  return c;
}

// Reads lines until EOF, or until `stop_at` appears (then returns early).
std::vector<std::string> ReadLines(FILE* f, const std::string& stop_at = "") {
  std::vector<std::string> lines;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f) != nullptr) {
    lines.emplace_back(buf);
    if (!stop_at.empty() && lines.back().find(stop_at) != std::string::npos) break;
  }
  return lines;
}

std::string Find(const std::vector<std::string>& lines, const std::string& prefix) {
  for (const auto& l : lines) {
    if (l.rfind(prefix, 0) == 0) return l;
  }
  return "";
}

int Wait(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(TrainerResumeTest, KilledRunResumesFromItsCheckpoint) {
  const auto base = std::filesystem::temp_directory_path() / ("wq_resume_" + std::to_string(getpid()));
  std::filesystem::remove_all(base);
  const std::string killed_dir = (base / "killed").string(), whole_dir = (base / "whole").string();

  // 1. Start, wait for the first checkpoint, SIGKILL.
  Child first = Start(killed_dir, false);
  auto lines = ReadLines(first.out, "checkpoint: update 1 ");
  ASSERT_FALSE(lines.empty());
  ASSERT_NE(lines.back().find("checkpoint: update 1 "), std::string::npos) << lines.back();
  kill(first.pid, SIGKILL);
  const int status = Wait(first.pid);
  fclose(first.out);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto saved = ReadRunCheckpoint(killed_dir, "synthetic-resume");
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_GE(saved->update, 1);
  ASSERT_LT(saved->update, kUpdates) << "the child finished before it was killed";

  // 2. Resume: continues at the saved update and finishes.
  Child second = Start(killed_dir, true);
  auto resumed = ReadLines(second.out);
  fclose(second.out);
  ASSERT_EQ(WEXITSTATUS(Wait(second.pid)), 0);
  EXPECT_NE(Find(resumed, absl::StrCat("LOG resume: continuing from update ", saved->update, " ")), "");
  const std::string first_update = Find(resumed, "LOG update ");
  EXPECT_EQ(first_update.rfind(absl::StrCat("LOG update ", saved->update + 1, ":"), 0), 0u) << first_update;
  const std::string result = Find(resumed, "RESULT ");
  ASSERT_NE(result, "");
  EXPECT_EQ(result.rfind(absl::StrCat("RESULT ", kUpdates, " "), 0), 0u) << result;

  // 3. The same run uninterrupted ends with the same best plan quality.
  Child whole = Start(whole_dir, false);
  auto whole_lines = ReadLines(whole.out);
  fclose(whole.out);
  ASSERT_EQ(WEXITSTATUS(Wait(whole.pid)), 0);
  EXPECT_EQ(Find(whole_lines, "RESULT "), result);
  std::filesystem::remove_all(base);
}

}  // namespace
}  // namespace windquant::rl
