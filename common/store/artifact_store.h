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
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/base/atomic_file_writer.h"

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

  // Streaming forms of Put and Get for files of any size (checkpoints of
  // tens of GB): the bytes go between the local file and the store in
  // pieces, so memory stays bounded (a chunk or a multipart part) whatever
  // the file size. Both return the size and SHA-256 of the bytes moved,
  // computed while streaming, so callers need no second pass to checksum.
  //
  // PutFile stores the contents of the regular file `local_path` under `key`
  // with Put's atomicity (readers see the old or the whole new object; a
  // failed transfer leaves no new object behind). The file must not change
  // while it is uploaded (a changed size fails the transfer).
  // The default reads the whole file and calls Put: backends override it.
  virtual absl::StatusOr<base::FileDigest> PutFile(absl::string_view key,
                                                   const std::string& local_path);
  // GetToFile writes the object into a temporary sibling of `local_path`,
  // checks the byte count against what the store announced, and renames it
  // onto `local_path` (created with its parent folders, replaced if present);
  // on any failure `local_path` is untouched and no temporary remains.
  // NOT_FOUND naming the key when absent. The default calls Get.
  virtual absl::StatusOr<base::FileDigest> GetToFile(absl::string_view key,
                                                     const std::string& local_path);
  // All keys that start with `prefix` (recursive, no delimiter), sorted.
  virtual absl::StatusOr<std::vector<std::string>> List(absl::string_view prefix) = 0;
  virtual absl::StatusOr<bool> Exists(absl::string_view key) = 0;
  // Removes the object; deleting an absent key is OK (as in S3).
  virtual absl::Status Delete(absl::string_view key) = 0;
  // OK when the store's location exists: the root folder (file://); the bucket and,
  // with a prefix, at least one object under it (s3://, where folders do not exist
  // apart from their objects). NOT_FOUND naming the location otherwise. Readers
  // (`plans list/show/pull`) call it so that a mistyped store is an error, never an
  // empty listing; writers create the location. The default (in-memory stores): OK.
  virtual absl::Status CheckExists() { return absl::OkStatus(); }
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

  // PutFile: files up to this size go up as one streamed PutObject, larger
  // ones as a multipart upload. At most kS3MaxSinglePutBytes (5 GiB, S3's
  // limit on one PUT).
  int64_t multipart_threshold_bytes = int64_t{64} << 20;
  // Part size of multipart uploads, in [5 MiB, 5 GiB] (S3's limits for all
  // parts but the last). A file that would need more than S3's 10,000 parts
  // gets larger parts (size / 10,000 rounded up to a MiB): 64 MiB parts
  // carry files up to 625 GiB, e.g. a 70B fake-quant checkpoint in FP32
  // (~280 GB) as ~4,200 parts.
  int64_t part_size_bytes = int64_t{64} << 20;
  // A streamed transfer (PutFile, GetToFile) fails DEADLINE_EXCEEDED when no
  // byte moved for this long; it has no overall limit (request_timeout_ms
  // would cut off a large object), every other request keeps that one.
  int64_t stall_timeout_ms = 60000;
  // Called after each uploaded part of a multipart upload with the bytes sent
  // so far and the file size: progress for long uploads. A non-OK status
  // cancels the upload (it is aborted, like any failed one) and is returned.
  std::function<absl::Status(absl::string_view key, int64_t done, int64_t total)> on_part;
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
