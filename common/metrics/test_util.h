// Test-only helpers for the metrics tests: an HTTP client (libcurl) and a free-port finder.
#ifndef WINDQUANT_COMMON_METRICS_TEST_UTIL_H_
#define WINDQUANT_COMMON_METRICS_TEST_UTIL_H_

#include <string>

#include "absl/status/statusor.h"

namespace windquant::metrics::testing {

struct HttpResponse {
  long status = 0;
  std::string content_type;
  std::string body;
};

// One request with a 5 s timeout. `method` is "GET", "HEAD", "POST", ...
// UNAVAILABLE when the connection fails; any HTTP status is a success.
absl::StatusOr<HttpResponse> HttpRequest(const std::string& url, const std::string& method = "GET");

// URL-encodes `s` (query parameters).
std::string UrlEscape(const std::string& s);

// Binds 127.0.0.1:0, reads the port back and releases it, for a child process that
// needs a port on its command line. Racy by nature, but the kernel does not reuse it
// immediately.
absl::StatusOr<int> PickFreePort();

}  // namespace windquant::metrics::testing

#endif  // WINDQUANT_COMMON_METRICS_TEST_UTIL_H_
