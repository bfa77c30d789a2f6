// Streamed transfers of S3ArtifactStore against moto_server on loopback:
// PutFile above the multipart threshold (5 MiB parts, a 12 MiB file: three
// parts, the last one short), GetToFile, abort of failed uploads (nothing
// left in ListMultipartUploads), and PlanRepository's streamed push/pull with
// a corrupted object. Fails with a message when moto_server or aws is absent.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/store/artifact_store.h"
#include "common/store/plan_repository.h"
#include "common/store/s3_artifact_store.h"
#include "common/testing/moto_server.h"
#include "common/testing/random_bytes.h"
#include "common/testing/shell.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::store {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::windquant::testing::CommandResult;
using ::windquant::testing::MotoServer;
using ::windquant::testing::RandomBytes;
using ::windquant::testing::RunShell;
using ::windquant::testing::StatusIs;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kPartBytes = 5 * kMiB;          // S3's smallest part
constexpr int64_t kFileBytes = 12 * kMiB + 1234;  // parts of 5, 5 and ~2 MiB

class S3MultipartTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = (fs::temp_directory_path() / absl::StrCat("wq_s3_mp_", getpid())).string();
    fs::create_directories(tmp_);
    big_ = RandomBytes(kFileBytes, 11);
    if (!base::WriteFileAtomic(tmp_ + "/big.bin", big_).ok()) failure_ = "cannot write big.bin";
    server_ = new MotoServer();
    if (failure_.empty())
      failure_ = server_->StartForSuite(tmp_ + "/moto.log", &moto_bin_, &aws_bin_);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }
  void SetUp() override { ASSERT_TRUE(failure_.empty()) << failure_; }

  // A store on a new bucket, with 5 MiB parts above a 5 MiB threshold.
  std::unique_ptr<ArtifactStore> Open(const std::string& bucket_and_prefix, S3Options o = {}) {
    o.endpoint_url = server_->endpoint();
    o.access_key_id = "testing";
    o.secret_access_key = "testing";
    o.part_size_bytes = kPartBytes;
    o.multipart_threshold_bytes = kPartBytes;
    auto store = OpenArtifactStore(absl::StrCat("s3://", bucket_and_prefix), o);
    EXPECT_TRUE(store.ok()) << store.status();
    if (!store.ok()) return nullptr;
    absl::Status created = S3(store->get())->CreateBucket();
    EXPECT_TRUE(created.ok()) << created;
    return std::move(*store);
  }
  static S3ArtifactStore* S3(ArtifactStore* store) { return static_cast<S3ArtifactStore*>(store); }
  static CommandResult Aws(const std::string& args) {
    return RunShell(
        absl::StrCat("'", aws_bin_, "' --endpoint-url ", server_->endpoint(), " ", args));
  }

  static std::string moto_bin_, aws_bin_, tmp_, failure_, big_;
  static MotoServer* server_;
};
std::string S3MultipartTest::moto_bin_, S3MultipartTest::aws_bin_, S3MultipartTest::tmp_,
    S3MultipartTest::failure_, S3MultipartTest::big_;
MotoServer* S3MultipartTest::server_ = nullptr;

TEST_F(S3MultipartTest, LargeFileGoesUpInPartsAndComesBackByteIdentical) {
  std::vector<int64_t> progress;
  S3Options o;
  o.on_part = [&](absl::string_view, int64_t done, int64_t total) {
    EXPECT_EQ(total, kFileBytes);
    progress.push_back(done);
    return absl::OkStatus();
  };
  auto store = Open("wq-mp-ok/pre", o);
  ASSERT_NE(store, nullptr);
  auto put = store->PutFile("ckpt/model.safetensors", tmp_ + "/big.bin");
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->size_bytes, kFileBytes);
  EXPECT_EQ(put->sha256_hex, base::Sha256Hex(big_));
  EXPECT_THAT(progress, ElementsAre(kPartBytes, 2 * kPartBytes, kFileBytes));
  // S3 gives a multipart object the ETag "<md5 of part md5s>-<parts>".
  CommandResult head = Aws("s3api head-object --bucket wq-mp-ok --key pre/ckpt/model.safetensors");
  ASSERT_EQ(head.exit_code, 0) << head.output;
  EXPECT_THAT(head.output, HasSubstr("-3\\\""));
  EXPECT_THAT(*S3(store.get())->ListOpenUploads(), ElementsAre());

  auto got = store->GetToFile("ckpt/model.safetensors", tmp_ + "/out/model.safetensors");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size_bytes, kFileBytes);
  EXPECT_EQ(got->sha256_hex, put->sha256_hex);
  EXPECT_TRUE(*base::ReadFile(tmp_ + "/out/model.safetensors") == big_);

  // Below the threshold: one streamed PutObject, read back with the aws client.
  const std::string small = big_.substr(0, 3 * kMiB);
  ASSERT_TRUE(base::WriteFileAtomic(tmp_ + "/small.bin", small).ok());
  ASSERT_TRUE(store->PutFile("small.bin", tmp_ + "/small.bin").ok());
  ASSERT_EQ(
      Aws(absl::StrCat("s3 cp s3://wq-mp-ok/pre/small.bin ", tmp_, "/small-aws.bin")).exit_code, 0);
  EXPECT_TRUE(*base::ReadFile(tmp_ + "/small-aws.bin") == small);

  auto missing = store->GetToFile("nope.bin", tmp_ + "/out/nope.bin");
  EXPECT_THAT(missing.status(), StatusIs(absl::StatusCode::kNotFound, "nope.bin"));
  EXPECT_FALSE(fs::exists(tmp_ + "/out/nope.bin"));
}

TEST_F(S3MultipartTest, FailedUploadIsAbortedAndLeavesNothing) {
  S3Options o;
  o.on_part = [](absl::string_view, int64_t done, int64_t) {
    return done > kPartBytes ? absl::CancelledError("injected failure after part 2")
                             : absl::OkStatus();
  };
  auto store = Open("wq-mp-fail", o);
  ASSERT_NE(store, nullptr);
  // ListOpenUploads does see an upload that is left open.
  CommandResult started =
      Aws("s3api create-multipart-upload --bucket wq-mp-fail --key left/open.bin");
  ASSERT_EQ(started.exit_code, 0) << started.output;
  auto open = S3(store.get())->ListOpenUploads();
  ASSERT_TRUE(open.ok()) << open.status();
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ((*open)[0].key, "left/open.bin");
  ASSERT_EQ(Aws(absl::StrCat("s3api abort-multipart-upload --bucket wq-mp-fail --key "
                             "left/open.bin --upload-id ",
                             (*open)[0].upload_id))
                .exit_code,
            0);

  auto put = store->PutFile("ckpt/model.safetensors", tmp_ + "/big.bin");
  EXPECT_THAT(put.status(), StatusIs(absl::StatusCode::kCancelled, "injected failure"));
  EXPECT_THAT(*S3(store.get())->ListOpenUploads(), ElementsAre());
  EXPECT_FALSE(*store->Exists("ckpt/model.safetensors"));
  // A local file that is not there fails before anything is started.
  EXPECT_THAT(store->PutFile("a", tmp_ + "/no-such.bin").status(),
              StatusIs(absl::StatusCode::kNotFound, "no-such.bin"));
  EXPECT_THAT(*S3(store.get())->ListOpenUploads(), ElementsAre());
}

TEST_F(S3MultipartTest, StreamedPlanPushPullVerifiesAndNamesACorruptedKey) {
  auto store = Open("wq-mp-plans");
  ASSERT_NE(store, nullptr);
  const std::string in = tmp_ + "/plan-in";
  ASSERT_TRUE(base::WriteFileAtomic(in + "/quantized/model.safetensors", big_).ok());
  ASSERT_TRUE(base::WriteFileAtomic(in + "/plan.json", "{\"actions\":[2,4]}").ok());
  PlanRepository repo(store.get());
  ASSERT_TRUE(repo.PushDirectory("big", in).ok());
  auto manifest = repo.GetManifest("big");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->objects[1].name, "quantized/model.safetensors");
  EXPECT_EQ(manifest->objects[1].sha256, base::Sha256Hex(big_));
  ASSERT_TRUE(repo.PullToDirectory("big", tmp_ + "/plan-out").ok());
  EXPECT_TRUE(*base::ReadFile(tmp_ + "/plan-out/quantized/model.safetensors") == big_);

  // Same size, one byte flipped, written with the standard client.
  std::string tampered = big_;
  tampered[7 * kMiB] ^= 0x10;
  ASSERT_TRUE(base::WriteFileAtomic(tmp_ + "/tampered.bin", tampered).ok());
  ASSERT_EQ(
      Aws(absl::StrCat("s3 cp ", tmp_,
                       "/tampered.bin s3://wq-mp-plans/plans/big/quantized/model.safetensors"))
          .exit_code,
      0);
  absl::Status st = repo.PullToDirectory("big", tmp_ + "/plan-out2");
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("object 'quantized/model.safetensors': sha256"));
  EXPECT_THAT(st.message(), HasSubstr("s3://wq-mp-plans/plans/big/quantized/model.safetensors"));
  EXPECT_FALSE(fs::exists(tmp_ + "/plan-out2"));
}

}  // namespace
}  // namespace windquant::store
