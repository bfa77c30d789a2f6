// S3ArtifactStore: artifacts as objects of an S3-compatible bucket (AWS,
// MinIO, moto, ...) under an optional key prefix, over libcurl with our own
// SigV4 signing (sigv4_signer.h). Every request carries the SHA-256 of its
// body in x-amz-content-sha256 (never UNSIGNED-PAYLOAD). A single PutObject
// is atomic on S3, so readers see the old or the new object.
//
// Files (PutFile, GetToFile) stream between disk and network, never held in
// memory: PutFile hashes the file (or each part) in 1 MiB reads, then sends
// it from the file with CURLOPT_READFUNCTION. Files up to
// S3Options::multipart_threshold_bytes go as one PutObject; larger ones as a
// multipart upload (CreateMultipartUpload, UploadPart per part with the
// retries of every request, CompleteMultipartUpload), which is aborted
// (AbortMultipartUpload) on any failure, so no orphan parts stay billed and
// the object appears only once complete. GetToFile streams the body into a
// temporary file (base::AtomicFileWriter) renamed on success.
// Memory per transfer: ~1 MiB of buffers plus libcurl's, whatever the size.
//
// Errors: NOT_FOUND (404), PERMISSION_DENIED (401/403), INVALID_ARGUMENT (400),
// FAILED_PRECONDITION (409/412), UNAVAILABLE (connection failures, 429, 5xx;
// retried up to S3Options::max_attempts first), DEADLINE_EXCEEDED (timeouts).
// Messages name the method, the s3:// object, the HTTP status and the S3
// error code; they never contain the secret key.
// Thread-safe: each call uses its own curl handle.
#ifndef WINDQUANT_COMMON_STORE_S3_ARTIFACT_STORE_H_
#define WINDQUANT_COMMON_STORE_S3_ARTIFACT_STORE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/store/artifact_store.h"
#include "common/store/s3_multipart.h"
#include "common/store/sigv4_signer.h"

struct curl_slist;  // libcurl's header list

namespace windquant::store {

// S3 bucket naming rules (3-63 chars of [a-z0-9.-], alphanumeric ends).
bool IsValidBucketName(absl::string_view bucket);

class S3ArtifactStore : public ArtifactStore {
 public:
  // INVALID_ARGUMENT for a bad bucket, endpoint URL or missing credentials.
  static absl::StatusOr<std::unique_ptr<ArtifactStore>> Create(std::string bucket,
                                                               std::string prefix,
                                                               S3Options options);

  absl::Status Put(absl::string_view key, absl::string_view bytes) override;
  absl::StatusOr<std::string> Get(absl::string_view key) override;
  absl::StatusOr<base::FileDigest> PutFile(absl::string_view key,
                                           const std::string& local_path) override;
  absl::StatusOr<base::FileDigest> GetToFile(absl::string_view key,
                                             const std::string& local_path) override;
  absl::StatusOr<std::vector<std::string>> List(absl::string_view prefix) override;
  absl::StatusOr<bool> Exists(absl::string_view key) override;
  absl::Status Delete(absl::string_view key) override;
  absl::Status CheckExists() override;
  std::string Describe() const override;

  // CreateBucket; OK if this account already owns it.
  absl::Status CreateBucket();
  // Multipart uploads under this store's prefix that were started and
  // neither completed nor aborted (first 1000), keys relative to the prefix:
  // for checks that failed uploads leave nothing behind.
  absl::StatusOr<std::vector<S3OpenUpload>> ListOpenUploads();

 private:
  using Query = std::vector<std::pair<std::string, std::string>>;
  struct Request {
    std::string method;
    std::string object_key;  // full key in the bucket ("" for bucket-level calls)
    Query query;
    absl::string_view body;  // in-memory body, unless body_fd >= 0
    // A file range as the body instead, with its precomputed SHA-256 (hex).
    int body_fd = -1;
    int64_t body_offset = 0, body_length = 0;
    std::string body_sha256;
    // When set, a 2xx response body goes into this file instead of memory.
    base::AtomicFileWriter* sink = nullptr;
    std::string local_path;  // the file of body_fd / sink, for messages
  };
  struct Response {
    long http_status = 0;
    std::string body;  // (bounded to the first MiB when a sink is set)
    std::string etag;  // the ETag response header, quotes kept
    int64_t content_length = -1;
  };
  S3ArtifactStore(std::string bucket, std::string prefix, S3Options options, std::string scheme,
                  std::string host);

  absl::StatusOr<Response> Send(const std::string& method, const std::string& object_key,
                                const Query& query, absl::string_view body) const;
  // With the retries of transient failures (a sink is emptied before each).
  absl::StatusOr<Response> Send(const Request& request) const;
  absl::StatusOr<Response> SendOnce(const Request& request) const;
  std::string Url(const Request& request, std::string* canonical_path) const;
  struct curl_slist* SignedHeaders(const Request& request, const std::string& path) const;
  absl::StatusOr<base::FileDigest> PutSingle(const std::string& full_key, int fd, int64_t size,
                                             const std::string& local_path) const;
  absl::StatusOr<base::FileDigest> PutMultipart(const std::string& full_key, int fd, int64_t size,
                                                const std::string& local_path) const;
  absl::Status UploadParts(const std::string& full_key, const std::string& upload_id, int fd,
                           int64_t size, const std::string& local_path,
                           base::Sha256Hasher* whole) const;
  absl::Status ErrorFor(const std::string& method, const std::string& object_key,
                        const Response& response) const;
  std::string FullKey(absl::string_view key) const;

  std::string bucket_;
  std::string prefix_;  // no trailing '/', may be empty
  S3Options options_;
  std::string scheme_;  // "http" / "https"
  std::string host_;    // host[:port] of requests (includes the bucket if virtual-hosted)
  SigV4Signer signer_;
};

}  // namespace windquant::store

#endif  // WINDQUANT_COMMON_STORE_S3_ARTIFACT_STORE_H_
