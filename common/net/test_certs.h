// Test-only: a throw-away PKI made with the openssl CLI in a fresh temporary directory:
// a CA, a server certificate for 127.0.0.1 / localhost and a client certificate signed by
// it, and a self-signed "rogue" client certificate from no trusted CA. EC P-256 keys,
// valid for one day. Thread-compatible.
#ifndef WINDQUANT_COMMON_NET_TEST_CERTS_H_
#define WINDQUANT_COMMON_NET_TEST_CERTS_H_

#include <string>

#include "absl/status/statusor.h"

namespace windquant::net {

struct TestCerts {
  std::string dir;
  std::string ca_cert;                  // PEM file paths
  std::string server_cert, server_key;  // SAN IP:127.0.0.1, DNS:localhost
  std::string client_cert, client_key;  // signed by the CA, clientAuth
  std::string rogue_cert, rogue_key;    // self-signed, also usable as an untrusted CA
};

// FAILED_PRECONDITION when the openssl CLI is missing (tests skip), INTERNAL when a
// command fails (its command line in the message).
absl::StatusOr<TestCerts> MakeTestCerts();

}  // namespace windquant::net

#endif  // WINDQUANT_COMMON_NET_TEST_CERTS_H_
