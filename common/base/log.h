// The one logging interface: a component that reports progress or trouble takes a
// LogSink in its Options (or constructor) and writes whole lines to it, without the
// trailing newline; the binary (or the job, or a test) decides where the lines go.
// Thread-safety: a sink may be called from several threads at once; LogToStderr is safe
// for that (one write per line).
#ifndef WINDQUANT_COMMON_BASE_LOG_H_
#define WINDQUANT_COMMON_BASE_LOG_H_

#include <functional>
#include <string>

namespace windquant::base {

using LogSink = std::function<void(const std::string& line)>;

// Writes `line` and a newline to stderr in one write.
void LogToStderr(const std::string& line);

}  // namespace windquant::base

#endif  // WINDQUANT_COMMON_BASE_LOG_H_
