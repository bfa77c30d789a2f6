#include "common/net/test_certs.h"

#include <stdlib.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"

namespace windquant::net {
namespace {

absl::Status Run(const std::string& command) {
  const std::string full = absl::StrCat(command, " >/dev/null 2>&1");
  if (std::system(full.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("test certs: command failed: ", command));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TestCerts> MakeTestCerts() {
  if (std::system("openssl version >/dev/null 2>&1") != 0) {
    return absl::FailedPreconditionError("openssl CLI not found");
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/wq-net-certs-XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) return absl::InternalError("test certs: mkdtemp failed");
  TestCerts c;
  c.dir = templ;
  const std::string& d = c.dir;
  c.ca_cert = d + "/ca.crt";
  c.server_cert = d + "/server.crt";
  c.server_key = d + "/server.key";
  c.client_cert = d + "/client.crt";
  c.client_key = d + "/client.key";
  c.rogue_cert = d + "/rogue.crt";
  c.rogue_key = d + "/rogue.key";
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  auto write = [](const std::string& path, const std::string& text) {
    return base::WriteFileAtomic(path, text);
  };
  absl::Status s = write(d + "/server.ext",
                         "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                         "basicConstraints=CA:FALSE\n"
                         "keyUsage=digitalSignature,keyEncipherment\n"
                         "extendedKeyUsage=serverAuth\n");
  if (!s.ok()) return s;
  s = write(d + "/client.ext",
            "basicConstraints=CA:FALSE\n"
            "keyUsage=digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=clientAuth\n");
  if (!s.ok()) return s;
  const std::string commands[] = {
      absl::StrCat("openssl req -x509 ", ec, " -keyout ", d, "/ca.key -out ", c.ca_cert,
                   " -days 1 -subj /CN=windquant-test-ca"),
      absl::StrCat("openssl req ", ec, " -keyout ", c.server_key, " -out ", d,
                   "/server.csr -subj /CN=localhost"),
      absl::StrCat("openssl x509 -req -in ", d, "/server.csr -CA ", c.ca_cert, " -CAkey ", d,
                   "/ca.key -CAcreateserial -out ", c.server_cert, " -days 1 -extfile ", d,
                   "/server.ext"),
      absl::StrCat("openssl req ", ec, " -keyout ", c.client_key, " -out ", d,
                   "/client.csr -subj /CN=windquant-test-client"),
      absl::StrCat("openssl x509 -req -in ", d, "/client.csr -CA ", c.ca_cert, " -CAkey ", d,
                   "/ca.key -CAcreateserial -out ", c.client_cert, " -days 1 -extfile ", d,
                   "/client.ext"),
      absl::StrCat("openssl req -x509 ", ec, " -keyout ", c.rogue_key, " -out ", c.rogue_cert,
                   " -days 1 -subj /CN=rogue-client"),
  };
  for (const std::string& command : commands) {
    s = Run(command);
    if (!s.ok()) return s;
  }
  return c;
}

}  // namespace windquant::net
