#include "common/net/auth.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/files.h"

namespace windquant::net {
namespace {

constexpr absl::string_view kBearerPrefix = "Bearer ";

class BearerTokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(std::string(kAuthorizationHeader), *header_);
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;  // owned by the factory, which outlives its channels' calls
};

}  // namespace

absl::StatusOr<std::string> ReadBearerTokenFile(const std::string& path) {
  constexpr absl::string_view kKey = "service.tls.bearer_token_file: ";
  auto text = base::ReadFile(path);
  if (!text.ok())
    return absl::Status(text.status().code(), absl::StrCat(kKey, text.status().message()));
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(kKey, path, ": bearer token file is empty"));
  }
  for (char ch : token) {
    if (ch < 0x21 || ch > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat(kKey, path, ": bearer token must be printable ASCII without spaces"));
    }
  }
  return token;
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view key,
                                        PemKind kind) {
  auto text = base::ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(), absl::StrCat(key, ": ", text.status().message()));
  }
  BIO* bio = BIO_new_mem_buf(text->data(), static_cast<int>(text->size()));
  if (bio == nullptr) return absl::ResourceExhaustedError(absl::StrCat(key, ": out of memory"));
  bool parsed = false;
  if (kind == PemKind::kCertificates) {
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    parsed = cert != nullptr;
    X509_free(cert);
  } else {
    EVP_PKEY* pkey = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    parsed = pkey != nullptr;
    EVP_PKEY_free(pkey);
  }
  BIO_free(bio);
  ERR_clear_error();  // the parser's queue must not leak into gRPC's own TLS errors
  if (!parsed) {
    return absl::InvalidArgumentError(absl::StrCat(
        key, ": ", path, ": no PEM ",
        kind == PemKind::kCertificates ? "certificate" : "private key", " OpenSSL can parse"));
  }
  return *std::move(text);
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // The length is not secret (tokens are fixed-size random strings); the content is.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

absl::Status BearerTokenChecker::Check(absl::string_view path,
                                       absl::string_view authorization) const {
  if (absl::StartsWith(path, kHealthServicePathPrefix)) return absl::OkStatus();
  if (authorization.empty()) return absl::UnauthenticatedError("missing bearer token");
  if (!absl::StartsWith(authorization, kBearerPrefix) ||
      !ConstantTimeEquals(authorization.substr(kBearerPrefix.size()), token_)) {
    return absl::UnauthenticatedError("invalid bearer token");
  }
  return absl::OkStatus();
}

grpc::experimental::Interceptor* BearerTokenInterceptorFactory::CreateClientInterceptor(
    grpc::experimental::ClientRpcInfo* info) {
  static_cast<void>(info);
  return new BearerTokenInterceptor(&header_value_);
}

}  // namespace windquant::net
