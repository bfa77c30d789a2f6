// ScopedFileSizeLimit: a full disk for the test process, simulated with
// RLIMIT_FSIZE (as `ulimit -f` does) while SIGXFSZ is ignored: a write that
// would grow any file past `max_bytes` fails with EFBIG instead of killing the
// process. Restores the previous limit and signal disposition when it goes.
// The limit is per process (every thread's writes); not thread-safe.
// Test-only, header-only.
#ifndef WINDQUANT_COMMON_TESTING_FILE_SIZE_LIMIT_H_
#define WINDQUANT_COMMON_TESTING_FILE_SIZE_LIMIT_H_

#include <signal.h>
#include <sys/resource.h>

#include <cstdint>

namespace windquant::testing {

class ScopedFileSizeLimit {
 public:
  explicit ScopedFileSizeLimit(int64_t max_bytes) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGXFSZ, &ignore, &old_action_);
    ::getrlimit(RLIMIT_FSIZE, &old_limit_);
    struct rlimit limit = old_limit_;
    limit.rlim_cur = static_cast<rlim_t>(max_bytes);
    ok_ = ::setrlimit(RLIMIT_FSIZE, &limit) == 0;
  }
  ~ScopedFileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_limit_);
    ::sigaction(SIGXFSZ, &old_action_, nullptr);
  }
  ScopedFileSizeLimit(const ScopedFileSizeLimit&) = delete;
  ScopedFileSizeLimit& operator=(const ScopedFileSizeLimit&) = delete;

  // Whether the limit is in force (setrlimit succeeded).
  bool ok() const { return ok_; }

 private:
  struct rlimit old_limit_ {};
  struct sigaction old_action_ {};
  bool ok_ = false;
};

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_FILE_SIZE_LIMIT_H_
