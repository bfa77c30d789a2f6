#include "common/base/atomic_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"

namespace windquant::base {
namespace {

// Reads `path` chunk by chunk into `consume`; INTERNAL naming the path.
absl::Status ReadChunks(const std::string& path, size_t chunk_bytes,
                        const std::function<absl::Status(absl::string_view)>& consume) {
  absl::StatusOr<int> fd = OpenRegularFile(path);
  if (!fd.ok()) return fd.status();
  std::vector<char> buf(std::max<size_t>(chunk_bytes, 1));
  absl::Status st;
  while (st.ok()) {
    const ssize_t n = ::read(*fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = absl::InternalError(absl::StrCat(path, ": read failed: ", std::strerror(errno)));
      break;
    }
    if (n == 0) break;
    st = consume(absl::string_view(buf.data(), static_cast<size_t>(n)));
  }
  ::close(*fd);
  return st;
}

}  // namespace

AtomicFileWriter::~AtomicFileWriter() { Discard(); }

void AtomicFileWriter::Discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
}

absl::Status AtomicFileWriter::Open(const std::string& path) {
  Discard();
  path_ = path;
  size_ = 0;
  hasher_.Reset();
  std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::random_device rd;
  tmp_ = absl::StrCat(path, ".tmp.", getpid(), ".", rd());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const std::string err = std::strerror(errno);
    tmp_.clear();
    return absl::InternalError(absl::StrCat(path, ": cannot create temporary file: ", err));
  }
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Append(absl::string_view data) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": writer not open"));
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd_, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return absl::InternalError(absl::StrCat(path_, ": write failed: ", std::strerror(errno)));
    off += static_cast<size_t>(n);
  }
  hasher_.Update(data);
  size_ += static_cast<int64_t>(data.size());
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Truncate() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": writer not open"));
  if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0) {
    return absl::InternalError(absl::StrCat(path_, ": truncate failed: ", std::strerror(errno)));
  }
  size_ = 0;
  hasher_.Reset();
  return absl::OkStatus();
}

absl::StatusOr<FileDigest> AtomicFileWriter::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": writer not open"));
  const bool synced = ::fsync(fd_) == 0;
  const bool closed = ::close(fd_) == 0;
  fd_ = -1;
  if (!synced || !closed) {
    Discard();
    return absl::InternalError(absl::StrCat(path_, ": fsync/close failed"));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    Discard();
    return absl::InternalError(absl::StrCat(path_, ": rename failed: ", err));
  }
  tmp_.clear();
  return FileDigest{size_, hasher_.FinishHex()};
}

absl::StatusOr<FileDigest> DigestFile(const std::string& path, size_t chunk_bytes) {
  Sha256Hasher hasher;
  int64_t size = 0;
  absl::Status st = ReadChunks(path, chunk_bytes, [&](absl::string_view piece) {
    hasher.Update(piece);
    size += static_cast<int64_t>(piece.size());
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return FileDigest{size, hasher.FinishHex()};
}

absl::StatusOr<FileDigest> CopyFileAtomic(const std::string& src, const std::string& dst,
                                          size_t chunk_bytes) {
  // Opened first, so that a missing source creates nothing at `dst`.
  absl::StatusOr<int> probe = OpenRegularFile(src);
  if (!probe.ok()) return probe.status();
  ::close(*probe);
  AtomicFileWriter writer;
  absl::Status st = writer.Open(dst);
  if (!st.ok()) return st;
  st = ReadChunks(src, chunk_bytes, [&](absl::string_view piece) { return writer.Append(piece); });
  if (!st.ok()) return st;
  return writer.Commit();
}

}  // namespace windquant::base
