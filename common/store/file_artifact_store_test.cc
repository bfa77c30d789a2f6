#include "common/store/file_artifact_store.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "common/base/atomic_file_writer.h"
#include "common/base/files.h"
#include "common/testing/random_bytes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::store {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::windquant::testing::RandomBytes;

class FileArtifactStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(::testing::UnitTest::GetInstance()->random_seed() + getpid());
    root_ = (fs::temp_directory_path() / ("wq_file_store_" + std::to_string(rng()))).string();
    store_ = std::make_unique<FileArtifactStore>(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Every file under the root, including temporaries.
  std::vector<std::string> AllFiles() const {
    std::vector<std::string> out;
    if (!fs::exists(root_)) return out;
    for (const auto& e : fs::recursive_directory_iterator(root_)) {
      if (e.is_regular_file()) out.push_back(fs::relative(e.path(), root_).generic_string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string root_;
  std::unique_ptr<FileArtifactStore> store_;
};

TEST_F(FileArtifactStoreTest, PutGetListExistsDelete) {
  ASSERT_TRUE(store_->Put("plans/p1/plan.json", "{}").ok());
  ASSERT_TRUE(store_->Put("plans/p1/deep/x.bin", std::string("\0\1\2", 3)).ok());
  ASSERT_TRUE(store_->Put("plans/p2/plan.json", "two").ok());
  ASSERT_TRUE(store_->Put("other", "o").ok());

  EXPECT_EQ(*store_->Get("plans/p1/deep/x.bin"), std::string("\0\1\2", 3));
  EXPECT_THAT(*store_->List(""), ElementsAre("other", "plans/p1/deep/x.bin", "plans/p1/plan.json",
                                             "plans/p2/plan.json"));
  EXPECT_THAT(*store_->List("plans/p1/"), ElementsAre("plans/p1/deep/x.bin", "plans/p1/plan.json"));
  EXPECT_THAT(*store_->List("plans/p"),
              ElementsAre("plans/p1/deep/x.bin", "plans/p1/plan.json", "plans/p2/plan.json"));
  EXPECT_THAT(*store_->List("nothing/"), ElementsAre());
  EXPECT_TRUE(*store_->Exists("other"));
  EXPECT_FALSE(*store_->Exists("plans"));  // a directory is not an object
  EXPECT_FALSE(*store_->Exists("missing"));

  ASSERT_TRUE(store_->Put("other", "replaced").ok());
  EXPECT_EQ(*store_->Get("other"), "replaced");

  ASSERT_TRUE(store_->Delete("plans/p1/deep/x.bin").ok());
  ASSERT_TRUE(store_->Delete("plans/p1/deep/x.bin").ok());  // idempotent
  EXPECT_FALSE(fs::exists(root_ + "/plans/p1/deep"));       // empty dirs pruned
  auto missing = store_->Get("plans/p1/deep/x.bin");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("plans/p1/deep/x.bin"));
  // No temporary files are left behind by successful writes.
  EXPECT_THAT(AllFiles(), ElementsAre("other", "plans/p1/plan.json", "plans/p2/plan.json"));
}

TEST_F(FileArtifactStoreTest, RejectsEscapingKeysWithoutTouchingTheDisk) {
  for (const char* key : {"../escape", "/etc/passwd", "a/../../b", "a//b", "a\\b"}) {
    absl::Status st = store_->Put(key, "x");
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_THAT(st.message(), HasSubstr("artifact key")) << key;
    EXPECT_EQ(store_->Get(key).status().code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_EQ(store_->Delete(key).code(), absl::StatusCode::kInvalidArgument) << key;
  }
  EXPECT_EQ(store_->List("../").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(fs::path(root_).parent_path() / "escape"));
  EXPECT_FALSE(fs::exists(root_));
}

TEST_F(FileArtifactStoreTest, LeftoverTemporaryOfACrashedWriterIsInvisible) {
  ASSERT_TRUE(store_->Put("plans/p/plan.bin", "old content").ok());
  // What a writer killed between write() and rename() leaves behind.
  std::ofstream(root_ + "/plans/p/plan.bin.tmp.4242.123456789") << "new cont";
  EXPECT_EQ(*store_->Get("plans/p/plan.bin"), "old content");
  EXPECT_THAT(*store_->List(""), ElementsAre("plans/p/plan.bin"));
  EXPECT_TRUE(FileArtifactStore::IsTemporaryName("x.tmp.1.2"));
  EXPECT_FALSE(FileArtifactStore::IsTemporaryName("x.tmp.json"));
  EXPECT_FALSE(FileArtifactStore::IsTemporaryName("x.tmp.1."));
  EXPECT_EQ(store_->Put("a.tmp.1.2", "x").code(), absl::StatusCode::kInvalidArgument);
}

// error-case: store.missing-root
TEST_F(FileArtifactStoreTest, MissingRootIsAnErrorNotAnEmptyStore) {
  fs::create_directories(root_);
  std::ofstream(root_ + "/file") << "x";
  // Not there, under a missing parent, a file: each is refused naming the root.
  for (const std::string& root : {root_ + "/missing", root_ + "/a/b", root_ + "/file"}) {
    FileArtifactStore store(root);
    absl::Status st = store.CheckExists();
    EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << root;
    EXPECT_THAT(st.message(), HasSubstr("file://" + root + ": store root ")) << st;
    EXPECT_THAT(*store.List(""), ::testing::IsEmpty()) << "List alone cannot tell";
  }
  EXPECT_THAT(FileArtifactStore(root_ + "/file").CheckExists().message(),
              HasSubstr(": store root is not a directory"));
  fs::remove(root_ + "/file");
  // An existing empty folder is an empty store; so is it after a write.
  fs::create_directories(root_);
  EXPECT_TRUE(store_->CheckExists().ok());
  ASSERT_TRUE(store_->Put("plans/p1/plan.json", "{}").ok());
  EXPECT_TRUE(store_->CheckExists().ok());
}

TEST_F(FileArtifactStoreTest, WriteInterruptedByTheFileSizeLimitKeepsOldContent) {
  ASSERT_TRUE(store_->Put("ckpt.bin", "old content").ok());
  // A child process whose writes fail past 4 KiB (RLIMIT_FSIZE, EFBIG):
  // the new 1 MiB object cannot be completely written.
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {4096, 4096};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(3);
    absl::Status st = store_->Put("ckpt.bin", std::string(1 << 20, 'n'));
    _exit(st.ok() ? 1 : (absl::IsInternal(st) ? 0 : 2));
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "the Put in the child should fail with INTERNAL";
  EXPECT_EQ(*store_->Get("ckpt.bin"), "old content");
  EXPECT_THAT(AllFiles(), ElementsAre("ckpt.bin"));  // the temporary was removed
}

TEST_F(FileArtifactStoreTest, FailedRenameLeavesNoTemporary) {
  ASSERT_TRUE(store_->Put("d/inner", "x").ok());
  absl::Status st = store_->Put("d", "cannot replace a directory");
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(AllFiles(), ElementsAre("d/inner"));
}

// Streams copy in chunks: a file of several chunks plus a ragged end, with a
// 4 KiB chunk, comes out byte-identical, with the digest of its bytes.
TEST_F(FileArtifactStoreTest, PutFileAndGetToFileStreamFilesLargerThanAChunk) {
  constexpr size_t kChunk = 4096;
  FileArtifactStore store(root_, kChunk);
  const std::string bytes = RandomBytes(10 * kChunk + 123, 7);
  const std::string src = root_ + "-src.bin", dst = root_ + "-out/deep/dst.bin";
  ASSERT_TRUE(base::WriteFileAtomic(src, bytes).ok());
  auto put = store.PutFile("ckpt/model.safetensors", src);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->size_bytes, static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(put->sha256_hex, base::Sha256Hex(bytes));
  EXPECT_EQ(*store.Get("ckpt/model.safetensors"), bytes);
  auto got = store.GetToFile("ckpt/model.safetensors", dst);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->sha256_hex, base::Sha256Hex(bytes));
  EXPECT_EQ(*base::ReadFile(dst), bytes);
  EXPECT_THAT(AllFiles(), ElementsAre("ckpt/model.safetensors"));  // no temporaries
  fs::remove(src);
  fs::remove_all(root_ + "-out");
}

TEST_F(FileArtifactStoreTest, StreamingErrorsNameTheCulpritAndCreateNothing) {
  auto put = store_->PutFile("x.bin", root_ + "-no-such-file");
  EXPECT_EQ(put.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(put.status().message(), HasSubstr("-no-such-file"));
  auto got = store_->GetToFile("missing.bin", root_ + "-out.bin");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(got.status().message(), HasSubstr("'missing.bin'"));
  EXPECT_FALSE(fs::exists(root_ + "-out.bin"));
  EXPECT_EQ(store_->PutFile("../escape", "/dev/null").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(AllFiles(), ElementsAre());
}

// A transfer that fails half-way (writes refused past 64 KiB, RLIMIT_FSIZE)
// leaves the old object in place and no temporary, for PutFile and for
// GetToFile's local file.
TEST_F(FileArtifactStoreTest, StreamingTransferFailingHalfWayLeavesNoObject) {
  constexpr size_t kChunk = 4096;
  const std::string src = root_ + "-src.bin", out_dir = root_ + "-out";
  ASSERT_TRUE(base::WriteFileAtomic(src, RandomBytes(256 << 10, 9)).ok());
  ASSERT_TRUE(store_->Put("ckpt.bin", "old content").ok());
  ASSERT_TRUE(store_->Put("big.bin", RandomBytes(256 << 10, 10)).ok());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {64 << 10, 64 << 10};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(3);
    FileArtifactStore store(root_, kChunk);
    absl::Status put = store.PutFile("ckpt.bin", src).status();
    absl::Status get = store.GetToFile("big.bin", out_dir + "/big.bin").status();
    _exit(absl::IsInternal(put) && absl::IsInternal(get) ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "PutFile and GetToFile in the child should fail INTERNAL";
  EXPECT_EQ(*store_->Get("ckpt.bin"), "old content");
  EXPECT_THAT(AllFiles(), ElementsAre("big.bin", "ckpt.bin"));
  EXPECT_TRUE(fs::is_empty(out_dir)) << "no partial or temporary local file";
  fs::remove(src);
  fs::remove_all(out_dir);
}

}  // namespace
}  // namespace windquant::store
