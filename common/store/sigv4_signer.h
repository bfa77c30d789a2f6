// SigV4Signer: AWS Signature Version 4 request signing (HMAC-SHA256), written
// against the AWS documentation ("Create a signed AWS API request") and checked
// against its published examples in sigv4_signer_test.cc.
//
// The caller always supplies the payload's SHA-256 (UNSIGNED-PAYLOAD is not
// used by windquant), and the x-amz-date timestamp, so signing is a pure
// function. Thread-safe (immutable after construction).
#ifndef WINDQUANT_COMMON_STORE_SIGV4_SIGNER_H_
#define WINDQUANT_COMMON_STORE_SIGV4_SIGNER_H_

#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace windquant::store {

struct SigV4Request {
  std::string method;  // "GET", "PUT", ...
  // The URI path exactly as sent, already percent-encoded ("/bucket/a%20b").
  std::string canonical_uri;
  // Query parameters, NOT encoded; the signer encodes and sorts them.
  std::vector<std::pair<std::string, std::string>> query;
  // Headers to sign (must include host and x-amz-date); names any case.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string payload_sha256_hex;  // lowercase hex SHA-256 of the body
};

struct SigV4Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signed_headers;  // "host;x-amz-content-sha256;x-amz-date"
  std::string signature;       // lowercase hex
  std::string authorization;   // value of the Authorization header
};

class SigV4Signer {
 public:
  SigV4Signer(std::string access_key_id, std::string secret_access_key, std::string region,
              std::string service);

  // Signs `request` at time `amz_date` ("20150830T123600Z"), which must equal
  // the x-amz-date header.
  SigV4Signature Sign(const SigV4Request& request, absl::string_view amz_date) const;

  // "YYYYMMDDTHHMMSSZ" in UTC.
  static std::string AmzDate(std::time_t unix_s);
  // RFC 3986 encoding as SigV4 wants it: unreserved chars A-Z a-z 0-9 - _ . ~
  // kept, everything else %XX (uppercase); '/' kept unless `encode_slash`.
  static std::string UriEncode(absl::string_view s, bool encode_slash);
  // The query string in canonical order ("a=1&b=2"), also used in the URL.
  static std::string CanonicalQueryString(
      const std::vector<std::pair<std::string, std::string>>& query);
  // Raw (binary) HMAC-SHA256.
  static std::string HmacSha256(absl::string_view key, absl::string_view data);
  static std::string HexEncode(absl::string_view bytes);

 private:
  std::string access_key_id_;
  std::string secret_access_key_;
  std::string region_;
  std::string service_;
};

}  // namespace windquant::store

#endif  // WINDQUANT_COMMON_STORE_SIGV4_SIGNER_H_
