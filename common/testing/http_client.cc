#include "common/testing/http_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"

namespace windquant::testing {
namespace {

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t Append(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

}  // namespace

absl::StatusOr<HttpResponse> HttpRequest(const std::string& url, const std::string& method) {
  InitCurlOnce();
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  HttpResponse response;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "HEAD") curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  if (method == "POST") curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  CURLcode rc = curl_easy_perform(curl);
  if (rc != CURLE_OK) {
    curl_easy_cleanup(curl);
    return absl::UnavailableError(absl::StrCat(url, ": ", curl_easy_strerror(rc)));
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  char* content_type = nullptr;
  curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &content_type);
  if (content_type != nullptr) response.content_type = content_type;
  curl_easy_cleanup(curl);
  return response;
}

std::string UrlEscape(const std::string& s) {
  InitCurlOnce();
  char* escaped = curl_escape(s.c_str(), static_cast<int>(s.size()));
  std::string out = escaped;
  curl_free(escaped);
  return out;
}

absl::StatusOr<int> PickFreePort() {
  // As deploy/local/run.sh's free_port: below the ephemeral range, where no
  // outgoing connection or bind(0) takes the port before the child binds it.
  static std::mutex mu;
  static std::set<int> given;
  static std::mt19937 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  int low = 0;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
  const bool below = low > 12000;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int candidate = below ? std::uniform_int_distribution<int>(10000, low - 1)(rng) : 0;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(candidate));
    socklen_t len = sizeof(addr);
    const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                       getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    close(fd);
    const int port = ntohs(addr.sin_port);
    if (bound && given.insert(port).second) return port;
  }
  return absl::InternalError("no free port of 127.0.0.1 found");
}

bool CanConnect(int port) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return false;
  close(fd);
  return true;
}

int ConnectLoopback(int port, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      (!bytes.empty() && send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace windquant::testing
