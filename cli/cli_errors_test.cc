// Bad input to the real `windquant` binary (a child process): each case
// asserts the exit code, the one-line message naming the culprit (flag, key
// and line, file) and that nothing was left behind. No model is needed: every
// case is refused before one would be loaded.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/base/files.h"
#include "common/testing/shell.h"

namespace windquant::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using Result = testing::CommandOutput;

class CliErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("WQ_BINARY_DIR");
    ASSERT_NE(bin, nullptr) << "WQ_BINARY_DIR (set by ctest)";
    windquant_ = std::string(bin) + "/cli/windquant";
    ASSERT_TRUE(fs::exists(windquant_)) << windquant_;
    dir_ = ::testing::TempDir() + "/wq_cli_errors_test";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_TRUE(base::WriteFileAtomic(dir_ + "/run.yaml",
                                      "model: {dir: m}\ncalibration: {text: c.txt}\n"
                                      "evaluation: {text: e.txt}\n")
                    .ok());
  }
  // Runs windquant with `args` (timeout 60 s: a FIFO must not hang it).
  Result Run(const std::string& args) { return testing::RunInDir(dir_, windquant_ + " " + args); }
  // Exit code 1 and exactly one line naming `culprit`.
  void ExpectRefused(const std::string& args, const std::string& culprit) {
    const Result r = Run(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(culprit)) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  }

  std::string windquant_;
  std::string dir_;
};

// Not an error: --version names the commit the binary was built from (report.json
// records the same), the checkout's HEAD when built from it.
TEST_F(CliErrorsTest, VersionNamesTheCommitItWasBuiltFrom) {
  const Result r = Run("--version");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::MatchesRegex("windquant ([0-9a-f]{40}(-dirty)?|unknown)\n"));
  const char* src = std::getenv("WQ_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  const Result head = testing::RunInDir(dir_, "git -C " + std::string(src) + " rev-parse HEAD");
  if (head.exit_code == 0) {
    EXPECT_THAT(r.out, HasSubstr(head.out.substr(0, 40)));
  }
}

// error-case: cli.bits-non-finite
TEST_F(CliErrorsTest, NonFiniteBitsAreRefused) {
  for (const char* v : {"inf", "nan", "-inf"}) {
    ExpectRefused(std::string("baseline --config run.yaml --method greedy --bits ") + v,
                  std::string("--bits: must be a finite number, got '") + v + "'");
  }
}

// error-case: cli.bits-out-of-range
TEST_F(CliErrorsTest, BitsOutsideTheConfigRangeAreRefused) {
  ExpectRefused("baseline --config run.yaml --method greedy --bits 100",
                "--bits: must be in [1, 16], got 100");
  ExpectRefused("baseline --config run.yaml --method lagrange --bits 0.5",
                "--bits: must be in [1, 16], got 0.5");
}

// error-case: cli.rounds
TEST_F(CliErrorsTest, MeasuredProxyRoundsBelowOneAreRefused) {
  for (const char* v : {"0", "-3"}) {
    ExpectRefused(
        std::string("baseline --config run.yaml --method measured --bits 2 --rounds ") + v,
        std::string("--rounds: must be >= 1, got ") + v);
  }
}

// error-case: cli.max-ppl-increase
TEST_F(CliErrorsTest, QualityTargetOutsideItsRangeIsRefused) {
  for (const char* v : {"0", "-0.02", "101"}) {
    ExpectRefused(std::string("quantize --config run.yaml --max-ppl-increase ") + v,
                  "--max-ppl-increase: must be in (0, 100] (a relative perplexity increase: "
                  "0.02 = 2 %)");
  }
  ExpectRefused("quantize --config run.yaml --max-ppl-increase 2%",
                "--max-ppl-increase: expected a number, got '2%'");
  EXPECT_FALSE(fs::exists(dir_ + "/out"));
}

// error-case: cli.flag-twice
TEST_F(CliErrorsTest, FlagGivenTwiceIsRefused) {
  ExpectRefused("baseline --config run.yaml --config other.yaml --method greedy --bits 2",
                "--config: given more than once");
}

// error-case: cli.flag-without-value
TEST_F(CliErrorsTest, ValueFlagWithoutValueIsRefused) {
  ExpectRefused("export --config run.yaml --plan p.bin --out", "--out: expected a value");
  ExpectRefused("eval --model m --text", "--text: expected a value");
}

// error-case: cli.unknown-flag
TEST_F(CliErrorsTest, UnknownFlagIsRefused) {
  ExpectRefused("baseline --config run.yaml --method greedy --bitz 2", "unknown flag --bitz");
}

// error-case: cli.config-duplicate-key
TEST_F(CliErrorsTest, ConfigWithADuplicateKeyIsRefused) {
  ASSERT_TRUE(base::WriteFileAtomic(dir_ + "/dup.yaml",
                                    "model: {dir: m}\ncalibration: {text: c.txt}\n"
                                    "evaluation: {text: e.txt}\nquant:\n  chunk_size: 64\n"
                                    "  chunk_size: 128\n")
                  .ok());
  ExpectRefused("baseline --config " + dir_ + "/dup.yaml --method greedy --bits 2",
                "dup.yaml: duplicate key quant.chunk_size at line 6");
}

// error-case: cli.set-empty-value
TEST_F(CliErrorsTest, SetWithAnEmptyValueIsRefused) {
  ExpectRefused("baseline --config " + dir_ + "/run.yaml --method greedy --bits 2 " +
                    "--set quant.chunk_size=",
                "--set quant.chunk_size=: empty value");
}

// error-case: cli.fifo-inputs
TEST_F(CliErrorsTest, FifoInputsAreRefusedWithoutHanging) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  ExpectRefused("baseline --config " + fifo + " --method greedy --bits 2",
                fifo + ": is a FIFO, not a regular file");
  ExpectRefused("eval --model " + dir_ + " --text " + fifo,
                fifo + ": is a FIFO, not a regular file");
}

// error-case: cli.model-symlink-loop
TEST_F(CliErrorsTest, SymlinkLoopInTheModelFolderIsAnErrorNotACrash) {
  const std::string model = dir_ + "/model";
  fs::create_directories(model);
  for (const char* f : {"config.json", "tokenizer.json", "model.safetensors"}) {
    ASSERT_EQ(::symlink(f, (model + "/" + f).c_str()), 0);
  }
  ASSERT_TRUE(base::WriteFileAtomic(dir_ + "/text.txt", "some text\n").ok());
  ExpectRefused("eval --model " + model + " --text " + dir_ + "/text.txt",
                model + "/tokenizer.json: symlink loop");  // the first file eval opens
}

// error-case: cli.export-existing-folder
TEST_F(CliErrorsTest, ExportIntoAnExistingFolderIsRefusedAndTheFolderIsUntouched) {
  const std::string out = dir_ + "/out";
  ASSERT_TRUE(base::WriteFileAtomic(out + "/other-plan.txt", "mine").ok());
  ExpectRefused("export --config run.yaml --plan p.bin --out " + out,
                out + ": exists and is not empty (replace it whole with --force)");
  EXPECT_EQ(base::ReadFile(out + "/other-plan.txt").value_or(""), "mine");
  EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 1);
}

// error-case: cli.export-format
TEST_F(CliErrorsTest, ExportOfAnUnknownFormatIsRefused) {
  ExpectRefused("export --config run.yaml --plan p.bin --out out --format onnx",
                "--format: 'onnx', must be safetensors or gguf");
  EXPECT_FALSE(fs::exists(dir_ + "/out"));
  ExpectRefused("export --config run.yaml --plan p.bin --out out --format gguf --fake-quant-only",
                "--fake-quant-only: only with --format safetensors");
}

// error-case: cli.eval-gguf-file
TEST_F(CliErrorsTest, EvalOfAFileThatIsNotAWholeGgufIsRefused) {
  ASSERT_TRUE(base::WriteFileAtomic(dir_ + "/t.txt", "some text\n").ok());
  ASSERT_TRUE(base::WriteFileAtomic(dir_ + "/text.gguf", "not a model\n").ok());
  ExpectRefused("eval --gguf " + dir_ + "/text.gguf --text t.txt",
                dir_ + "/text.gguf: not a GGUF file");
  // Magic and version, then the file ends inside the tensor count.
  ASSERT_TRUE(
      base::WriteFileAtomic(dir_ + "/cut.gguf", std::string("GGUF\x03\x00\x00\x00\x01\x00", 10))
          .ok());
  ExpectRefused("eval --gguf " + dir_ + "/cut.gguf --text t.txt",
                dir_ + "/cut.gguf: truncated GGUF file (tensor count at byte 8");
  ExpectRefused("eval --gguf " + dir_ + "/none.gguf --text t.txt",
                dir_ + "/none.gguf: cannot open");
  ExpectRefused("eval --gguf " + dir_ + "/cut.gguf --model m --text t.txt",
                "--gguf FILE: not with --model, --plan or --quantized");
}

// error-case: cli.plans-push-empty
TEST_F(CliErrorsTest, PushOfAnEmptyFolderIsRefusedAndCreatesNoPlan) {
  fs::create_directories(dir_ + "/empty");
  const std::string store = dir_ + "/store";
  ExpectRefused("plans push --store " + store + " --plan p1 --dir " + dir_ + "/empty",
                dir_ + "/empty: no files to push");
  EXPECT_FALSE(fs::exists(store + "/plans/p1"));
}

// error-case: cli.plans-pull-existing-folder
TEST_F(CliErrorsTest, PullIntoAnExistingFolderIsRefusedWithoutForce) {
  const std::string store = dir_ + "/store";
  ASSERT_TRUE(base::WriteFileAtomic(dir_ + "/in/plan.bin", "bytes").ok());
  ASSERT_EQ(Run("plans push --store " + store + " --plan p1 --dir " + dir_ + "/in").exit_code, 0);
  const std::string out = dir_ + "/pulled";
  ASSERT_TRUE(base::WriteFileAtomic(out + "/mine.txt", "mine").ok());
  ExpectRefused("plans pull --store " + store + " --plan p1 --out " + out,
                out + ": exists and is not empty");
  EXPECT_FALSE(fs::exists(out + "/plan.bin"));
  const Result forced = Run("plans pull --store " + store + " --plan p1 --out " + out + " --force");
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(base::ReadFile(out + "/plan.bin").value_or(""), "bytes");
  EXPECT_FALSE(fs::exists(out + "/mine.txt"));  // replaced whole
}

}  // namespace
}  // namespace windquant::cli
