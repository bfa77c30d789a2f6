#include "common/store/sigv4_signer.h"

#include <algorithm>
#include <map>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/files.h"

namespace windquant::store {

SigV4Signer::SigV4Signer(std::string access_key_id, std::string secret_access_key,
                         std::string region, std::string service)
    : access_key_id_(std::move(access_key_id)),
      secret_access_key_(std::move(secret_access_key)),
      region_(std::move(region)),
      service_(std::move(service)) {}

std::string SigV4Signer::AmzDate(std::time_t unix_s) {
  std::tm tm{};
  gmtime_r(&unix_s, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string SigV4Signer::UriEncode(absl::string_view s, bool encode_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3);
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (c == '/' && !encode_slash)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string SigV4Signer::CanonicalQueryString(
    const std::vector<std::pair<std::string, std::string>>& query) {
  // Sorted by encoded name, then encoded value.
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [k, v] : query) encoded.emplace_back(UriEncode(k, true), UriEncode(v, true));
  std::sort(encoded.begin(), encoded.end());
  std::vector<std::string> parts;
  parts.reserve(encoded.size());
  for (const auto& [k, v] : encoded) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrJoin(parts, "&");
}

std::string SigV4Signer::HmacSha256(absl::string_view key, absl::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string SigV4Signer::HexEncode(absl::string_view bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out(2 * bytes.size(), '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    out[2 * i] = kHex[c >> 4];
    out[2 * i + 1] = kHex[c & 15];
  }
  return out;
}

SigV4Signature SigV4Signer::Sign(const SigV4Request& request, absl::string_view amz_date) const {
  SigV4Signature sig;
  // Canonical headers: lowercase names, sorted; values trimmed with inner
  // runs of spaces collapsed; repeated names joined with ','.
  std::map<std::string, std::string> headers;
  for (const auto& [name, value] : request.headers) {
    std::string v(absl::StripAsciiWhitespace(value));
    std::string collapsed;
    for (char c : v) {
      if (c == ' ' && !collapsed.empty() && collapsed.back() == ' ') continue;
      collapsed.push_back(c);
    }
    std::string& slot = headers[absl::AsciiStrToLower(name)];
    slot = slot.empty() ? collapsed : absl::StrCat(slot, ",", collapsed);
  }
  std::string canonical_headers;
  std::vector<std::string> names;
  for (const auto& [name, value] : headers) {
    absl::StrAppend(&canonical_headers, name, ":", value, "\n");
    names.push_back(name);
  }
  sig.signed_headers = absl::StrJoin(names, ";");

  sig.canonical_request = absl::StrCat(
      request.method, "\n", request.canonical_uri.empty() ? "/" : request.canonical_uri, "\n",
      CanonicalQueryString(request.query), "\n", canonical_headers, "\n", sig.signed_headers, "\n",
      request.payload_sha256_hex);

  const absl::string_view date = amz_date.substr(0, 8);
  const std::string scope = absl::StrCat(date, "/", region_, "/", service_, "/aws4_request");
  sig.string_to_sign = absl::StrCat("AWS4-HMAC-SHA256\n", amz_date, "\n", scope, "\n",
                                    base::Sha256Hex(sig.canonical_request));

  // Signing key = HMAC(HMAC(HMAC(HMAC("AWS4"+secret, date), region), service), "aws4_request").
  std::string key = HmacSha256(absl::StrCat("AWS4", secret_access_key_), date);
  key = HmacSha256(key, region_);
  key = HmacSha256(key, service_);
  key = HmacSha256(key, "aws4_request");
  sig.signature = HexEncode(HmacSha256(key, sig.string_to_sign));
  sig.authorization =
      absl::StrCat("AWS4-HMAC-SHA256 Credential=", access_key_id_, "/", scope,
                   ", SignedHeaders=", sig.signed_headers, ", Signature=", sig.signature);
  return sig;
}

}  // namespace windquant::store
