#include "common/store/artifact_store.h"

#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/store/file_artifact_store.h"
#include "common/store/s3_artifact_store.h"

namespace windquant::store {
namespace {

absl::Status KeyError(absl::string_view what, absl::string_view key, absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(what, " '", absl::CHexEscape(key), "': ", rule));
}

// Shared rules of keys and prefixes; `allow_trailing_slash` for prefixes.
absl::Status ValidatePath(absl::string_view what, absl::string_view key,
                          bool allow_trailing_slash) {
  if (key.size() > kMaxArtifactKeyBytes) {
    return KeyError(what, key.substr(0, 64),
                    absl::StrCat("longer than ", kMaxArtifactKeyBytes, " bytes"));
  }
  for (unsigned char c : key) {
    if (c < 0x20 || c == 0x7f) return KeyError(what, key, "control character not allowed");
    if (c == '\\') return KeyError(what, key, "backslash not allowed");
  }
  if (absl::StartsWith(key, "/")) return KeyError(what, key, "absolute path not allowed");
  absl::string_view body = key;
  if (allow_trailing_slash && absl::EndsWith(body, "/")) body.remove_suffix(1);
  if (body.empty()) return KeyError(what, key, "empty");
  for (absl::string_view segment : absl::StrSplit(body, '/')) {
    if (segment.empty()) return KeyError(what, key, "empty path segment not allowed");
    if (segment == "." || segment == "..") {
      return KeyError(what, key, absl::StrCat("'", segment, "' segment not allowed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<base::FileDigest> ArtifactStore::PutFile(absl::string_view key,
                                                        const std::string& local_path) {
  WQ_ASSIGN_OR_RETURN(std::string bytes, base::ReadFile(local_path));
  WQ_RETURN_IF_ERROR(Put(key, bytes));
  return base::FileDigest{static_cast<int64_t>(bytes.size()), base::Sha256Hex(bytes)};
}

absl::StatusOr<base::FileDigest> ArtifactStore::GetToFile(absl::string_view key,
                                                          const std::string& local_path) {
  WQ_ASSIGN_OR_RETURN(std::string bytes, Get(key));
  base::AtomicFileWriter writer;
  WQ_RETURN_IF_ERROR(writer.Open(local_path));
  WQ_RETURN_IF_ERROR(writer.Append(bytes));
  return writer.Commit();
}

absl::Status ValidateArtifactKey(absl::string_view key) {
  return ValidatePath("artifact key", key, /*allow_trailing_slash=*/false);
}

absl::Status ValidateArtifactPrefix(absl::string_view prefix) {
  if (prefix.empty()) return absl::OkStatus();
  return ValidatePath("artifact prefix", prefix, /*allow_trailing_slash=*/true);
}

absl::StatusOr<std::unique_ptr<ArtifactStore>> OpenArtifactStore(absl::string_view uri,
                                                                 const S3Options& s3) {
  if (uri.empty()) uri = kDefaultStoreUri;
  if (absl::StartsWith(uri, "s3://")) {
    absl::string_view rest = uri.substr(5);
    const size_t slash = rest.find('/');
    std::string bucket(rest.substr(0, slash));
    std::string prefix;
    if (slash != absl::string_view::npos) {
      prefix = std::string(rest.substr(slash + 1));
      while (absl::EndsWith(prefix, "/")) prefix.pop_back();
    }
    if (!IsValidBucketName(bucket)) {
      return absl::InvalidArgumentError(
          absl::StrCat("store URI '", uri, "': bucket must be 3-63 characters of [a-z0-9.-]"));
    }
    if (!prefix.empty()) {
      absl::Status st = ValidateArtifactKey(prefix);
      if (!st.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("store URI '", uri, "': ", st.message()));
      }
    }
    return S3ArtifactStore::Create(bucket, prefix, s3);
  }
  std::string path;
  if (absl::StartsWith(uri, "file://")) {
    path = std::string(uri.substr(7));
    if (!absl::StartsWith(path, "/")) {
      return absl::InvalidArgumentError(
          absl::StrCat("store URI '", uri, "': file:// needs an absolute path (file:///abs/path)"));
    }
  } else if (absl::StrContains(uri, "://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("store URI '", uri, "': unsupported scheme (use file:// or s3://)"));
  } else {
    path = std::string(uri);
  }
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("store URI '", uri, "': ", ec.message()));
  return std::unique_ptr<ArtifactStore>(new FileArtifactStore(abs.lexically_normal().string()));
}

}  // namespace windquant::store
