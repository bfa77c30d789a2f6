// S3ArtifactStore: artifacts as objects of an S3-compatible bucket (AWS,
// MinIO, moto, ...) under an optional key prefix, over libcurl with our own
// SigV4 signing (sigv4_signer.h). Every request carries the SHA-256 of its
// body in x-amz-content-sha256 (never UNSIGNED-PAYLOAD). A single PutObject
// is atomic on S3, so readers see the old or the new object.
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
#include "common/store/sigv4_signer.h"

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
  absl::StatusOr<std::vector<std::string>> List(absl::string_view prefix) override;
  absl::StatusOr<bool> Exists(absl::string_view key) override;
  absl::Status Delete(absl::string_view key) override;
  std::string Describe() const override;

  // CreateBucket; OK if this account already owns it.
  absl::Status CreateBucket();

 private:
  struct Response {
    long http_status = 0;
    std::string body;
  };
  S3ArtifactStore(std::string bucket, std::string prefix, S3Options options, std::string scheme,
                  std::string host);

  // `object_key` is the full key in the bucket ("" for bucket-level calls).
  absl::StatusOr<Response> Send(const std::string& method, const std::string& object_key,
                                const std::vector<std::pair<std::string, std::string>>& query,
                                absl::string_view body) const;
  absl::StatusOr<Response> SendOnce(const std::string& method, const std::string& object_key,
                                    const std::vector<std::pair<std::string, std::string>>& query,
                                    absl::string_view body) const;
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
