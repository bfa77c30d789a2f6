// `windquant plans` (the real binary, a child process) against stores that are
// not there: a missing file:// root, S3 bucket or prefix (a real moto_server on
// a loopback port) is one line and exit 1, never an empty listing with exit 0.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/store/artifact_store.h"
#include "common/store/s3_artifact_store.h"
#include "common/testing/moto_server.h"
#include "common/testing/shell.h"

namespace windquant::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using Result = testing::CommandOutput;

class PlansCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new std::string(
        (fs::temp_directory_path() / absl::StrCat("wq_plans_command_test_", getpid())).string());
    fs::create_directories(*tmp_);
    moto_ = new testing::MotoServer();
    std::string moto_bin, aws_bin;
    failure_ = new std::string(moto_->StartForSuite(*tmp_ + "/moto.log", &moto_bin, &aws_bin));
  }
  static void TearDownTestSuite() {
    delete moto_;
    fs::remove_all(*tmp_);
  }
  void SetUp() override {
    const char* bin = std::getenv("WQ_BINARY_DIR");
    ASSERT_NE(bin, nullptr) << "WQ_BINARY_DIR (set by ctest)";
    windquant_ = std::string(bin) + "/cli/windquant";
    ASSERT_TRUE(fs::exists(windquant_)) << windquant_;
  }
  Result Plans(const std::string& args) {
    return testing::RunInDir(*tmp_, windquant_ + " plans " + args);
  }
  // Exit 1, nothing on stdout, one line naming `culprit`.
  void ExpectRefused(const std::string& args, const std::string& culprit) {
    const Result r = Plans(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.out << r.err;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_THAT(r.err, HasSubstr(culprit)) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  }

  static std::string* tmp_;
  static std::string* failure_;
  static testing::MotoServer* moto_;
  std::string windquant_;
};
std::string* PlansCommandTest::tmp_ = nullptr;
std::string* PlansCommandTest::failure_ = nullptr;
testing::MotoServer* PlansCommandTest::moto_ = nullptr;

// error-case: cli.plans-missing-store
TEST_F(PlansCommandTest, MissingFileStoreIsAnError) {
  const std::string missing = *tmp_ + "/no-such-store";
  for (const std::string& uri : {missing, "file://" + missing}) {
    ExpectRefused("list --store " + uri, "file://" + missing + ": store root does not exist");
    ExpectRefused("show --plan p1 --store " + uri, "file://" + missing + ": store root");
    ExpectRefused("pull --plan p1 --out " + *tmp_ + "/pulled --store " + uri,
                  "file://" + missing + ": store root");
    EXPECT_FALSE(fs::exists(*tmp_ + "/pulled"));
  }
  // The default store (./artifacts) when it is not there.
  ExpectRefused("list", "artifacts: store root does not exist");
  EXPECT_FALSE(fs::exists(missing)) << "reading must not create the store";
  // An existing empty store lists nothing, successfully.
  fs::create_directories(*tmp_ + "/empty-store");
  const Result r = Plans("list --store " + *tmp_ + "/empty-store");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// error-case: cli.plans-missing-bucket-prefix
TEST_F(PlansCommandTest, MissingBucketOrPrefixIsAnError) {
  ASSERT_TRUE(failure_->empty()) << *failure_;
  const std::string endpoint = " --endpoint " + moto_->endpoint();
  store::S3Options o;
  o.endpoint_url = moto_->endpoint();
  o.access_key_id = o.secret_access_key = "testing";
  auto store = store::OpenArtifactStore("s3://wq-plans-cli/team", o);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(static_cast<store::S3ArtifactStore*>(store->get())->CreateBucket().ok());
  ASSERT_TRUE((*store)->Put("plans/p1/plan.json", "{}").ok());

  ExpectRefused("list --store s3://wq-no-such-bucket" + endpoint,
                "s3://wq-no-such-bucket: bucket does not exist");
  ExpectRefused("list --store s3://wq-no-such-bucket/team" + endpoint,
                "s3://wq-no-such-bucket: bucket does not exist");
  ExpectRefused("list --store s3://wq-plans-cli/teem" + endpoint,
                "s3://wq-plans-cli/teem: no objects under prefix 'teem/'");
  ExpectRefused("show --plan p1 --store s3://wq-plans-cli/teem" + endpoint,
                "s3://wq-plans-cli/teem: no objects under prefix 'teem/'");
  // The control: the right prefix and the bucket alone are stores.
  for (const std::string uri : {"s3://wq-plans-cli/team", "s3://wq-plans-cli"}) {
    const Result r = Plans("list --store " + uri + endpoint);
    EXPECT_EQ(r.exit_code, 0) << uri << "\n" << r.err;
  }
}

}  // namespace
}  // namespace windquant::cli
