#include "common/base/log.h"

#include <unistd.h>

namespace windquant::base {

void LogToStderr(const std::string& line) {
  const std::string out = line + "\n";
  // One write per line, so lines of several threads do not interleave; a short
  // write (a full pipe) is retried, an error drops the line.
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::write(STDERR_FILENO, out.data() + done, out.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace windquant::base
