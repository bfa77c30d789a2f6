// A progress reporter for long jobs: a single updating line with rate and ETA
// on a terminal, a periodic log line (every `log_interval_s`) otherwise.
// Not thread-safe: call from one thread.
#ifndef WINDQUANT_COMMON_BASE_PROGRESS_H_
#define WINDQUANT_COMMON_BASE_PROGRESS_H_

#include <chrono>
#include <string>

namespace windquant::base {

class Progress {
 public:
  // `total` units of work named `unit` (e.g. "tokens"); `label` prefixes lines.
  Progress(std::string label, double total, std::string unit, double log_interval_s = 10.0);
  // Reports that `done` units are complete; `extra` is appended (e.g. "loss 2.31").
  void Update(double done, const std::string& extra = "");
  // Prints the final line (always, terminal or not).
  void Finish(const std::string& extra = "");
  double ElapsedSeconds() const;

 private:
  std::string Line(double done, const std::string& extra) const;
  std::string label_;
  double total_;
  std::string unit_;
  double log_interval_s_;
  bool tty_;
  double done_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_print_;
};

}  // namespace windquant::base

#endif  // WINDQUANT_COMMON_BASE_PROGRESS_H_
