#include "common/store/s3_artifact_store.h"

#include <curl/curl.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/store/s3_xml.h"

namespace windquant::store {
namespace {

void GlobalCurlInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// What the curl callbacks of one request work on.
struct Transfer {
  CURL* curl = nullptr;
  // Upload body: memory, or `file_left` bytes of `fd` from `file_offset`.
  absl::string_view memory;
  size_t memory_offset = 0;
  int fd = -1;
  int64_t file_offset = 0, file_left = 0;
  std::string read_error;
  // Download: 2xx bodies into `sink` when set.
  base::AtomicFileWriter* sink = nullptr;
  std::string write_error;
  std::string* body = nullptr;
  std::string* etag = nullptr;
};

constexpr size_t kMaxBodyInMemoryWithSink = size_t{1} << 20;  // error documents

size_t WriteBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const absl::string_view piece(data, size * n);
  if (t->sink != nullptr) {
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) {
      absl::Status st = t->sink->Append(piece);
      if (!st.ok()) {
        t->write_error = std::string(st.message());
        return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
      }
      return piece.size();
    }
    if (t->body->size() >= kMaxBodyInMemoryWithSink) return piece.size();
  }
  t->body->append(piece.data(), piece.size());
  return piece.size();
}

size_t ReadBody(char* buffer, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  if (t->fd < 0) {
    const size_t len = std::min(size * n, t->memory.size() - t->memory_offset);
    std::memcpy(buffer, t->memory.data() + t->memory_offset, len);
    t->memory_offset += len;
    return len;
  }
  const size_t want = static_cast<size_t>(std::min<int64_t>(size * n, t->file_left));
  if (want == 0) return 0;
  ssize_t got;
  do {
    got = ::pread(t->fd, buffer, want, t->file_offset);
  } while (got < 0 && errno == EINTR);
  if (got <= 0) {
    t->read_error = got < 0 ? std::strerror(errno) : "file shrank while uploading";
    return CURL_READFUNC_ABORT;
  }
  t->file_offset += got;
  t->file_left -= got;
  return static_cast<size_t>(got);
}

size_t HeaderLine(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  absl::string_view line(data, size * n);
  const size_t colon = line.find(':');
  if (colon != absl::string_view::npos && absl::EqualsIgnoreCase(line.substr(0, colon), "etag")) {
    *t->etag = std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return size * n;
}

absl::StatusCode CodeForHttp(long status, absl::string_view s3_code) {
  if (s3_code == "RequestTimeout" || s3_code == "SlowDown") return absl::StatusCode::kUnavailable;
  if (s3_code == "BucketAlreadyOwnedByYou" || s3_code == "BucketAlreadyExists") {
    return absl::StatusCode::kAlreadyExists;
  }
  switch (status) {
    case 400:
      return absl::StatusCode::kInvalidArgument;
    case 401:
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
    case 412:
      return absl::StatusCode::kFailedPrecondition;
    case 416:
      return absl::StatusCode::kOutOfRange;
    case 408:
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kUnknown;
  }
}

bool Retryable(long http_status) {
  return http_status == 429 || http_status == 500 || http_status == 502 || http_status == 503 ||
         http_status == 504;
}

}  // namespace

bool IsValidBucketName(absl::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char c : bucket) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '.' || c == '-')) return false;
  }
  return absl::ascii_isalnum(bucket.front()) && absl::ascii_isalnum(bucket.back()) &&
         !absl::StrContains(bucket, "..");
}

absl::StatusOr<std::unique_ptr<ArtifactStore>> S3ArtifactStore::Create(std::string bucket,
                                                                       std::string prefix,
                                                                       S3Options options) {
  if (!IsValidBucketName(bucket)) {
    return absl::InvalidArgumentError(absl::StrCat("s3 bucket '", bucket, "': invalid name"));
  }
  if (!prefix.empty()) WQ_RETURN_IF_ERROR(ValidateArtifactKey(prefix));
  if (options.access_key_id.empty() || options.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("s3://", bucket,
                     ": missing credentials (access key id and secret access key; the CLI "
                     "reads AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)"));
  }
  if (options.region.empty()) options.region = "us-east-1";
  if (options.max_attempts < 1) options.max_attempts = 1;
  if (options.list_max_keys < 1 || options.list_max_keys > 1000) options.list_max_keys = 1000;
  if (options.part_size_bytes < kS3MinPartBytes || options.part_size_bytes > kS3MaxPartBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("s3 part size ", options.part_size_bytes, ": must be 5 MiB .. 5 GiB"));
  }
  if (options.multipart_threshold_bytes < 0 ||
      options.multipart_threshold_bytes > kS3MaxSinglePutBytes) {
    return absl::InvalidArgumentError(absl::StrCat("s3 multipart threshold ",
                                                   options.multipart_threshold_bytes,
                                                   ": must be 0 .. 5 GiB (one PUT's limit)"));
  }
  std::string scheme = "https", host;
  if (options.endpoint_url.empty()) {
    if (options.path_style) {
      host = absl::StrCat("s3.", options.region, ".amazonaws.com");
    } else {
      host = absl::StrCat(bucket, ".s3.", options.region, ".amazonaws.com");
    }
  } else {
    absl::string_view url = options.endpoint_url;
    if (absl::ConsumePrefix(&url, "http://")) {
      scheme = "http";
    } else if (!absl::ConsumePrefix(&url, "https://")) {
      return absl::InvalidArgumentError(absl::StrCat("s3 endpoint '", options.endpoint_url,
                                                     "': must start with http:// or https://"));
    }
    absl::ConsumeSuffix(&url, "/");
    if (url.empty() || absl::StrContains(url, "/") || absl::StrContains(url, "@") ||
        absl::StrContains(url, "?")) {
      return absl::InvalidArgumentError(
          absl::StrCat("s3 endpoint '", options.endpoint_url, "': expected scheme://host[:port]"));
    }
    host = absl::AsciiStrToLower(url);
    options.path_style = true;  // custom endpoints rarely have per-bucket DNS
  }
  return std::unique_ptr<ArtifactStore>(new S3ArtifactStore(std::move(bucket), std::move(prefix),
                                                            std::move(options), std::move(scheme),
                                                            std::move(host)));
}

S3ArtifactStore::S3ArtifactStore(std::string bucket, std::string prefix, S3Options options,
                                 std::string scheme, std::string host)
    : bucket_(std::move(bucket)),
      prefix_(std::move(prefix)),
      options_(std::move(options)),
      scheme_(std::move(scheme)),
      host_(std::move(host)),
      signer_(options_.access_key_id, options_.secret_access_key, options_.region, "s3") {
  GlobalCurlInit();
}

std::string S3ArtifactStore::Describe() const {
  return prefix_.empty() ? absl::StrCat("s3://", bucket_)
                         : absl::StrCat("s3://", bucket_, "/", prefix_);
}

std::string S3ArtifactStore::FullKey(absl::string_view key) const {
  return prefix_.empty() ? std::string(key) : absl::StrCat(prefix_, "/", key);
}

std::string S3ArtifactStore::Url(const Request& request, std::string* canonical_path) const {
  std::string path = options_.path_style ? absl::StrCat("/", bucket_) : "";
  if (!request.object_key.empty() || !options_.path_style) {
    absl::StrAppend(&path, "/", SigV4Signer::UriEncode(request.object_key, /*encode_slash=*/false));
  }
  const std::string query_string = SigV4Signer::CanonicalQueryString(request.query);
  std::string url = absl::StrCat(scheme_, "://", host_, path);
  if (!query_string.empty()) absl::StrAppend(&url, "?", query_string);
  *canonical_path = std::move(path);
  return url;
}

struct curl_slist* S3ArtifactStore::SignedHeaders(const Request& request,
                                                  const std::string& path) const {
  SigV4Request sig;
  sig.method = request.method;
  sig.canonical_uri = path;
  sig.query = request.query;
  sig.payload_sha256_hex =
      request.body_fd >= 0 ? request.body_sha256 : base::Sha256Hex(request.body);
  const std::string amz_date = SigV4Signer::AmzDate(std::time(nullptr));
  sig.headers = {
      {"host", host_}, {"x-amz-content-sha256", sig.payload_sha256_hex}, {"x-amz-date", amz_date}};
  if (!options_.session_token.empty()) {
    sig.headers.emplace_back("x-amz-security-token", options_.session_token);
  }
  const SigV4Signature signature = signer_.Sign(sig, amz_date);
  struct curl_slist* headers = nullptr;
  for (const auto& [name, value] : sig.headers) {
    headers = curl_slist_append(headers, absl::StrCat(name, ": ", value).c_str());
  }
  headers =
      curl_slist_append(headers, absl::StrCat("Authorization: ", signature.authorization).c_str());
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  if (request.method == "PUT" || request.method == "POST") {
    headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
  }
  return headers;
}

absl::StatusOr<S3ArtifactStore::Response> S3ArtifactStore::SendOnce(const Request& request) const {
  std::string path;
  const std::string url = Url(request, &path);
  struct curl_slist* headers = SignedHeaders(request, path);
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    curl_slist_free_all(headers);
    return absl::InternalError("s3: curl_easy_init failed");
  }
  Response response;
  Transfer t;
  t.curl = curl;
  t.memory = request.body;
  t.fd = request.body_fd;
  t.file_offset = request.body_offset;
  t.file_left = request.body_length;
  t.sink = request.sink;
  t.body = &response.body;
  t.etag = &response.etag;
  const bool streamed = request.body_fd >= 0 || request.sink != nullptr;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_ms));
  if (streamed) {  // any size: no overall limit, but no stall longer than stall_timeout_ms
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                     static_cast<long>(std::max<int64_t>(1, options_.stall_timeout_ms / 1000)));
  } else {
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout_ms));
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, HeaderLine);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  const std::string& method = request.method;
  if (method == "PUT" || method == "POST") {
    const int64_t size =
        request.body_fd >= 0 ? request.body_length : static_cast<int64_t>(request.body.size());
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, ReadBody);
    curl_easy_setopt(curl, CURLOPT_READDATA, &t);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
    if (method == "POST") curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "POST");
  } else if (method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  const CURLcode rc = curl_easy_perform(curl);
  if (rc == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.http_status);
    curl_off_t length = -1;
    curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
    response.content_length = static_cast<int64_t>(length);
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc == CURLE_OK) return response;
  const std::string what =
      absl::StrCat("s3 ", method, " s3://", bucket_, request.object_key.empty() ? "" : "/",
                   request.object_key, " via ", scheme_, "://", host_, ": ");
  // Local file trouble is not the network's: never retried.
  if (!t.read_error.empty()) {
    return absl::InternalError(absl::StrCat(what, request.local_path, ": ", t.read_error));
  }
  if (!t.write_error.empty()) return absl::InternalError(absl::StrCat(what, t.write_error));
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return absl::DeadlineExceededError(absl::StrCat(what, curl_easy_strerror(rc)));
  }
  return absl::UnavailableError(absl::StrCat(what, curl_easy_strerror(rc)));
}

absl::StatusOr<S3ArtifactStore::Response> S3ArtifactStore::Send(const std::string& method,
                                                                const std::string& object_key,
                                                                const Query& query,
                                                                absl::string_view body) const {
  Request request;
  request.method = method;
  request.object_key = object_key;
  request.query = query;
  request.body = body;
  return Send(request);
}

absl::StatusOr<S3ArtifactStore::Response> S3ArtifactStore::Send(const Request& request) const {
  absl::StatusOr<Response> response;
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    if (attempt > 0) {  // exponential backoff between retries: 100 ms, 200 ms, ...
      std::this_thread::sleep_for(std::chrono::milliseconds(100 << (attempt - 1)));
    }
    if (request.sink != nullptr) WQ_RETURN_IF_ERROR(request.sink->Truncate());
    response = SendOnce(request);
    const bool transient =
        response.ok() ? Retryable(response->http_status) : absl::IsUnavailable(response.status());
    if (!transient) break;
  }
  return response;
}

absl::Status S3ArtifactStore::ErrorFor(const std::string& method, const std::string& object_key,
                                       const Response& response) const {
  const S3Error err = ParseS3Error(response.body);
  std::string msg = absl::StrCat("s3 ", method, " s3://", bucket_, object_key.empty() ? "" : "/",
                                 object_key, ": HTTP ", response.http_status);
  if (!err.code.empty()) absl::StrAppend(&msg, " ", err.code);
  if (!err.message.empty()) absl::StrAppend(&msg, ": ", err.message);
  return absl::Status(CodeForHttp(response.http_status, err.code), msg);
}

absl::Status S3ArtifactStore::Put(absl::string_view key, absl::string_view bytes) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  const std::string full = FullKey(key);
  WQ_ASSIGN_OR_RETURN(Response r, Send("PUT", full, {}, bytes));
  if (r.http_status != 200) return ErrorFor("PUT", full, r);
  return absl::OkStatus();
}

absl::StatusOr<std::string> S3ArtifactStore::Get(absl::string_view key) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  const std::string full = FullKey(key);
  WQ_ASSIGN_OR_RETURN(Response r, Send("GET", full, {}, ""));
  if (r.http_status != 200) return ErrorFor("GET", full, r);
  return std::move(r.body);
}

absl::StatusOr<bool> S3ArtifactStore::Exists(absl::string_view key) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  const std::string full = FullKey(key);
  WQ_ASSIGN_OR_RETURN(Response r, Send("HEAD", full, {}, ""));
  if (r.http_status == 200) return true;
  if (r.http_status == 404) return false;
  return ErrorFor("HEAD", full, r);
}

absl::Status S3ArtifactStore::Delete(absl::string_view key) {
  WQ_RETURN_IF_ERROR(ValidateArtifactKey(key));
  const std::string full = FullKey(key);
  WQ_ASSIGN_OR_RETURN(Response r, Send("DELETE", full, {}, ""));
  if (r.http_status != 204 && r.http_status != 200 && r.http_status != 404) {
    return ErrorFor("DELETE", full, r);
  }
  return absl::OkStatus();
}

absl::Status S3ArtifactStore::CheckExists() {
  // One ListObjectsV2 of at most one key answers both: a missing bucket is 404
  // NoSuchBucket, a prefix without objects an empty page.
  const std::string store_prefix = prefix_.empty() ? "" : absl::StrCat(prefix_, "/");
  WQ_ASSIGN_OR_RETURN(
      Response r,
      Send("GET", "", {{"list-type", "2"}, {"prefix", store_prefix}, {"max-keys", "1"}}, ""));
  if (r.http_status == 404 && ParseS3Error(r.body).code == "NoSuchBucket") {
    return absl::NotFoundError(absl::StrCat("s3://", bucket_, ": bucket does not exist"));
  }
  if (r.http_status != 200) return ErrorFor("GET (ListObjectsV2)", "", r);
  absl::StatusOr<S3ListPage> page = ParseListObjectsV2(r.body);
  if (!page.ok()) {
    return absl::Status(page.status().code(),
                        absl::StrCat(Describe(), ": ", page.status().message()));
  }
  if (!prefix_.empty() && page->objects.empty()) {
    return absl::NotFoundError(absl::StrCat(Describe(), ": no objects under prefix '", prefix_,
                                            "/' (a mistyped prefix?)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> S3ArtifactStore::List(absl::string_view prefix) {
  WQ_RETURN_IF_ERROR(ValidateArtifactPrefix(prefix));
  const std::string store_prefix = prefix_.empty() ? "" : absl::StrCat(prefix_, "/");
  const std::string full_prefix = absl::StrCat(store_prefix, prefix);
  std::vector<std::string> keys;
  std::string token;
  for (int page_index = 0;; ++page_index) {
    std::vector<std::pair<std::string, std::string>> query = {
        {"list-type", "2"},
        {"prefix", full_prefix},
        {"max-keys", absl::StrCat(options_.list_max_keys)}};
    if (!token.empty()) query.emplace_back("continuation-token", token);
    WQ_ASSIGN_OR_RETURN(Response r, Send("GET", "", query, ""));
    if (r.http_status != 200) return ErrorFor("GET (ListObjectsV2)", "", r);
    absl::StatusOr<S3ListPage> page = ParseListObjectsV2(r.body);
    if (!page.ok()) {
      return absl::Status(page.status().code(),
                          absl::StrCat(Describe(), ": ", page.status().message()));
    }
    for (S3ObjectEntry& entry : page->objects) {
      if (!absl::StartsWith(entry.key, full_prefix)) continue;  // defensive
      keys.push_back(entry.key.substr(store_prefix.size()));
    }
    if (!page->is_truncated) break;
    if (page->next_continuation_token == token) {
      return absl::DataLossError(absl::StrCat(Describe(), ": ListObjectsV2 repeated its token"));
    }
    token = page->next_continuation_token;
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

absl::Status S3ArtifactStore::CreateBucket() {
  std::string body;
  if (options_.region != "us-east-1") {
    body = absl::StrCat(
        "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<LocationConstraint>",
        options_.region, "</LocationConstraint></CreateBucketConfiguration>");
  }
  WQ_ASSIGN_OR_RETURN(Response r, Send("PUT", "", {}, body));
  if (r.http_status == 200) return absl::OkStatus();
  absl::Status st = ErrorFor("PUT (CreateBucket)", "", r);
  if (ParseS3Error(r.body).code == "BucketAlreadyOwnedByYou") return absl::OkStatus();
  return st;
}

}  // namespace windquant::store
