// Locations that do not exist, asked of the real binaries (child processes): every
// command that opens a model folder or reads an input folder, and every command
// that writes an output (a folder or a file), refuses a missing one with one line
// naming the flag or key and the path, before any work. Only the last folder of an
// output path is created; a missing parent is an error, and nothing is created.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/shell.h"

namespace windquant::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Case {
  std::string binary;   // under WQ_BINARY_DIR
  std::string args;     // run in the test folder
  std::string culprit;  // in the one line of stderr
};

class MissingLocationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("WQ_BINARY_DIR");
    ASSERT_NE(bin, nullptr) << "WQ_BINARY_DIR (set by ctest)";
    bin_ = bin;
    const std::string texts =
        "calibration: {text: c.txt}\n"
        "evaluation: {selection: {text: s.txt}, heldout: {text: h.txt}}\n";
    // missing.yaml names a model folder that is not there; present.yaml an (empty)
    // one that is, so that only the output path can be refused.
    ASSERT_TRUE(base::WriteFileAtomic(dir() + "/missing.yaml", "model: {dir: no-such-model}\n" +
                                                                   texts + "output: {dir: run}\n")
                    .ok());
    ASSERT_TRUE(base::WriteFileAtomic(dir() + "/present.yaml",
                                      "model: {dir: model}\n" + texts + "output: {dir: run}\n")
                    .ok());
    fs::create_directories(dir() + "/model");
    ASSERT_TRUE(base::WriteFileAtomic(dir() + "/file.txt", "not a folder\n").ok());
  }
  const std::string& dir() const { return dir_.path(); }

  // Exit `rc`, nothing on stdout, exactly one line on stderr naming `c.culprit`.
  void ExpectRefused(const Case& c, int rc) {
    const std::string binary = bin_ + "/" + c.binary;
    ASSERT_TRUE(fs::exists(binary)) << binary;
    // 30 s: a service that is not refused would serve until the timeout kills it.
    const testing::CommandOutput r = testing::RunInDir(dir(), binary + " " + c.args, 30);
    const std::string what = c.binary + " " + c.args;
    EXPECT_EQ(r.exit_code, rc) << what << "\n" << r.err;
    EXPECT_EQ(r.out, "") << what;
    EXPECT_THAT(r.err, HasSubstr(c.culprit)) << what;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << "\n" << r.err;
  }
  // Nothing was created by the refused commands.
  void ExpectNothingCreated() {
    for (const char* p : {"no-such-model", "no-parent", "run", "out", "pulled", "t.pb"}) {
      EXPECT_FALSE(fs::exists(dir() + "/" + p)) << p;
    }
  }

  std::string bin_;
  testing::ScopedTestDir dir_{"wq-missing-location"};
};

const char* const kServices[] = {"learner", "evaluator", "actor"};

// error-case: cli.missing-location
TEST_F(MissingLocationTest, MissingModelOrInputFolderIsOneLineNamingTheFlagOrKey) {
  const std::string model = "model.dir: " + dir() + "/no-such-model: no such folder";
  const std::vector<Case> cli = {
      {"cli/windquant", "quantize --config missing.yaml", model},
      {"cli/windquant", "baseline --config missing.yaml --method greedy --bits 2", model},
      {"cli/windquant", "export --config missing.yaml --plan p.bin --out out", model},
      {"cli/windquant", "table build --config missing.yaml --out t.pb", model},
      {"cli/windquant", "eval --config missing.yaml --plan p.bin", model},
      {"cli/windquant", "eval --model no-such-model --text c.txt",
       "--model: no-such-model: no such folder"},
      {"cli/windquant", "eval --model file.txt --text c.txt", "--model: file.txt: not a folder"},
      {"cli/windquant", "eval --quantized no-such-model --text c.txt",
       "--quantized: no-such-model: no such folder"},
      {"cli/windquant", "synth --shape llama3.2-1b --out out --tokenizer no-such-model",
       "--tokenizer: no-such-model: no such folder"},
      {"cli/windquant", "plans push --store store --plan p1 --dir no-such-model",
       "--dir: no-such-model: no such folder"},
  };
  for (const Case& c : cli) ExpectRefused(c, 1);
  // The services: bad config, nothing started (exit 2).
  for (const std::string service : kServices) {
    ExpectRefused({absl::StrCat("services/windquant-", service), "--config missing.yaml",
                   absl::StrCat("windquant-", service, ": ", model)},
                  2);
  }
  ExpectNothingCreated();
  EXPECT_FALSE(fs::exists(dir() + "/store")) << "push created the store";
}

// error-case: cli.missing-output-parent
TEST_F(MissingLocationTest, MissingParentOfAnOutputIsOneLineAndNothingIsCreated) {
  const std::string parent = ": parent folder no-parent does not exist";
  const std::vector<Case> cli = {
      {"cli/windquant", "quantize --config present.yaml --set output.dir=no-parent/run",
       "output.dir: no-parent/run" + parent},
      {"cli/windquant", "baseline --config present.yaml --method greedy --bits 2 --out no-parent/o",
       "--out: no-parent/o" + parent},
      {"cli/windquant", "export --config present.yaml --plan p.bin --out no-parent/o/",
       "--out: no-parent/o/" + parent},
      {"cli/windquant", "table build --config present.yaml --out no-parent/t.pb",
       "--out: no-parent/t.pb" + parent},
      {"cli/windquant", "table rebase-plan --plan p.bin --from a.pb --to b.pb --out no-parent/o",
       "--out: no-parent/o" + parent},
      {"cli/windquant", "pretrain --text c.txt --out no-parent/m", "--out: no-parent/m" + parent},
      {"cli/windquant", "synth --shape llama3.2-1b --out no-parent/m --tokenizer model",
       "--out: no-parent/m" + parent},
      {"cli/windquant", "report --in r.json --out no-parent/r.html",
       "--out: no-parent/r.html" + parent},
      {"cli/windquant", "plans pull --store store --plan p1 --out no-parent/p",
       "--out: no-parent/p" + parent},
      // A parent that is a file is not a folder either.
      {"cli/windquant", "pretrain --text c.txt --out file.txt/m",
       "--out: file.txt/m: parent file.txt is not a folder"},
  };
  for (const Case& c : cli) ExpectRefused(c, 1);
  for (const std::string service : kServices) {
    ExpectRefused({absl::StrCat("services/windquant-", service),
                   "--config present.yaml --set output.dir=no-parent/run",
                   absl::StrCat("windquant-", service, ": output.dir: no-parent/run", parent)},
                  2);
  }
  ExpectNothingCreated();
}

// The control: the last folder of an output path is created when its parent exists.
TEST_F(MissingLocationTest, TheLastFolderOfAnOutputIsCreated) {
  ASSERT_TRUE(base::WriteFileAtomic(dir() + "/in/plan.bin", "bytes").ok());
  const std::string windquant = bin_ + "/cli/windquant";
  testing::CommandOutput r =
      testing::RunInDir(dir(), windquant + " plans push --store store --plan p1 --dir in");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = testing::RunInDir(dir(), windquant + " plans pull --store store --plan p1 --out pulled");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(base::ReadFile(dir() + "/pulled/plan.bin").value_or(""), "bytes");
}

}  // namespace
}  // namespace windquant::cli
