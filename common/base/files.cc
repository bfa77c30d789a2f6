#include "common/base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include <openssl/sha.h>

#include "absl/strings/str_cat.h"

namespace windquant::base {

// Opens `path` for reading without blocking on a FIFO and checks that it is a
// regular file. Returns the descriptor (blocking again) or the error.
absl::StatusOr<int> OpenRegularFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    if (err == ELOOP) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": symlink loop"));
    }
    if (err == EISDIR) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a file"));
    }
    return absl::InternalError(absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode), fifo = S_ISFIFO(st.st_mode);
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        path, dir ? ": is a directory, not a file"
                  : (fifo ? ": is a FIFO, not a regular file" : ": not a regular file")));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

// Only regular files (or symlinks to them) are read: a FIFO would block the
// open or the read forever, a symlink loop would throw from std::filesystem.
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  absl::StatusOr<int> fd = OpenRegularFile(path);
  if (!fd.ok()) return fd.status();
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(*fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string err = std::strerror(errno);
      ::close(*fd);
      return absl::InternalError(absl::StrCat(path, ": read failed: ", err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(*fd);
  return out;
}

absl::Status WriteFileAtomic(const std::string& path, absl::string_view data) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::random_device rd;
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid(), ".", rd());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return absl::InternalError(absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat(path, ": write failed: ", err));
    }
    off += static_cast<size_t>(n);
  }
  // A full disk may only show here (delayed allocation, network file systems).
  const bool synced = ::fsync(fd) == 0;
  const int sync_errno = errno;
  const bool closed = ::close(fd) == 0;  // always, also after a failed fsync
  if (!synced || !closed) {
    const std::string err = std::strerror(synced ? errno : sync_errno);
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat(path, ": fsync/close failed: ", err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat(path, ": rename failed: ", err));
  }
  return absl::OkStatus();
}

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  static const char* kHex = "0123456789abcdef";
  std::string out(2 * SHA256_DIGEST_LENGTH, '0');
  for (int i = 0; i < SHA256_DIGEST_LENGTH; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  return out;
}

// A dangling or looping symlink counts as existing: opening it gives the
// error that names it. Never throws.
bool PathExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::symlink_status(path, ec));
}

}  // namespace windquant::base
