// A device or thread count the machine does not have, asked of the real binaries
// (child processes): `windquant quantize` and the three services refuse it with one
// line naming the key before any work (the model folder does not even exist, and
// no output folder appears).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/config/this_machine.h"
#include "common/testing/shell.h"

namespace windquant::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class MachineCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("WQ_BINARY_DIR");
    ASSERT_NE(bin, nullptr) << "WQ_BINARY_DIR (set by ctest)";
    bin_ = bin;
    dir_ = ::testing::TempDir() + "/wq_machine_check_test";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_TRUE(
        base::WriteFileAtomic(dir_ + "/run.yaml",
                              "model: {dir: no-such-model}\ncalibration: {text: c.txt}\n"
                              "evaluation: {selection: {text: s.txt}, heldout: {text: h.txt}}\n"
                              "output: {dir: out}\n")
            .ok());
  }
  // Runs `binary args` in dir_; expects exit `rc` (0: 1 or 2) and one line naming `culprit`.
  void ExpectRefused(const std::string& binary, const std::string& args, int rc,
                     const std::string& culprit) {
    ASSERT_TRUE(fs::exists(bin_ + "/" + binary)) << binary;
    const testing::CommandOutput r = testing::RunInDir(dir_, bin_ + "/" + binary + " " + args);
    const int got = r.exit_code;
    const std::string& err = r.err;
    if (rc > 0) {
      EXPECT_EQ(got, rc) << binary << " " << args << "\n" << err;
    } else {  // the services' own codes for a refused start (1 or 2)
      EXPECT_TRUE(got == 1 || got == 2) << binary << " " << args << ": " << got << "\n" << err;
    }
    EXPECT_THAT(err, HasSubstr(culprit)) << binary << " " << args;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_FALSE(fs::exists(dir_ + "/out")) << "work started: " << binary;
  }

  std::string bin_, dir_;
};

// error-case: cli.machine-resources
TEST_F(MachineCheckTest, MissingDeviceOrTooManyThreadsIsOneLineBeforeAnyWork) {
  const config::MachineResources machine = config::ThisMachine();
  const std::string threads = absl::StrCat("--set model.threads=", machine.cores + 1);
  const std::string threads_error =
      absl::StrCat("model.threads: ", machine.cores + 1, ", more than the ", machine.cores);
  const std::string cuda_error = "model.device: cuda, but this machine has no CUDA device";
  ExpectRefused("cli/windquant", "quantize --config run.yaml " + threads, 1, threads_error);
  for (const std::string service : {"learner", "evaluator", "actor"}) {
    ExpectRefused(absl::StrCat("services/windquant-", service), "--config run.yaml " + threads, 0,
                  threads_error);
  }
  // Thread flags: the inputs and the output folder do not exist, so only the check
  // can be the culprit, and it comes first.
  const std::string flag = absl::StrCat("--threads ", machine.cores + 1);
  const std::string flag_error =
      absl::StrCat("--threads: ", machine.cores + 1, ", more than the ", machine.cores, " cores");
  ExpectRefused("cli/windquant", "pretrain --text no-such.txt --out out " + flag, 1, flag_error);
  ExpectRefused("cli/windquant", "eval --model no-such-model --text no-such.txt " + flag, 1,
                flag_error);
  // A device index no machine has, and a device name that is none, on any machine.
  ExpectRefused("cli/windquant", "quantize --config run.yaml --set model.device=cuda:99", 1,
                "model.device: cuda:99, but this machine has");
  ExpectRefused("cli/windquant", "eval --model no-such-model --text no-such.txt --device cuda:99",
                1, "--device: cuda:99, but this machine has");
  ExpectRefused("cli/windquant", "eval --model no-such-model --text no-such.txt --device tpu", 1,
                "--device: tpu, must be cpu, cuda or cuda:N");
  // --dtype is checked as --device is, before the model is opened, and so is the key.
  ExpectRefused("cli/windquant", "eval --model no-such-model --text no-such.txt --dtype fp16", 1,
                "--dtype: fp16, must be float32 or bfloat16");
  ExpectRefused("cli/windquant", "quantize --config run.yaml --set model.compute_dtype=fp16", 1,
                "model.compute_dtype: must be float32 or bfloat16, got 'fp16'");
  if (machine.cuda_devices > 0) {
    GTEST_SKIP() << "this machine has a CUDA device: model.device=cuda is legitimate";
  }
  ExpectRefused("cli/windquant", "quantize --config run.yaml --set model.device=cuda", 1,
                cuda_error);
  ExpectRefused("cli/windquant",
                "eval --config run.yaml --set model.device=cuda --plan no-such-plan.json", 1,
                cuda_error);
  for (const std::string service : {"learner", "evaluator", "actor"}) {
    ExpectRefused(absl::StrCat("services/windquant-", service),
                  "--config run.yaml --set model.device=cuda", 0, cuda_error);
  }
}

}  // namespace
}  // namespace windquant::cli
