#include "common/store/plan_repository.h"

#include <filesystem>
#include <random>

#include "common/base/files.h"
#include "common/store/fake_artifact_store.h"
#include "common/store/file_artifact_store.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::store {
namespace {

using ::windquant::testing::StatusIs;

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<PlanObject> SampleObjects() {
  std::mt19937 rng(7);
  std::string binary(4096, '\0');
  for (char& c : binary) c = static_cast<char>(rng());
  return {{"plan.json", R"({"actions":[4,2,16]})"},
          {"plan.bin", binary},
          {"report/report.md", "# ppl\n"}};
}

TEST(ValidatePlanIdTest, Cases) {
  for (const char* ok : {"p1", "run-2026.01.01_a", "A.b-c_d"})
    EXPECT_TRUE(ValidatePlanId(ok).ok()) << ok;
  for (const char* bad : {"", ".", "..", "a..b", "a/b", "a b", "../x", "a\\b", "é"}) {
    absl::Status st = ValidatePlanId(bad);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(st.message(), HasSubstr("plan id '")) << bad;
  }
  EXPECT_THAT(
      ValidatePlanId(std::string(kMaxPlanIdBytes + 1, 'a')),
      StatusIs(absl::StatusCode::kInvalidArgument, absl::StrCat("longer than ", kMaxPlanIdBytes)));
}

TEST(PlanRepositoryTest, PushListShowPullRoundTrip) {
  FakeArtifactStore store;
  PlanRepository repo(&store);
  ASSERT_TRUE(repo.Push("p1", SampleObjects()).ok());
  EXPECT_THAT(*repo.ListPlans(), ElementsAre("p1"));
  auto manifest = repo.GetManifest("p1");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  ASSERT_EQ(manifest->objects.size(), 3u);
  EXPECT_EQ(manifest->objects[0].name, "plan.bin");
  EXPECT_EQ(manifest->objects[0].size_bytes, 4096);
  EXPECT_EQ(manifest->objects[0].sha256, base::Sha256Hex(SampleObjects()[1].bytes));
  auto pulled = repo.Pull("p1");
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  ASSERT_EQ(pulled->size(), 3u);
  EXPECT_EQ((*pulled)[0].bytes, SampleObjects()[1].bytes);
  EXPECT_EQ(repo.Push("p1", SampleObjects()).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(repo.Pull("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(PlanRepositoryTest, ManifestIsWrittenLast) {
  FakeArtifactStore store;
  PlanRepository repo(&store);
  ASSERT_TRUE(repo.Push("p1", SampleObjects()).ok());
  EXPECT_EQ(store.put_calls(), 4);
  // Fail each Put in turn: no attempt may leave a visible plan.
  for (int n = 1; n <= 4; ++n) {
    FakeArtifactStore failing;
    PlanRepository r(&failing);
    failing.FailPutsFrom(n);
    absl::Status st = r.Push("p2", SampleObjects());
    EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << n;
    EXPECT_THAT(st.message(), HasSubstr("push of plan 'p2' failed")) << n;
    EXPECT_THAT(*r.ListPlans(), ElementsAre()) << n;
    EXPECT_EQ(r.Pull("p2").status().code(), absl::StatusCode::kNotFound) << n;
    EXPECT_EQ(failing.Objects().count("plans/p2/manifest.json"), 0u) << n;
    // Once the store recovers, the same id can be pushed.
    failing.FailPutsFrom(0);
    EXPECT_TRUE(r.Push("p2", SampleObjects()).ok()) << n;
    EXPECT_THAT(*r.ListPlans(), ElementsAre("p2")) << n;
  }
}

TEST(PlanRepositoryTest, PullRefusesTamperedObjects) {
  FakeArtifactStore store;
  PlanRepository repo(&store);
  ASSERT_TRUE(repo.Push("p1", SampleObjects()).ok());
  const std::string original = store.Objects()["plans/p1/plan.json"];

  std::string flipped = original;
  flipped[3] ^= 1;  // same size, other bytes
  store.SetRaw("plans/p1/plan.json", flipped);
  absl::Status st = repo.Pull("p1").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("object 'plan.json': sha256"));
  EXPECT_EQ(st.message().find('\n'), absl::string_view::npos);

  store.SetRaw("plans/p1/plan.json", original + " ");
  EXPECT_THAT(repo.Pull("p1").status().message(), HasSubstr("object 'plan.json': size"));

  ASSERT_TRUE(store.Delete("plans/p1/plan.json").ok());
  EXPECT_EQ(repo.Pull("p1").status().code(), absl::StatusCode::kDataLoss);
}

TEST(PlanRepositoryTest, RejectsBadNamesAndHostileManifests) {
  FakeArtifactStore store;
  PlanRepository repo(&store);
  EXPECT_EQ(repo.Push("../x", SampleObjects()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(repo.Push("p", {{"../x", "a"}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(repo.Push("p", {{"manifest.json", "a"}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(repo.Push("p", {{"a", "1"}, {"a", "2"}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store.Objects().empty());

  PlanManifest evil{"p", {{"../../etc/passwd", 1, std::string(64, 'a')}}};
  store.SetRaw("plans/p/manifest.json", PlanRepository::ManifestToJson(evil));
  EXPECT_EQ(repo.Pull("p").status().code(), absl::StatusCode::kDataLoss);
  store.SetRaw("plans/p/manifest.json", "{not json");
  EXPECT_THAT(repo.GetManifest("p").status().message(), HasSubstr("plan 'p': manifest.json"));
  PlanManifest other{"q", {}};
  store.SetRaw("plans/p/manifest.json", PlanRepository::ManifestToJson(other));
  EXPECT_THAT(repo.GetManifest("p").status().message(), HasSubstr("plan_id"));
}

TEST(PlanRepositoryTest, DirectoryRoundTripOnFileStore) {
  const fs::path tmp = fs::temp_directory_path() / ("wq_plan_repo_" + std::to_string(getpid()));
  fs::remove_all(tmp);
  for (const PlanObject& o : SampleObjects()) {
    ASSERT_TRUE(base::WriteFileAtomic((tmp / "in" / o.name).string(), o.bytes).ok());
  }
  FileArtifactStore store((tmp / "store").string());
  PlanRepository repo(&store);
  ASSERT_TRUE(repo.PushDirectory("run1", (tmp / "in").string()).ok());
  EXPECT_THAT(*repo.ListPlans(), ElementsAre("run1"));
  ASSERT_TRUE(repo.PullToDirectory("run1", (tmp / "out").string()).ok());
  for (const PlanObject& o : SampleObjects()) {
    EXPECT_EQ(*base::ReadFile((tmp / "out" / o.name).string()), o.bytes) << o.name;
  }
  EXPECT_TRUE(fs::exists(tmp / "out" / "manifest.json"));
  fs::remove_all(tmp);
}

// File objects stream (with a 1 KiB chunk, the 4 KiB plan.bin takes several);
// their manifest checksums are computed on the way and checked on a
// streamed pull, which refuses a corrupted object naming its key and writes
// nothing.
TEST(PlanRepositoryTest, StreamedPushAndPullVerifyChecksumsAndNameTheCorruptKey) {
  const fs::path tmp = fs::temp_directory_path() / ("wq_plan_stream_" + std::to_string(getpid()));
  fs::remove_all(tmp);
  std::vector<PlanObject> objects = SampleObjects();
  for (PlanObject& o : objects) {
    o.path = (tmp / "in" / o.name).string();
    ASSERT_TRUE(base::WriteFileAtomic(o.path, o.bytes).ok());
    o.bytes.clear();  // only the file counts
  }
  FileArtifactStore store((tmp / "store").string(), /*chunk_bytes=*/1024);
  PlanRepository repo(&store);
  ASSERT_TRUE(repo.Push("p1", objects).ok());
  auto manifest = repo.GetManifest("p1");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->objects[0].name, "plan.bin");
  EXPECT_EQ(manifest->objects[0].size_bytes, 4096);
  EXPECT_EQ(manifest->objects[0].sha256, base::Sha256Hex(SampleObjects()[1].bytes));
  ASSERT_TRUE(repo.PullToDirectory("p1", (tmp / "out").string()).ok());
  EXPECT_EQ(*base::ReadFile((tmp / "out" / "plan.bin").string()), SampleObjects()[1].bytes);

  std::string flipped = SampleObjects()[1].bytes;
  flipped[3000] ^= 1;
  ASSERT_TRUE(store.Put("plans/p1/plan.bin", flipped).ok());
  absl::Status st = repo.PullToDirectory("p1", (tmp / "out2").string());
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("object 'plan.bin': sha256"));
  EXPECT_THAT(st.message(), HasSubstr(store.Describe() + "/plans/p1/plan.bin"));
  EXPECT_FALSE(fs::exists(tmp / "out2"));
  ASSERT_TRUE(store.Put("plans/p1/plan.bin", flipped + "x").ok());
  EXPECT_THAT(repo.PullToDirectory("p1", (tmp / "out2").string()),
              StatusIs(absl::StatusCode::kDataLoss, "object 'plan.bin': size 4097 bytes"));
  ASSERT_TRUE(store.Delete("plans/p1/plan.bin").ok());
  EXPECT_THAT(repo.PullToDirectory("p1", (tmp / "out2").string()),
              StatusIs(absl::StatusCode::kDataLoss, "object 'plan.bin'"));
  EXPECT_FALSE(fs::exists(tmp / "out2"));

  // A file that cannot be read fails the push: no plan, no stray objects.
  objects[0].path = (tmp / "in" / "gone.json").string();
  EXPECT_EQ(repo.Push("p2", objects).code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(*store.List("plans/p2/"), ElementsAre());
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace windquant::store
