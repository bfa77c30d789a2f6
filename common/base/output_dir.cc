#include "common/base/output_dir.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::base {

absl::Status CheckOutputDir(const std::string& dir, bool replace) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) return absl::OkStatus();
  if (!fs::is_directory(st)) {
    return absl::AlreadyExistsError(absl::StrCat(dir, ": exists and is not a directory"));
  }
  if (!replace && !fs::is_empty(dir, ec)) {
    return absl::AlreadyExistsError(
        absl::StrCat(dir, ": exists and is not empty (replace it whole with --force)"));
  }
  return absl::OkStatus();
}

absl::Status WriteDirAtomic(const std::string& dir, bool replace,
                            const std::function<absl::Status(const std::string& tmp_dir)>& fill) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path target = fs::path(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();  // "out/" -> "out"
  WQ_RETURN_IF_ERROR(CheckOutputDir(dir, replace));
  const bool exists = fs::exists(fs::symlink_status(target, ec));
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  std::random_device rd;
  const std::string tmp = absl::StrCat(target.string(), ".tmp.", getpid(), ".", rd());
  if (!fs::create_directory(tmp, ec)) {
    return absl::InternalError(absl::StrCat(tmp, ": cannot create: ", ec.message()));
  }
  absl::Status filled = fill(tmp);
  if (!filled.ok()) {
    fs::remove_all(tmp, ec);
    return filled;
  }
  if (exists) {
    // Swap the complete new folder with the old one in one step, then drop
    // the old one (now at tmp).
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
      const std::string err = std::strerror(errno);
      fs::remove_all(tmp, ec);
      return absl::InternalError(absl::StrCat(dir, ": cannot replace: ", err));
    }
    fs::remove_all(tmp, ec);
    return absl::OkStatus();
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    fs::remove_all(tmp, ec);
    return absl::InternalError(absl::StrCat(dir, ": rename failed: ", err));
  }
  return absl::OkStatus();
}

}  // namespace windquant::base
