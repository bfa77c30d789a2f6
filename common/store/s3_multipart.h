// The pieces of S3 multipart upload that are pure functions (part sizing,
// request and response XML), kept apart from S3ArtifactStore's HTTP so they
// can be unit-tested. Facts from the Amazon S3 API reference: a single
// PutObject carries at most 5 GiB; a multipart upload has 1..10,000 parts,
// each 5 MiB..5 GiB except the last, which may be smaller; the upload is
// committed by CompleteMultipartUpload with every part's number and ETag in
// ascending order, and its stored parts are freed by AbortMultipartUpload.
#ifndef WINDQUANT_COMMON_STORE_S3_MULTIPART_H_
#define WINDQUANT_COMMON_STORE_S3_MULTIPART_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace windquant::store {

inline constexpr int64_t kS3MinPartBytes = int64_t{5} << 20;
inline constexpr int64_t kS3MaxPartBytes = int64_t{5} << 30;
inline constexpr int64_t kS3MaxSinglePutBytes = int64_t{5} << 30;
inline constexpr int64_t kS3MaxParts = 10000;
inline constexpr int64_t kS3MaxObjectBytes = int64_t{5} << 40;

// The part size for a file of `file_bytes`: `configured`, raised (to whole
// MiB) when the file would otherwise need more than kS3MaxParts parts.
// INVALID_ARGUMENT for a file over kS3MaxObjectBytes (5 TiB).
absl::StatusOr<int64_t> S3PartSizeFor(int64_t file_bytes, int64_t configured);

// One uploaded part: its 1-based number and the ETag UploadPart returned
// (with its quotes, as S3 sends it).
struct S3Part {
  int number = 0;
  std::string etag;
};

// The CompleteMultipartUpload request body listing `parts` (in order).
std::string CompleteMultipartUploadXml(const std::vector<S3Part>& parts);

// The UploadId of a CreateMultipartUpload response; DATA_LOSS if absent.
absl::StatusOr<std::string> ParseUploadId(absl::string_view xml);

// An open (neither completed nor aborted) multipart upload.
struct S3OpenUpload {
  std::string key;  // full key in the bucket
  std::string upload_id;
};

// The <Upload> entries of a ListMultipartUploads response.
absl::StatusOr<std::vector<S3OpenUpload>> ParseListMultipartUploads(absl::string_view xml);

}  // namespace windquant::store

#endif  // WINDQUANT_COMMON_STORE_S3_MULTIPART_H_
