// Sha256Hasher: incremental SHA-256 (OpenSSL EVP), for data that is streamed
// in pieces (uploads, downloads, file copies) and so never held whole.
// base::Sha256Hex (files.h) is the one-shot form. Thread-compatible.
#ifndef WINDQUANT_COMMON_BASE_SHA256_H_
#define WINDQUANT_COMMON_BASE_SHA256_H_

#include <string>

#include "absl/strings/string_view.h"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace windquant::base {

class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;

  void Update(absl::string_view data);
  // Lowercase hex SHA-256 of everything given to Update since the last
  // Reset; the hasher then starts over (as after Reset).
  std::string FinishHex();
  void Reset();

 private:
  evp_md_ctx_st* ctx_;
};

}  // namespace windquant::base

#endif  // WINDQUANT_COMMON_BASE_SHA256_H_
