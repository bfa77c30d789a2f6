// Integration test of S3ArtifactStore and PlanRepository against a real
// S3-compatible server (moto_server, started here on a free loopback port),
// cross-checked with the standard AWS command line client (`aws`).
// Fails with a message when moto_server or aws is not installed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/base/files.h"
#include "common/store/artifact_store.h"
#include "common/store/plan_repository.h"
#include "common/store/s3_artifact_store.h"
#include "common/testing/http_client.h"
#include "common/testing/moto_server.h"
#include "common/testing/random_bytes.h"
#include "common/testing/shell.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::store {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

using ::windquant::testing::CanConnect;
using ::windquant::testing::CommandResult;
using ::windquant::testing::MotoServer;
using ::windquant::testing::RandomBytes;
using ::windquant::testing::RunShell;

std::string Quote(const std::string& s) { return absl::StrCat("'", s, "'"); }

// Delegating store that runs a hook before the Nth Put (and fails it if the
// hook says so): simulates a crash or an outage in the middle of a push.
class InterruptingStore : public ArtifactStore {
 public:
  InterruptingStore(ArtifactStore* base, int n, std::function<bool()> before_nth_put)
      : base_(base), n_(n), hook_(std::move(before_nth_put)) {}
  absl::Status Put(absl::string_view key, absl::string_view bytes) override {
    if (++puts_ == n_ && hook_()) {
      return absl::UnavailableError(absl::StrCat("interrupted before Put '", key, "'"));
    }
    return base_->Put(key, bytes);
  }
  absl::StatusOr<std::string> Get(absl::string_view key) override { return base_->Get(key); }
  absl::StatusOr<std::vector<std::string>> List(absl::string_view p) override {
    return base_->List(p);
  }
  absl::StatusOr<bool> Exists(absl::string_view key) override { return base_->Exists(key); }
  absl::Status Delete(absl::string_view key) override { return base_->Delete(key); }
  std::string Describe() const override { return base_->Describe(); }

 private:
  ArtifactStore* base_;
  int n_;
  int puts_ = 0;
  std::function<bool()> hook_;
};

class S3IntegrationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = (fs::temp_directory_path() / absl::StrCat("wq_s3_it_", getpid())).string();
    fs::create_directories(tmp_);
    server_ = new MotoServer();
    failure_ = server_->StartForSuite(tmp_ + "/moto.log", &moto_bin_, &aws_bin_);
    if (!failure_.empty()) return;
    const std::string moto_version =
        RunShell("python3 -c 'import moto; print(moto.__version__)'").output;
    const std::string aws_version = RunShell(Quote(aws_bin_) + " --version").output;
    versions_ = absl::StrCat("moto ", absl::StripAsciiWhitespace(moto_version), " (", moto_bin_,
                             "); ", absl::StripAsciiWhitespace(aws_version));
    std::printf("[ versions ] %s\n", versions_.c_str());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }
  void SetUp() override {
    ASSERT_TRUE(failure_.empty()) << failure_;
    RecordProperty("versions", versions_);
  }

  static S3Options Options(const std::string& endpoint) {
    S3Options o;
    o.endpoint_url = endpoint;
    o.access_key_id = "testing";
    o.secret_access_key = "testing";
    return o;
  }
  std::unique_ptr<ArtifactStore> Open(const std::string& uri, S3Options o) {
    auto store = OpenArtifactStore(uri, o);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
  // Runs `aws --endpoint-url <server> ARGS`.
  static CommandResult Aws(const std::string& args, const std::string& endpoint = "") {
    return RunShell(absl::StrCat(Quote(aws_bin_), " --endpoint-url ",
                                 endpoint.empty() ? server_->endpoint() : endpoint, " ", args));
  }

  static std::string moto_bin_, aws_bin_, tmp_, failure_, versions_;
  static MotoServer* server_;
};
std::string S3IntegrationTest::moto_bin_, S3IntegrationTest::aws_bin_, S3IntegrationTest::tmp_,
    S3IntegrationTest::failure_, S3IntegrationTest::versions_;
MotoServer* S3IntegrationTest::server_ = nullptr;

TEST_F(S3IntegrationTest, CrudListingPaginationAndErrors) {
  S3Options o = Options(server_->endpoint());
  o.list_max_keys = 2;  // force several ListObjectsV2 pages
  auto store = Open("s3://wq-crud/runs/t1", o);
  ASSERT_NE(store, nullptr);
  auto* s3 = static_cast<S3ArtifactStore*>(store.get());
  ASSERT_TRUE(s3->CreateBucket().ok());
  ASSERT_TRUE(s3->CreateBucket().ok()) << "re-creating an owned bucket is OK";

  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes.push_back(static_cast<char>(i));
  const std::string odd_key = "dir/a b+c=d&e (1)~$.bin";
  ASSERT_TRUE(store->Put(odd_key, all_bytes).ok());
  ASSERT_TRUE(store->Put("dir/empty", "").ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store->Put(absl::StrCat("many/k", i), "v").ok());

  auto got = store->Get(odd_key);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, all_bytes);
  EXPECT_EQ(*store->Get("dir/empty"), "");
  EXPECT_THAT(*store->List("dir/"), ElementsAre(odd_key, "dir/empty"));
  EXPECT_THAT(*store->List("many/"),
              ElementsAre("many/k0", "many/k1", "many/k2", "many/k3", "many/k4"));
  EXPECT_EQ(store->List("").value().size(), 7u);
  EXPECT_TRUE(*store->Exists(odd_key));
  EXPECT_FALSE(*store->Exists("dir/missing"));

  ASSERT_TRUE(store->Delete(odd_key).ok());
  ASSERT_TRUE(store->Delete(odd_key).ok());
  auto missing = store->Get(odd_key);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("HTTP 404 NoSuchKey"));
  EXPECT_THAT(missing.status().message(), HasSubstr("s3://wq-crud/runs/t1/dir/a b+c=d&e"));

  auto no_bucket = Open("s3://wq-no-such-bucket", Options(server_->endpoint()));
  auto st = no_bucket->Put("x", "y");
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("NoSuchBucket"));
  EXPECT_EQ(store->Put("../escape", "x").code(), absl::StatusCode::kInvalidArgument);
}

// error-case: store.missing-bucket-prefix
TEST_F(S3IntegrationTest, MissingBucketOrPrefixIsAnErrorNotAnEmptyStore) {
  const S3Options o = Options(server_->endpoint());
  auto existing = Open("s3://wq-exists/runs", o);
  ASSERT_NE(existing, nullptr);
  ASSERT_TRUE(static_cast<S3ArtifactStore*>(existing.get())->CreateBucket().ok());
  // An existing bucket without prefix is a store, empty or not.
  auto bucket = Open("s3://wq-exists", o);
  EXPECT_TRUE(bucket->CheckExists().ok()) << bucket->CheckExists();
  // A prefix with no object under it is no store (S3 has no empty folders).
  absl::Status st = existing->CheckExists();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("s3://wq-exists/runs: no objects under prefix 'runs/'"));
  ASSERT_TRUE(existing->Put("a/b", "x").ok());
  EXPECT_TRUE(existing->CheckExists().ok()) << existing->CheckExists();
  // "run" is a prefix of "runs/a/b" as a string, not as a folder.
  st = Open("s3://wq-exists/run", o)->CheckExists();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("s3://wq-exists/run: no objects under prefix 'run/'"));
  // A missing bucket, with and without prefix.
  for (const std::string uri : {"s3://wq-no-such-bucket", "s3://wq-no-such-bucket/runs"}) {
    st = Open(uri, o)->CheckExists();
    EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << uri;
    EXPECT_THAT(st.message(), HasSubstr("s3://wq-no-such-bucket: bucket does not exist")) << uri;
  }
}

TEST_F(S3IntegrationTest, ByteIdenticalWithTheAwsCli) {
  auto store = Open("s3://wq-cross/prefix", Options(server_->endpoint()));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(static_cast<S3ArtifactStore*>(store.get())->CreateBucket().ok());

  // What we push, `aws s3 cp` pulls byte-identical.
  const std::string ours = RandomBytes(200 * 1024 + 17, 1);
  ASSERT_TRUE(store->Put("ours/data.bin", ours).ok());
  const std::string pulled_path = tmp_ + "/pulled.bin";
  CommandResult r =
      Aws(absl::StrCat("s3 cp s3://wq-cross/prefix/ours/data.bin ", Quote(pulled_path)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(*base::ReadFile(pulled_path), ours);

  // What `aws s3 cp` pushes, we read identically (and list).
  const std::string theirs = RandomBytes(64 * 1024 + 3, 2);
  const std::string upload_path = tmp_ + "/upload.bin";
  ASSERT_TRUE(base::WriteFileAtomic(upload_path, theirs).ok());
  r = Aws(absl::StrCat("s3 cp ", Quote(upload_path), " 's3://wq-cross/prefix/theirs/x y.bin'"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto got = store->Get("theirs/x y.bin");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, theirs);
  EXPECT_THAT(*store->List(""), ElementsAre("ours/data.bin", "theirs/x y.bin"));

  // And the aws client lists what we wrote, with the sizes we wrote.
  r = Aws("s3 ls --recursive s3://wq-cross/prefix/");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat(ours.size(), " prefix/ours/data.bin")));
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat(theirs.size(), " prefix/theirs/x y.bin")));

  ASSERT_TRUE(store->Delete("ours/data.bin").ok());
  r = Aws("s3 ls --recursive s3://wq-cross/prefix/");
  EXPECT_THAT(r.output, Not(HasSubstr("ours/data.bin")));
}

TEST_F(S3IntegrationTest, PlanPushPullAndTamperDetection) {
  auto store = Open("s3://wq-plans", Options(server_->endpoint()));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(static_cast<S3ArtifactStore*>(store.get())->CreateBucket().ok());
  PlanRepository repo(store.get());
  const std::vector<PlanObject> objects = {{"plan.json", R"({"actions":[2,4,16]})"},
                                           {"plan.bin", RandomBytes(10000, 3)},
                                           {"report.md", "# report\n"}};
  ASSERT_TRUE(repo.Push("run-1", objects).ok());
  EXPECT_THAT(*repo.ListPlans(), ElementsAre("run-1"));
  auto pulled = repo.Pull("run-1");
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ((*pulled)[0].name, "plan.bin");
  EXPECT_EQ((*pulled)[0].bytes, objects[1].bytes);

  // The aws client sees the manifest we wrote, and its checksums are right.
  const std::string manifest_path = tmp_ + "/manifest.json";
  CommandResult r =
      Aws(absl::StrCat("s3 cp s3://wq-plans/plans/run-1/manifest.json ", Quote(manifest_path)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(*base::ReadFile(manifest_path), HasSubstr(base::Sha256Hex(objects[1].bytes)));

  // Replace plan.bin behind our back with the standard client: pull refuses.
  std::string tampered = objects[1].bytes;
  tampered[5000] ^= 0x40;
  const std::string tampered_path = tmp_ + "/tampered.bin";
  ASSERT_TRUE(base::WriteFileAtomic(tampered_path, tampered).ok());
  r = Aws(absl::StrCat("s3 cp ", Quote(tampered_path), " s3://wq-plans/plans/run-1/plan.bin"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  absl::Status st = repo.Pull("run-1").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("plan 'run-1': object 'plan.bin': sha256"));
}

TEST_F(S3IntegrationTest, InterruptedPushLeavesNoVisiblePlan) {
  auto store = Open("s3://wq-interrupted", Options(server_->endpoint()));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(static_cast<S3ArtifactStore*>(store.get())->CreateBucket().ok());
  // The 3rd Put (of 3 objects + manifest) fails: two objects are on the server.
  InterruptingStore interrupting(store.get(), 3, [] { return true; });
  PlanRepository repo(&interrupting);
  const std::vector<PlanObject> objects = {{"a", "1"}, {"b", "2"}, {"c", "3"}};
  absl::Status st = repo.Push("half", objects);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(*PlanRepository(store.get()).ListPlans(), ElementsAre());
  EXPECT_EQ(PlanRepository(store.get()).Pull("half").status().code(), absl::StatusCode::kNotFound);
  CommandResult r = Aws("s3 ls --recursive s3://wq-interrupted/");
  EXPECT_THAT(r.output, Not(HasSubstr("manifest.json")));
}

TEST_F(S3IntegrationTest, ServerKilledMidPushFailsCleanlyWithoutLeakingTheSecret) {
  MotoServer doomed;
  ASSERT_TRUE(doomed.Start(moto_bin_, tmp_ + "/moto-doomed.log"));
  S3Options o = Options(doomed.endpoint());
  o.secret_access_key = "do-not-print-this-secret";
  o.max_attempts = 2;
  o.connect_timeout_ms = 2000;
  auto store = Open("s3://wq-doomed", o);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(static_cast<S3ArtifactStore*>(store.get())->CreateBucket().ok());
  // Kill the server just before the 2nd Put; the Put itself really goes out.
  InterruptingStore interrupting(store.get(), 2, [&] {
    doomed.Stop();
    return false;
  });
  PlanRepository repo(&interrupting);
  absl::Status st = repo.Push("p", {{"a", "1"}, {"b", "2"}});
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(st.message(), HasSubstr("s3 PUT s3://wq-doomed/plans/p/b"));
  EXPECT_THAT(st.message(), Not(HasSubstr("do-not-print-this-secret")));
  EXPECT_EQ(st.message().find('\n'), absl::string_view::npos);
}

// moto_server checks SigV4 signatures once IAM authentication is on
// (INITIAL_NO_AUTH_ACTION_COUNT): a correct signature must pass and a wrong
// secret must be rejected. (moto 5.2 also rejects the aws client's own
// signed query-string requests in this mode, so ListObjectsV2 is not covered.)
TEST_F(S3IntegrationTest, MotoVerifiesOurSignatures) {
  MotoServer authed;
  ASSERT_TRUE(
      authed.Start(moto_bin_, tmp_ + "/moto-auth.log", {{"INITIAL_NO_AUTH_ACTION_COUNT", "3"}}));
  ASSERT_EQ(Aws("iam create-user --user-name wq", authed.endpoint()).exit_code, 0);
  CommandResult key = Aws("iam create-access-key --user-name wq", authed.endpoint());
  ASSERT_EQ(key.exit_code, 0) << key.output;
  ASSERT_EQ(
      Aws("iam put-user-policy --user-name wq --policy-name all --policy-document "
          "'{\"Version\":\"2012-10-17\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"*\","
          "\"Resource\":\"*\"}]}'",
          authed.endpoint())
          .exit_code,
      0);
  nlohmann::json j = nlohmann::json::parse(key.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << key.output;
  S3Options o = Options(authed.endpoint());
  o.access_key_id = j["AccessKey"]["AccessKeyId"].get<std::string>();
  o.secret_access_key = j["AccessKey"]["SecretAccessKey"].get<std::string>();
  auto store = Open("s3://wq-auth/p", o);
  ASSERT_NE(store, nullptr);
  absl::Status created = static_cast<S3ArtifactStore*>(store.get())->CreateBucket();
  ASSERT_TRUE(created.ok()) << created;
  const std::string bytes = RandomBytes(5000, 4);
  ASSERT_TRUE(store->Put("dir/a b.bin", bytes).ok());
  auto got = store->Get("dir/a b.bin");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, bytes);
  EXPECT_TRUE(*store->Exists("dir/a b.bin"));
  EXPECT_TRUE(store->Delete("dir/a b.bin").ok());

  S3Options wrong = o;
  wrong.secret_access_key = "wrong-secret-value";
  auto bad = Open("s3://wq-auth/p", wrong);
  absl::Status st = bad->Put("x", "y");
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
  EXPECT_THAT(st.message(), HasSubstr("HTTP 403 SignatureDoesNotMatch"));
  EXPECT_THAT(st.message(), Not(HasSubstr("wrong-secret-value")));
}

}  // namespace
}  // namespace windquant::store
