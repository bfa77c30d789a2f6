// FileArtifactStore: artifacts as files under a root directory (the default
// `./artifacts`). Writes go through base::WriteFileAtomic (temporary file in
// the same directory, fsync, rename), so a crash mid-write leaves the old
// object or none, never a torn one. PutFile/GetToFile copy in chunks of
// `chunk_bytes` (1 MiB by default) through a temporary file and a rename
// (base::CopyFileAtomic), so memory stays at one chunk for any file size.
// Thread-compatible; concurrent writers of different keys are safe.
#ifndef WINDQUANT_COMMON_STORE_FILE_ARTIFACT_STORE_H_
#define WINDQUANT_COMMON_STORE_FILE_ARTIFACT_STORE_H_

#include <string>
#include <vector>

#include "common/store/artifact_store.h"

namespace windquant::store {

class FileArtifactStore : public ArtifactStore {
 public:
  // `root` is an absolute directory; it is created on the first Put.
  explicit FileArtifactStore(std::string root, size_t chunk_bytes = base::kStreamChunkBytes);

  absl::Status Put(absl::string_view key, absl::string_view bytes) override;
  absl::StatusOr<std::string> Get(absl::string_view key) override;
  absl::StatusOr<base::FileDigest> PutFile(absl::string_view key,
                                           const std::string& local_path) override;
  absl::StatusOr<base::FileDigest> GetToFile(absl::string_view key,
                                             const std::string& local_path) override;
  // Skips leftover temporary files of interrupted writes.
  absl::StatusOr<std::vector<std::string>> List(absl::string_view prefix) override;
  absl::StatusOr<bool> Exists(absl::string_view key) override;
  absl::Status Delete(absl::string_view key) override;
  absl::Status CheckExists() override;
  std::string Describe() const override;

  const std::string& root() const { return root_; }

  // True for names WriteFileAtomic uses while writing ("<name>.tmp.<pid>.<n>").
  static bool IsTemporaryName(absl::string_view filename);

 private:
  std::string PathOf(absl::string_view key) const;
  absl::Status CheckWritableKey(absl::string_view key) const;

  std::string root_;
  size_t chunk_bytes_;
};

}  // namespace windquant::store

#endif  // WINDQUANT_COMMON_STORE_FILE_ARTIFACT_STORE_H_
