// The standard process metrics of the Prometheus client libraries, for the windquant
// processes: resident and virtual memory, CPU time, start time and file descriptors, read
// from /proc when /metrics is scraped. Dashboards and alerts use these names everywhere
// (deploy/grafana: the "Process resident memory" and "Process CPU" panels).
//
// They are not windquant_* names, which Registry refuses, so they are not registry
// families: a MetricsServer appends ProcessMetricsText() to the registry's exposition.
// Linux only (procfs). Thread-safe: every call reads /proc afresh and keeps no state.
#ifndef WINDQUANT_COMMON_METRICS_PROCESS_METRICS_H_
#define WINDQUANT_COMMON_METRICS_PROCESS_METRICS_H_

#include <string>

#include "absl/status/statusor.h"

namespace windquant::metrics {

struct ProcessStats {
  double resident_memory_bytes = 0;  // process_resident_memory_bytes (gauge)
  double virtual_memory_bytes = 0;   // process_virtual_memory_bytes (gauge)
  double cpu_seconds = 0;            // process_cpu_seconds_total (counter): user + system
  double start_time_seconds = 0;     // process_start_time_seconds (gauge): Unix time
  double open_fds = 0;               // process_open_fds (gauge)
  double max_fds = 0;                // process_max_fds (gauge): the soft RLIMIT_NOFILE
};

// Reads the stats of the process whose procfs directory is `proc_dir` (its stat and fd/),
// with the boot time from `proc_stat` (the btime line), `ticks_per_second` and
// `page_bytes`; max_fds is this process's limit. NOT_FOUND names a missing file,
// INVALID_ARGUMENT a file that does not parse.
absl::StatusOr<ProcessStats> ReadProcessStats(const std::string& proc_dir,
                                              const std::string& proc_stat, double ticks_per_second,
                                              double page_bytes);

// The stats of this process (/proc/self, /proc/stat, sysconf).
absl::StatusOr<ProcessStats> ReadSelfProcessStats();

// `stats` in the Prometheus text format 0.0.4 (HELP, TYPE and one sample per metric).
std::string ProcessMetricsText(const ProcessStats& stats);

// This process's metrics in the text format, or "" when /proc cannot be read (a scrape
// must not fail because of them).
std::string ProcessMetricsText();

}  // namespace windquant::metrics

#endif  // WINDQUANT_COMMON_METRICS_PROCESS_METRICS_H_
