// AtomicFileWriter: writes a file from pieces (a download, a chunked copy)
// into a temporary sibling "<path>.tmp.<pid>.<n>" and renames it over `path`
// only on Commit, so readers never see a partial file and a failed transfer
// leaves none (the destructor removes an uncommitted temporary). It hashes
// what it writes, so the caller gets size and SHA-256 without a second read.
// Memory: none beyond the caller's pieces. Thread-compatible.
#ifndef WINDQUANT_COMMON_BASE_ATOMIC_FILE_WRITER_H_
#define WINDQUANT_COMMON_BASE_ATOMIC_FILE_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/base/sha256.h"

namespace windquant::base {

// Chunk of the streaming helpers below: what they hold in memory at once.
inline constexpr size_t kStreamChunkBytes = size_t{1} << 20;

// Size and lowercase hex SHA-256 of a file's bytes.
struct FileDigest {
  int64_t size_bytes = 0;
  std::string sha256_hex;
};

class AtomicFileWriter {
 public:
  AtomicFileWriter() = default;
  ~AtomicFileWriter();  // removes the temporary unless committed
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Creates the temporary next to `path` (and `path`'s parent directories).
  absl::Status Open(const std::string& path);
  absl::Status Append(absl::string_view data);
  // Drops what was written so far (a transfer that starts over).
  absl::Status Truncate();
  // fsync, close and rename onto the path; the digest of what was written.
  absl::StatusOr<FileDigest> Commit();

  int64_t bytes_written() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void Discard();

  std::string path_, tmp_;
  int fd_ = -1;
  int64_t size_ = 0;
  Sha256Hasher hasher_;
};

// Size and SHA-256 of a file, read `chunk_bytes` at a time.
absl::StatusOr<FileDigest> DigestFile(const std::string& path,
                                      size_t chunk_bytes = kStreamChunkBytes);

// Copies `src` to `dst` through an AtomicFileWriter, `chunk_bytes` at a time:
// `dst` is the whole of `src` or untouched. The digest of the bytes copied.
absl::StatusOr<FileDigest> CopyFileAtomic(const std::string& src, const std::string& dst,
                                          size_t chunk_bytes = kStreamChunkBytes);

}  // namespace windquant::base

#endif  // WINDQUANT_COMMON_BASE_ATOMIC_FILE_WRITER_H_
