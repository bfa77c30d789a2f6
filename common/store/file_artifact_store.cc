#include "common/store/file_artifact_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"

namespace windquant::store {
namespace fs = std::filesystem;

FileArtifactStore::FileArtifactStore(std::string root, size_t chunk_bytes)
    : root_(std::move(root)), chunk_bytes_(chunk_bytes) {
  while (root_.size() > 1 && absl::EndsWith(root_, "/")) root_.pop_back();
}

std::string FileArtifactStore::Describe() const { return absl::StrCat("file://", root_); }

std::string FileArtifactStore::PathOf(absl::string_view key) const {
  return absl::StrCat(root_, "/", key);
}

bool FileArtifactStore::IsTemporaryName(absl::string_view filename) {
  // base::WriteFileAtomic writes "<path>.tmp.<pid>.<random>" and renames it.
  const size_t pos = filename.rfind(".tmp.");
  if (pos == absl::string_view::npos) return false;
  absl::string_view tail = filename.substr(pos + 5);
  const size_t dot = tail.find('.');
  if (dot == absl::string_view::npos || dot == 0 || dot + 1 == tail.size()) return false;
  auto all_digits = [](absl::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(c); });
  };
  return all_digits(tail.substr(0, dot)) && all_digits(tail.substr(dot + 1));
}

absl::Status FileArtifactStore::CheckWritableKey(absl::string_view key) const {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  if (IsTemporaryName(fs::path(std::string(key)).filename().string())) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact key '", key, "': name is reserved for temporary files"));
  }
  return absl::OkStatus();
}

absl::Status FileArtifactStore::Put(absl::string_view key, absl::string_view bytes) {
  WQ_RETURN_IF_ERROR(CheckWritableKey(key));
  return base::WriteFileAtomic(PathOf(key), bytes);
}

absl::StatusOr<base::FileDigest> FileArtifactStore::PutFile(absl::string_view key,
                                                            const std::string& local_path) {
  WQ_RETURN_IF_ERROR(CheckWritableKey(key));
  return base::CopyFileAtomic(local_path, PathOf(key), chunk_bytes_);
}

absl::StatusOr<base::FileDigest> FileArtifactStore::GetToFile(absl::string_view key,
                                                              const std::string& local_path) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  const std::string path = PathOf(key);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat(Describe(), ": no artifact '", key, "'"));
  }
  return base::CopyFileAtomic(path, local_path, chunk_bytes_);
}

absl::StatusOr<std::string> FileArtifactStore::Get(absl::string_view key) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  const std::string path = PathOf(key);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat(Describe(), ": no artifact '", key, "'"));
  }
  return base::ReadFile(path);
}

absl::StatusOr<bool> FileArtifactStore::Exists(absl::string_view key) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  std::error_code ec;
  return fs::is_regular_file(PathOf(key), ec);
}

absl::Status FileArtifactStore::Delete(absl::string_view key) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  std::error_code ec;
  fs::path path(PathOf(key));
  if (fs::is_directory(path, ec)) return absl::OkStatus();  // not an object
  if (!fs::remove(path, ec) && ec) {
    return absl::InternalError(absl::StrCat(path.string(), ": cannot delete: ", ec.message()));
  }
  // Prune now-empty parent directories (best effort), never the root itself.
  for (fs::path dir = path.parent_path(); dir.string().size() > root_.size();
       dir = dir.parent_path()) {
    if (!fs::is_empty(dir, ec) || ec || !fs::remove(dir, ec)) break;
  }
  return absl::OkStatus();
}

absl::Status FileArtifactStore::CheckExists() {
  std::error_code ec;
  const fs::file_status st = fs::status(root_, ec);
  if (!fs::exists(st)) {
    return absl::NotFoundError(absl::StrCat(Describe(), ": store root does not exist"));
  }
  if (!fs::is_directory(st)) {
    return absl::NotFoundError(absl::StrCat(Describe(), ": store root is not a directory"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FileArtifactStore::List(absl::string_view prefix) {
  WQ_RETURN_IF_ERROR(ValidateArtifactPrefix(prefix));
  std::vector<std::string> keys;
  // Walk only the deepest directory the prefix names.
  const size_t last_slash = prefix.rfind('/');
  const std::string start =
      last_slash == absl::string_view::npos ? root_ : PathOf(prefix.substr(0, last_slash));
  std::error_code ec;
  if (!fs::is_directory(start, ec)) return keys;
  fs::recursive_directory_iterator it(start, fs::directory_options::none, ec), end;
  if (ec) return absl::InternalError(absl::StrCat(start, ": cannot list: ", ec.message()));
  for (; it != end; it.increment(ec)) {
    if (ec) return absl::InternalError(absl::StrCat(start, ": cannot list: ", ec.message()));
    if (!it->is_regular_file(ec)) continue;
    if (IsTemporaryName(it->path().filename().string())) continue;
    std::string key = fs::relative(it->path(), root_, ec).generic_string();
    if (ec) continue;
    if (absl::StartsWith(key, prefix) && ValidateArtifactKey(key).ok()) keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace windquant::store
