// Peak memory of streamed transfers: a 1 GiB file pushed and pulled through
// FileArtifactStore and S3ArtifactStore (moto_server on loopback, multipart
// with the default 64 MiB parts) and through PlanRepository's streamed
// push/pull must raise this process's peak RSS (getrusage ru_maxrss) by far
// less than the file: it is never held in memory. Slow (moto keeps the
// object in its own memory); run alone: ctest -R store_stream_rss_test.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/atomic_file_writer.h"
#include "common/store/file_artifact_store.h"
#include "common/store/plan_repository.h"
#include "common/store/s3_artifact_store.h"
#include "common/testing/moto_server.h"
#include "common/testing/shell.h"
#include "gtest/gtest.h"

namespace windquant::store {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kFileBytes = 1024 * kMiB;
// Allowed peak RSS growth: buffers of ~1 MiB plus libcurl's, far below the file.
constexpr int64_t kMaxGrowthBytes = 96 * kMiB;

int64_t PeakRssBytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
}

class StreamRssTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = (fs::temp_directory_path() / absl::StrCat("wq_stream_rss_", getpid())).string();
    base::AtomicFileWriter writer;  // 1 GiB of seeded random bytes, 1 MiB at a time
    ASSERT_TRUE(writer.Open(tmp_ + "/in/model.safetensors").ok());
    std::mt19937_64 rng(5);
    std::string chunk(kMiB, '\0');
    for (int64_t i = 0; i < kFileBytes / kMiB; ++i) {
      for (size_t j = 0; j < chunk.size(); j += 8) {
        const uint64_t v = rng();
        std::memcpy(&chunk[j], &v, 8);
      }
      ASSERT_TRUE(writer.Append(chunk).ok());
    }
    auto digest = writer.Commit();
    ASSERT_TRUE(digest.ok());
    sha_ = digest->sha256_hex;
  }
  static void TearDownTestSuite() { fs::remove_all(tmp_); }

  // Runs `transfer` and checks (and prints) the peak RSS growth it caused.
  static void ExpectBounded(const std::string& what, const std::function<void()>& transfer) {
    const int64_t before = PeakRssBytes();
    transfer();
    const int64_t after = PeakRssBytes();
    std::printf("[ peak rss ] %s: %.1f MiB before, %.1f MiB after (1024 MiB file)\n", what.c_str(),
                before / double(kMiB), after / double(kMiB));
    EXPECT_LT(after - before, kMaxGrowthBytes) << what;
  }

  static std::string tmp_, sha_;
};
std::string StreamRssTest::tmp_, StreamRssTest::sha_;

TEST_F(StreamRssTest, FileStoreAndS3StreamAGibibyteInBoundedMemory) {
  FileArtifactStore files(tmp_ + "/store");
  ExpectBounded("file store PutFile + GetToFile", [&] {
    auto put = files.PutFile("m.bin", tmp_ + "/in/model.safetensors");
    ASSERT_TRUE(put.ok()) << put.status();
    EXPECT_EQ(put->sha256_hex, sha_);
    auto got = files.GetToFile("m.bin", tmp_ + "/out/m.bin");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->sha256_hex, sha_);
  });
  fs::remove_all(tmp_ + "/store");
  fs::remove_all(tmp_ + "/out");

  const std::string moto = ::windquant::testing::FindOnPath("moto_server");
  ASSERT_FALSE(moto.empty()) << "moto_server not found on PATH";
  ::windquant::testing::MotoServer server;
  ASSERT_TRUE(server.Start(moto, tmp_ + "/moto.log")) << "see " << tmp_ << "/moto.log";
  S3Options o;
  o.endpoint_url = server.endpoint();
  o.access_key_id = o.secret_access_key = "testing";
  auto store = OpenArtifactStore("s3://wq-rss", o);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(static_cast<S3ArtifactStore*>(store->get())->CreateBucket().ok());
  PlanRepository repo(store->get());
  ExpectBounded("s3 plans push (multipart, 64 MiB parts) + pull", [&] {
    absl::Status pushed = repo.PushDirectory("big", tmp_ + "/in");
    ASSERT_TRUE(pushed.ok()) << pushed;
    absl::Status pulled = repo.PullToDirectory("big", tmp_ + "/pulled");
    ASSERT_TRUE(pulled.ok()) << pulled;
  });
}

}  // namespace
}  // namespace windquant::store
