#include "common/base/location_check.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace windquant::base {
namespace {

enum class DirState { kFolder, kMissing, kNotFolder, kLoop, kError };

DirState StatDir(const std::string& dir, int* err) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    *err = errno;
    if (*err == ENOENT || *err == ENOTDIR) return DirState::kMissing;
    return *err == ELOOP ? DirState::kLoop : DirState::kError;
  }
  return S_ISDIR(st.st_mode) ? DirState::kFolder : DirState::kNotFolder;
}

}  // namespace

absl::Status CheckInputDir(const std::string& dir, absl::string_view what) {
  if (dir.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty path"));
  int err = 0;
  switch (StatDir(dir, &err)) {
    case DirState::kFolder:
      return absl::OkStatus();
    case DirState::kMissing:
      return absl::NotFoundError(absl::StrCat(what, ": ", dir, ": no such folder"));
    case DirState::kNotFolder:
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", dir, ": not a folder"));
    case DirState::kLoop:
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", dir, ": symlink loop"));
    case DirState::kError:
      break;
  }
  return absl::InternalError(absl::StrCat(what, ": ", dir, ": ", std::strerror(err)));
}

absl::Status CheckOutputParent(const std::string& path, absl::string_view what) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty path"));
  std::filesystem::path p = std::filesystem::path(path).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "out/" -> "out"
  const std::string parent = p.parent_path().string();
  if (parent.empty()) return absl::OkStatus();  // the current folder
  int err = 0;
  switch (StatDir(parent, &err)) {
    case DirState::kFolder:
      return absl::OkStatus();
    case DirState::kMissing:
      return absl::NotFoundError(absl::StrCat(what, ": ", path, ": parent folder ", parent,
                                              " does not exist (only the last folder of an "
                                              "output path is created)"));
    case DirState::kNotFolder:
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", path, ": parent ", parent, " is not a folder"));
    case DirState::kLoop:
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", path, ": parent ", parent, ": symlink loop"));
    case DirState::kError:
      break;
  }
  return absl::InternalError(absl::StrCat(what, ": ", path, ": ", std::strerror(err)));
}

}  // namespace windquant::base
