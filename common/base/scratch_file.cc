#include "common/base/scratch_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"

namespace windquant::base {

absl::StatusOr<std::unique_ptr<ScratchFile>> ScratchFile::Create(const std::string& dir) {
  const std::string where = dir.empty() ? "." : dir;
  std::error_code ec;
  std::filesystem::create_directories(where, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("scratch file: cannot create directory ", where, ": ", ec.message()));
  }
  int fd = open(where.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // No O_TMPFILE on this file system: a unique name, unlinked at once.
    std::string name = (std::filesystem::path(where) / "windquant-scratch-XXXXXX").string();
    std::vector<char> buf(name.begin(), name.end());
    buf.push_back('\0');
    fd = mkostemp(buf.data(), O_CLOEXEC);
    if (fd >= 0) unlink(buf.data());
  }
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("scratch file: cannot create a file in ", where, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<ScratchFile>(new ScratchFile(fd, where));
}

ScratchFile::~ScratchFile() { close(fd_); }

int64_t ScratchFile::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return size_;
}

absl::StatusOr<int64_t> ScratchFile::Append(const void* data, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const char* p = static_cast<const char*>(data);
  for (int64_t done = 0; done < bytes;) {
    const ssize_t n = pwrite(fd_, p + done, bytes - done, size_ + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      // Nothing after size_ counts: a later Append writes over the partial bytes.
      return absl::InternalError(absl::StrCat("scratch file in ", dir_, ": writing ", bytes,
                                              " bytes: ", std::strerror(err)));
    }
    done += n;
  }
  const int64_t at = size_;
  size_ += bytes;
  return at;
}

absl::Status ScratchFile::Read(int64_t offset, int64_t bytes, void* out) const {
  if (offset < 0 || bytes < 0 || offset + bytes > size()) {
    return absl::OutOfRangeError(absl::StrCat("scratch file in ", dir_, ": bytes [", offset, ", ",
                                              offset + bytes, ") past its end ", size()));
  }
  char* p = static_cast<char*>(out);
  for (int64_t done = 0; done < bytes;) {
    const ssize_t n = pread(fd_, p + done, bytes - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::InternalError(absl::StrCat("scratch file in ", dir_, ": reading ", bytes,
                                              " bytes at ", offset, ": ",
                                              n < 0 ? std::strerror(errno) : "unexpected end"));
    }
    done += n;
  }
  return absl::OkStatus();
}

}  // namespace windquant::base
