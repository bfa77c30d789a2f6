// S3ArtifactStore's streamed file transfers (PutFile, GetToFile, multipart
// upload), apart from s3_artifact_store.cc, which holds the requests.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/store/s3_artifact_store.h"
#include "common/store/s3_xml.h"

namespace windquant::store {
namespace {

// Closes a descriptor on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// SHA-256 (hex) of `length` bytes of `fd` from `offset`, read a chunk at a
// time; also fed to `whole` when given. INTERNAL naming `path` on a short read.
absl::StatusOr<std::string> HashRange(int fd, int64_t offset, int64_t length,
                                      const std::string& path, base::Sha256Hasher* whole) {
  base::Sha256Hasher range;
  std::vector<char> buf(std::min<int64_t>(length, base::kStreamChunkBytes));
  while (length > 0) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(length, buf.size()));
    const ssize_t n = ::pread(fd, buf.data(), want, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::InternalError(absl::StrCat(
          path, ": read failed: ", n < 0 ? std::strerror(errno) : "file shrank while uploading"));
    }
    const absl::string_view piece(buf.data(), static_cast<size_t>(n));
    range.Update(piece);
    if (whole != nullptr) whole->Update(piece);
    offset += n;
    length -= n;
  }
  return range.FinishHex();
}

}  // namespace

absl::StatusOr<base::FileDigest> S3ArtifactStore::PutFile(absl::string_view key,
                                                          const std::string& local_path) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  WQ_ASSIGN_OR_RETURN(int fd, base::OpenRegularFile(local_path));
  FdCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return absl::InternalError(absl::StrCat(local_path, ": stat failed: ", std::strerror(errno)));
  }
  const int64_t size = static_cast<int64_t>(st.st_size);
  const std::string full = FullKey(key);
  if (size <= options_.multipart_threshold_bytes) return PutSingle(full, fd, size, local_path);
  return PutMultipart(full, fd, size, local_path);
}

absl::StatusOr<base::FileDigest> S3ArtifactStore::PutSingle(const std::string& full_key, int fd,
                                                            int64_t size,
                                                            const std::string& local_path) const {
  Request request;
  request.method = "PUT";
  request.object_key = full_key;
  request.body_fd = fd;
  request.body_length = size;
  request.local_path = local_path;
  WQ_ASSIGN_OR_RETURN(request.body_sha256, HashRange(fd, 0, size, local_path, nullptr));
  WQ_ASSIGN_OR_RETURN(Response r, Send(request));
  if (r.http_status != 200) return ErrorFor("PUT", full_key, r);
  return base::FileDigest{size, request.body_sha256};
}

absl::StatusOr<base::FileDigest> S3ArtifactStore::PutMultipart(
    const std::string& full_key, int fd, int64_t size, const std::string& local_path) const {
  WQ_ASSIGN_OR_RETURN(Response created, Send("POST", full_key, {{"uploads", ""}}, ""));
  if (created.http_status != 200) {
    return ErrorFor("POST (CreateMultipartUpload)", full_key, created);
  }
  absl::StatusOr<std::string> upload_id = ParseUploadId(created.body);
  if (!upload_id.ok()) {
    return absl::DataLossError(
        absl::StrCat(Describe(), ": ", full_key, ": ", upload_id.status().message()));
  }
  base::Sha256Hasher whole;
  absl::Status st = UploadParts(full_key, *upload_id, fd, size, local_path, &whole);
  if (st.ok()) return base::FileDigest{size, whole.FinishHex()};
  // Failed or cancelled: free the parts stored so far, so nothing is left
  // billed and invisible.
  absl::StatusOr<Response> aborted = Send("DELETE", full_key, {{"uploadId", *upload_id}}, "");
  const bool abort_ok =
      aborted.ok() &&
      (aborted->http_status == 204 || aborted->http_status == 200 || aborted->http_status == 404);
  if (abort_ok) return st;
  return absl::Status(st.code(),
                      absl::StrCat(st.message(), "; AbortMultipartUpload failed too (",
                                   aborted.ok() ? absl::StrCat("HTTP ", aborted->http_status)
                                                : aborted.status().message(),
                                   "): upload ", *upload_id, " stays open"));
}

absl::Status S3ArtifactStore::UploadParts(const std::string& full_key, const std::string& upload_id,
                                          int fd, int64_t size, const std::string& local_path,
                                          base::Sha256Hasher* whole) const {
  WQ_ASSIGN_OR_RETURN(const int64_t part_size, S3PartSizeFor(size, options_.part_size_bytes));
  std::vector<S3Part> parts;
  for (int64_t offset = 0; offset < size; offset += part_size) {
    Request request;
    request.method = "PUT";
    request.object_key = full_key;
    const int number = static_cast<int>(parts.size()) + 1;
    request.query = {{"partNumber", absl::StrCat(number)}, {"uploadId", upload_id}};
    request.body_fd = fd;
    request.body_offset = offset;
    request.body_length = std::min(part_size, size - offset);
    request.local_path = local_path;
    WQ_ASSIGN_OR_RETURN(request.body_sha256,
                        HashRange(fd, offset, request.body_length, local_path, whole));
    WQ_ASSIGN_OR_RETURN(Response r, Send(request));  // retried per part
    const std::string what = absl::StrCat("PUT (UploadPart ", number, ")");
    if (r.http_status != 200) return ErrorFor(what, full_key, r);
    if (r.etag.empty()) {
      return absl::DataLossError(
          absl::StrCat("s3 ", what, " s3://", bucket_, "/", full_key, ": response has no ETag"));
    }
    parts.push_back({number, r.etag});
    if (options_.on_part) {
      WQ_RETURN_IF_ERROR(options_.on_part(full_key, offset + request.body_length, size));
    }
  }
  WQ_ASSIGN_OR_RETURN(Response done, Send("POST", full_key, {{"uploadId", upload_id}},
                                          CompleteMultipartUploadXml(parts)));
  // S3 may answer 200 and still fail the completion, with an <Error> body.
  if (done.http_status != 200 || !ParseS3Error(done.body).code.empty()) {
    return ErrorFor("POST (CompleteMultipartUpload)", full_key, done);
  }
  return absl::OkStatus();
}

absl::StatusOr<base::FileDigest> S3ArtifactStore::GetToFile(absl::string_view key,
                                                            const std::string& local_path) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  const std::string full = FullKey(key);
  base::AtomicFileWriter writer;  // removes its temporary unless committed
  WQ_RETURN_IF_ERROR(writer.Open(local_path));
  Request request;
  request.method = "GET";
  request.object_key = full;
  request.sink = &writer;
  request.local_path = local_path;
  WQ_ASSIGN_OR_RETURN(Response r, Send(request));
  if (r.http_status != 200) return ErrorFor("GET", full, r);
  if (r.content_length >= 0 && r.content_length != writer.bytes_written()) {
    return absl::DataLossError(absl::StrCat("s3 GET s3://", bucket_, "/", full, ": got ",
                                            writer.bytes_written(), " bytes of ",
                                            r.content_length));
  }
  return writer.Commit();
}

absl::StatusOr<std::vector<S3OpenUpload>> S3ArtifactStore::ListOpenUploads() {
  const std::string store_prefix = prefix_.empty() ? "" : absl::StrCat(prefix_, "/");
  WQ_ASSIGN_OR_RETURN(Response r, Send("GET", "", {{"uploads", ""}, {"prefix", store_prefix}}, ""));
  if (r.http_status != 200) return ErrorFor("GET (ListMultipartUploads)", "", r);
  absl::StatusOr<std::vector<S3OpenUpload>> uploads = ParseListMultipartUploads(r.body);
  if (!uploads.ok()) {
    return absl::Status(uploads.status().code(),
                        absl::StrCat(Describe(), ": ", uploads.status().message()));
  }
  for (S3OpenUpload& u : *uploads)
    u.key = u.key.substr(std::min(store_prefix.size(), u.key.size()));
  return uploads;
}

}  // namespace windquant::store
