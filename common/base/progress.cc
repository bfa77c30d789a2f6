#include "common/base/progress.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_format.h"

namespace windquant::base {

Progress::Progress(std::string label, double total, std::string unit, double log_interval_s)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      log_interval_s_(log_interval_s),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

double Progress::ElapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Progress::Line(double done, const std::string& extra) const {
  const double elapsed = ElapsedSeconds();
  const double rate = elapsed > 0 ? done / elapsed : 0.0;
  const double eta = rate > 0 && total_ > done ? (total_ - done) / rate : 0.0;
  const double pct = total_ > 0 ? 100.0 * done / total_ : 100.0;
  // Slow work (a few PPO updates a minute) reads better per minute.
  const std::string speed = rate > 0 && rate < 1 ? absl::StrFormat("%.2f %s/min", rate * 60, unit_)
                                                 : absl::StrFormat("%.1f %s/s", rate, unit_);
  return absl::StrFormat("%s: %.0f/%.0f %s (%.1f%%) %s, elapsed %.0fs, ETA %.0fs%s%s", label_, done,
                         total_, unit_, pct, speed, elapsed, eta, extra.empty() ? "" : ", ", extra);
}

void Progress::Update(double done, const std::string& extra) {
  done_ = done;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_print_).count();
  if (tty_) {
    if (since < 0.2) return;
    std::fprintf(stderr, "\r\033[K%s", Line(done, extra).c_str());
  } else {
    if (since < log_interval_s_) return;
    std::fprintf(stderr, "%s\n", Line(done, extra).c_str());
  }
  std::fflush(stderr);
  last_print_ = now;
}

void Progress::Finish(const std::string& extra) {
  if (tty_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s\n", Line(done_ > 0 ? done_ : total_, extra).c_str());
  std::fflush(stderr);
}

}  // namespace windquant::base
