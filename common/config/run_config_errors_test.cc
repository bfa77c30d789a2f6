// Run config inputs that used to pass silently: a key given twice, an empty
// --set value, non-finite numbers, a FIFO or a symlink loop as the file.
// Each case asserts the one-line message naming the file, key and line.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/base/files.h"
#include "common/config/run_config.h"
#include "common/testing/scoped_test_dir.h"
#include "gtest/gtest.h"

namespace windquant::config {
namespace {

constexpr char kMinimal[] =
    "model: {dir: m}\ncalibration: {text: c.txt}\nevaluation: {selection: {text: s.txt}, heldout: "
    "{text: h.txt}}\n";

std::string ErrorOf(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  auto c = ParseRunConfig(yaml, "run.yaml", overrides);
  return c.ok() ? "" : std::string(c.status().message());
}

// error-case: config.duplicate-key
TEST(RunConfigErrorsTest, KeyGivenTwiceIsRefusedNamingKeyAndLine) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "quant:\n  chunk_size: 64\n  chunk_size: 128\n"),
            "run.yaml: duplicate key quant.chunk_size at line 6");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "seed: 1\nmodel: {dir: n}\n"),
            "run.yaml: duplicate key model at line 5");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "quant: {chunk_size: 64, chunk_size: 64}\n"),
            "run.yaml: duplicate key quant.chunk_size at line 4");
}

// error-case: config.quality-target
TEST(RunConfigErrorsTest, QualityTargetRefusesItsBadEpsilonAndABudgetThatIsNotACap) {
  EXPECT_EQ(ErrorOf(kMinimal, {"lagrange.prices=target", "lagrange.epsilon=0.02"}), "");
  EXPECT_EQ(ErrorOf(kMinimal, {"lagrange.prices=target", "lagrange.epsilon=100"}), "");
  const std::string range =
      "run.yaml: lagrange.epsilon: the maximum relative perplexity increase must be in (0, 100] "
      "(0.02 = 2 %) with prices: target";
  EXPECT_EQ(ErrorOf(kMinimal, {"lagrange.prices=target", "lagrange.epsilon=0"}), range);
  EXPECT_EQ(ErrorOf(kMinimal, {"lagrange.prices=target", "lagrange.epsilon=-0.1"}), range);
  EXPECT_EQ(ErrorOf(kMinimal, {"lagrange.prices=target", "lagrange.epsilon=101"}), range);
  // epsilon 0 stays valid for the other prices (the budget price's tolerated overrun).
  EXPECT_EQ(ErrorOf(kMinimal, {"lagrange.epsilon=0"}), "");
  for (const char* mode : {"soft", "repair"}) {
    EXPECT_EQ(ErrorOf(kMinimal, {"lagrange.prices=target", "lagrange.epsilon=0.02",
                                 std::string("env.budget_mode=") + mode}),
              "run.yaml: env.budget_mode: must be hard with lagrange.prices: target (the target "
              "bits are a cap)");
  }
  EXPECT_EQ(ErrorOf(kMinimal, {"lagrange.prices=quality-target"}),
            "run.yaml: lagrange.prices: must be quality, budget or target");
}

// error-case: config.hidden-states
TEST(RunConfigErrorsTest, HiddenStatesAreGrpcOrNccl) {
  EXPECT_EQ(ErrorOf(kMinimal, {"service.hidden_states=grpc"}), "");
  EXPECT_EQ(ErrorOf(kMinimal, {"service.hidden_states=nccl"}), "");  // the machine: at start
  EXPECT_EQ(ErrorOf(kMinimal, {"service.hidden_states=shm"}),
            "run.yaml: service.hidden_states: 'shm', must be grpc or nccl");
}

// error-case: config.selection-windows
TEST(RunConfigErrorsTest, SelectionWindowsMustBeNonNegativeAndFitTheirRange) {
  const std::string ranged = "evaluation.selection.tokens=[1000,2016]";  // 1016 = 4 x 254 + 0
  EXPECT_EQ(ErrorOf(kMinimal, {ranged, "evaluation.context=255", "evaluation.selection.windows=4"}),
            "");
  EXPECT_EQ(ErrorOf(kMinimal, {ranged, "evaluation.context=255", "evaluation.selection.windows=5"}),
            "run.yaml: evaluation.selection.windows: 5 windows of 254 tokens (evaluation.context "
            "- 1) do not fit in evaluation.selection.tokens [1000, 2016)");
  EXPECT_EQ(ErrorOf(kMinimal, {"evaluation.selection.windows=-1"}),
            "run.yaml: evaluation.selection.windows: must be >= 0");
  // To the end of the text (end 0): checked when the text is read (base::ReadWindows).
  EXPECT_EQ(ErrorOf(kMinimal, {"evaluation.selection.windows=100000"}), "");
}

// error-case: config.set-empty-value
TEST(RunConfigErrorsTest, SetWithAnEmptyValueIsRefused) {
  EXPECT_EQ(ErrorOf(kMinimal, {"quant.chunk_size="}), "--set quant.chunk_size=: empty value");
  EXPECT_EQ(ErrorOf(kMinimal, {"quant.chunk_size=  "}), "--set quant.chunk_size=  : empty value");
  EXPECT_EQ(ErrorOf(kMinimal, {"quant.chunk_size=64"}), "");
}

// error-case: config.non-finite
TEST(RunConfigErrorsTest, NonFiniteNumbersAreRefusedNamingTheKey) {
  EXPECT_EQ(ErrorOf(kMinimal, {"ppo.max_grad_norm=.nan"}),
            "run.yaml: ppo.max_grad_norm: must be a finite number, got '.nan'");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "curriculum: {target_bits: [3.0, .inf]}\n"),
            "run.yaml: curriculum.target_bits[1]: must be a finite number, got '.inf'");
  EXPECT_EQ(ErrorOf(kMinimal, {"lagrange.lambda_init=-.Inf"}),
            "run.yaml: lagrange.lambda_init: must be a finite number, got '-.Inf'");
}

// The ppo keys are checked here, once (rl::PpoLearner takes them as they are).
TEST(RunConfigErrorsTest, PpoKeysAreValidatedNamingTheKey) {
  EXPECT_EQ(ErrorOf(kMinimal, {"ppo.clip_ratio=1.5"}),
            "run.yaml: ppo.clip_ratio: must be in (0, 1)");
  EXPECT_EQ(ErrorOf(kMinimal, {"ppo.minibatch_size=0"}),
            "run.yaml: ppo.minibatch_size: must be > 0");
  EXPECT_EQ(ErrorOf(kMinimal, {"ppo.max_policy_lag=-1"}),
            "run.yaml: ppo.max_policy_lag: must be >= 0");
  EXPECT_EQ(ErrorOf(kMinimal, {"ppo.hidden=[]"}),
            "run.yaml: ppo.hidden: must list at least one layer size");
}

// error-case: config.file-fifo
TEST(RunConfigErrorsTest, FifoAsConfigFileIsRefusedWithoutBlocking) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-run-config-errors");
  const std::string path = test_dir.path() + "/run.yaml";
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  auto c = LoadRunConfig(path, {});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), path + ": is a FIFO, not a regular file");
}

// error-case: config.file-symlink-loop
TEST(RunConfigErrorsTest, SymlinkLoopAsConfigFileIsNamed) {
  const ::windquant::testing::ScopedTestDir test_dir("wq-run-config-errors");
  const std::string path = test_dir.path() + "/run.yaml";
  ASSERT_EQ(::symlink(path.c_str(), path.c_str()), 0);
  auto c = LoadRunConfig(path, {});
  EXPECT_EQ(c.status().message(), path + ": symlink loop");
}

}  // namespace
}  // namespace windquant::config
