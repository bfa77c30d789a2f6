// Test-only HTTP client (libcurl) and loopback port helpers, for the tests that
// talk to a local server: /metrics, Prometheus' API, an S3 endpoint.
#ifndef WINDQUANT_COMMON_TESTING_HTTP_CLIENT_H_
#define WINDQUANT_COMMON_TESTING_HTTP_CLIENT_H_

#include <string>

#include "absl/status/statusor.h"

namespace windquant::testing {

struct HttpResponse {
  long status = 0;
  std::string content_type;
  std::string body;
};

// One request with a 5 s timeout, no proxy. `method` is "GET", "HEAD", "POST", ...
// UNAVAILABLE (naming the URL) when the connection fails; any HTTP status is a success.
absl::StatusOr<HttpResponse> HttpRequest(const std::string& url, const std::string& method = "GET");

// URL-encodes `s` (query parameters).
std::string UrlEscape(const std::string& s);

// A port of 127.0.0.1 free now, for a child process that needs one on its command
// line: a random one below the kernel's ephemeral range (so no outgoing connection
// takes it meanwhile), never the same twice in a process.
absl::StatusOr<int> PickFreePort();

// Whether a TCP connection to 127.0.0.1:`port` is accepted now.
bool CanConnect(int port);

// A raw TCP socket connected to 127.0.0.1:`port` that has sent `bytes` (slow- and
// stalled-client tests); -1 when the connection or the send fails. The caller closes it.
int ConnectLoopback(int port, const std::string& bytes = "");

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_HTTP_CLIENT_H_
