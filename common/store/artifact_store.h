// ArtifactStore: a flat key -> bytes store for run outputs (plans, checkpoints,
// reports), with a local-directory backend (`file://`) and an S3-compatible
// backend (`s3://`, SigV4). See DESIGN.md section 6 ("Artifact store").
//
// Keys are relative, '/'-separated paths validated by ValidateArtifactKey, so
// no key can leave the store's root directory or bucket prefix.
// Implementations are thread-compatible unless they say otherwise.
#ifndef WINDQUANT_COMMON_STORE_ARTIFACT_STORE_H_
#define WINDQUANT_COMMON_STORE_ARTIFACT_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace windquant::store {

// Longest key accepted (S3's own limit on object keys).
inline constexpr size_t kMaxArtifactKeyBytes = 1024;

// OK if `key` is a safe relative key: non-empty, at most kMaxArtifactKeyBytes,
// '/'-separated segments that are all non-empty and neither "." nor "..", no
// leading '/', no backslash, no control characters (< 0x20 or 0x7f).
// Otherwise INVALID_ARGUMENT naming the key (escaped) and the rule broken.
absl::Status ValidateArtifactKey(absl::string_view key);

// Like ValidateArtifactKey for a List() prefix: the empty prefix is allowed,
// and so is a trailing '/' ("plans/").
absl::Status ValidateArtifactPrefix(absl::string_view prefix);

class ArtifactStore {
 public:
  virtual ~ArtifactStore() = default;

  // Stores `bytes` under `key`, replacing any previous object. Readers see
  // either the old or the new object, never a partial one.
  virtual absl::Status Put(absl::string_view key, absl::string_view bytes) = 0;
  // The object's bytes; NOT_FOUND naming the key when absent.
  virtual absl::StatusOr<std::string> Get(absl::string_view key) = 0;
  // All keys that start with `prefix` (recursive, no delimiter), sorted.
  virtual absl::StatusOr<std::vector<std::string>> List(absl::string_view prefix) = 0;
  virtual absl::StatusOr<bool> Exists(absl::string_view key) = 0;
  // Removes the object; deleting an absent key is OK (as in S3).
  virtual absl::Status Delete(absl::string_view key) = 0;
  // "file:///abs/root" or "s3://bucket/prefix", for messages.
  virtual std::string Describe() const = 0;
};

// Connection settings of the S3 backend. Libraries never read the
// environment; the CLI fills this from flags and AWS_* variables.
struct S3Options {
  // "http://127.0.0.1:9000" for MinIO/moto/...; empty = AWS
  // (https://s3.<region>.amazonaws.com, virtual-hosted addressing).
  std::string endpoint_url;
  std::string region = "us-east-1";
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // optional (x-amz-security-token)
  // Path-style URLs (endpoint/bucket/key). Forced on for custom endpoints.
  bool path_style = false;
  int64_t connect_timeout_ms = 5000;
  int64_t request_timeout_ms = 120000;
  // Attempts for transient failures (connection errors, HTTP 500/502/503/504).
  int max_attempts = 3;
  // Keys per ListObjectsV2 page (S3 caps it at 1000); small values in tests
  // exercise continuation tokens.
  int list_max_keys = 1000;
};

// Default store when no URI is given.
inline constexpr char kDefaultStoreUri[] = "./artifacts";

// Opens a store from a URI: "file:///abs/path", a plain path (relative paths
// resolve against the current directory, e.g. "./artifacts"), or
// "s3://bucket[/prefix]" using `s3`. INVALID_ARGUMENT naming the URI on a
// malformed URI or bad options.
absl::StatusOr<std::unique_ptr<ArtifactStore>> OpenArtifactStore(absl::string_view uri,
                                                                 const S3Options& s3 = {});

}  // namespace windquant::store

#endif  // WINDQUANT_COMMON_STORE_ARTIFACT_STORE_H_
