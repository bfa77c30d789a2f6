#include "common/base/sha256.h"

#include <cstdio>
#include <cstdlib>

#include <openssl/evp.h>

namespace windquant::base {

Sha256Hasher::Sha256Hasher() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr) {  // out of memory: nothing sensible to return
    std::fprintf(stderr, "Sha256Hasher: EVP_MD_CTX_new failed\n");
    std::abort();
  }
  Reset();
}

Sha256Hasher::~Sha256Hasher() { EVP_MD_CTX_free(ctx_); }

void Sha256Hasher::Reset() { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }

void Sha256Hasher::Update(absl::string_view data) {
  EVP_DigestUpdate(ctx_, data.data(), data.size());
}

std::string Sha256Hasher::FinishHex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx_, digest, &n);
  static const char* kHex = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (unsigned int i = 0; i < n; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  Reset();
  return out;
}

}  // namespace windquant::base
