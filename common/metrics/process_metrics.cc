#include "common/metrics/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace windquant::metrics {
namespace {

// Fields of /proc/<pid>/stat after the command name (field 2, in parentheses, may hold
// spaces): index 0 is field 3 (state). proc(5): utime 14, stime 15, starttime 22 (ticks
// after boot), vsize 23 (bytes), rss 24 (pages).
constexpr int kUtime = 14 - 3, kStime = 15 - 3, kStartTime = 22 - 3, kVsize = 23 - 3, kRss = 24 - 3;

absl::StatusOr<std::string> ReadProcFile(const std::string& path) {
  // procfs files report size 0: read to the end rather than by size.
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::vector<double>> StatFields(const std::string& path) {
  absl::StatusOr<std::string> text = ReadProcFile(path);
  if (!text.ok()) return text.status();
  const size_t paren = text->rfind(')');
  if (paren == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no command name"));
  }
  std::vector<double> fields;
  for (absl::string_view f :
       absl::StrSplit(absl::string_view(*text).substr(paren + 1), ' ', absl::SkipWhitespace())) {
    double v = 0;
    fields.push_back(absl::SimpleAtod(f, &v) ? v : 0);  // the state letter reads as 0
  }
  if (fields.size() <= static_cast<size_t>(kRss)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", fields.size() + 2, " fields, expected at least ", kRss + 3));
  }
  return fields;
}

absl::StatusOr<double> BootTime(const std::string& path) {
  absl::StatusOr<std::string> text = ReadProcFile(path);
  if (!text.ok()) return text.status();
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    double v = 0;
    if (absl::ConsumePrefix(&line, "btime ") && absl::SimpleAtod(line, &v)) return v;
  }
  return absl::InvalidArgumentError(absl::StrCat(path, ": no btime line"));
}

void Append(std::string& out, absl::string_view name, absl::string_view type,
            absl::string_view help, double value) {
  absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ",
                  absl::StrFormat("%.17g", value), "\n");
}

}  // namespace

absl::StatusOr<ProcessStats> ReadProcessStats(const std::string& proc_dir,
                                              const std::string& proc_stat, double ticks_per_second,
                                              double page_bytes) {
  absl::StatusOr<std::vector<double>> f = StatFields(proc_dir + "/stat");
  if (!f.ok()) return f.status();
  absl::StatusOr<double> boot = BootTime(proc_stat);
  if (!boot.ok()) return boot.status();
  ProcessStats s;
  s.cpu_seconds = ((*f)[kUtime] + (*f)[kStime]) / ticks_per_second;
  s.start_time_seconds = *boot + (*f)[kStartTime] / ticks_per_second;
  s.virtual_memory_bytes = (*f)[kVsize];
  s.resident_memory_bytes = (*f)[kRss] * page_bytes;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(proc_dir + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++s.open_fds;
  }
  if (ec) return absl::NotFoundError(absl::StrCat(proc_dir, "/fd: ", ec.message()));
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) s.max_fds = static_cast<double>(limit.rlim_cur);
  return s;
}

absl::StatusOr<ProcessStats> ReadSelfProcessStats() {
  return ReadProcessStats("/proc/self", "/proc/stat", static_cast<double>(sysconf(_SC_CLK_TCK)),
                          static_cast<double>(sysconf(_SC_PAGESIZE)));
}

std::string ProcessMetricsText(const ProcessStats& s) {
  std::string out;
  Append(out, "process_cpu_seconds_total", "counter",
         "Total user and system CPU time spent in seconds.", s.cpu_seconds);
  Append(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.", s.max_fds);
  Append(out, "process_open_fds", "gauge", "Number of open file descriptors.", s.open_fds);
  Append(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
         s.resident_memory_bytes);
  Append(out, "process_start_time_seconds", "gauge",
         "Start time of the process since unix epoch in seconds.", s.start_time_seconds);
  Append(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
         s.virtual_memory_bytes);
  return out;
}

std::string ProcessMetricsText() {
  absl::StatusOr<ProcessStats> stats = ReadSelfProcessStats();
  return stats.ok() ? ProcessMetricsText(*stats) : "";
}

}  // namespace windquant::metrics
