#include "common/metrics/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/shell.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::metrics {
namespace {

using ::testing::HasSubstr;
using ::windquant::testing::StatusIs;

// A procfs-shaped directory: <dir>/pid/{stat, fd/*} and <dir>/stat.
class FakeProc {
 public:
  FakeProc() {
    char tmpl[] = "/tmp/wq_process_metrics_XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::filesystem::create_directories(dir_ + "/pid/fd");
    for (int i = 0; i < 3; ++i) std::ofstream(absl::StrCat(dir_, "/pid/fd/", i)) << "";
    std::ofstream(dir_ + "/stat") << "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n";
  }
  ~FakeProc() { std::filesystem::remove_all(dir_); }
  void WriteStat(const std::string& text) { std::ofstream(dir_ + "/pid/stat") << text; }
  std::string pid_dir() const { return dir_ + "/pid"; }
  std::string proc_stat() const { return dir_ + "/stat"; }

 private:
  std::string dir_;
};

// utime 200 and stime 50 ticks, started 500 ticks after boot, 1 MiB virtual, 300 pages
// resident; the command name holds spaces and parentheses.
constexpr char kStat[] =
    "1234 (my (odd) cmd) S 1 2 3 4 5 6 7 8 9 10 200 50 0 0 20 0 1 0 500 1048576 300 18446744 "
    "1 2 3\n";

TEST(ProcessMetricsTest, ReadsProcfsFields) {
  FakeProc proc;
  proc.WriteStat(kStat);
  auto s = ReadProcessStats(proc.pid_dir(), proc.proc_stat(), 100, 4096);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->cpu_seconds, 2.5);
  EXPECT_EQ(s->start_time_seconds, 1700000005.0);
  EXPECT_EQ(s->virtual_memory_bytes, 1048576.0);
  EXPECT_EQ(s->resident_memory_bytes, 300.0 * 4096);
  EXPECT_EQ(s->open_fds, 3.0);
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  EXPECT_EQ(s->max_fds, static_cast<double>(limit.rlim_cur));

  const std::string text = ProcessMetricsText(*s);
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter\n"
                              "process_cpu_seconds_total 2.5\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_resident_memory_bytes gauge\n"
                              "process_resident_memory_bytes 1228800\n"));
  EXPECT_THAT(text, HasSubstr("process_start_time_seconds 1700000005\n"));
}

TEST(ProcessMetricsTest, ErrorsNameTheFile) {
  FakeProc proc;
  EXPECT_THAT(ReadProcessStats(proc.pid_dir(), proc.proc_stat(), 100, 4096).status(),
              StatusIs(absl::StatusCode::kNotFound, proc.pid_dir() + "/stat"));
  proc.WriteStat("1234 no command name 1 2 3\n");
  EXPECT_THAT(
      ReadProcessStats(proc.pid_dir(), proc.proc_stat(), 100, 4096).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, proc.pid_dir() + "/stat: no command name"));
  proc.WriteStat("1234 (short) S 1 2 3\n");
  EXPECT_THAT(ReadProcessStats(proc.pid_dir(), proc.proc_stat(), 100, 4096).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "6 fields, expected"));
  proc.WriteStat(kStat);
  EXPECT_THAT(ReadProcessStats(proc.pid_dir(), proc.pid_dir() + "/stat", 100, 4096).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "no btime line"));
}

// This process: memory it touches shows up as resident, CPU time agrees with getrusage
// (to a few clock ticks), it started before now.
TEST(ProcessMetricsTest, ReadsThisProcess) {
  auto before = ReadSelfProcessStats();
  ASSERT_TRUE(before.ok()) << before.status();
  constexpr size_t kBytes = 64 << 20;
  std::vector<char> touched(kBytes, 1);
  auto after = ReadSelfProcessStats();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(after->resident_memory_bytes - before->resident_memory_bytes, 0.9 * kBytes);
  EXPECT_GE(after->virtual_memory_bytes, after->resident_memory_bytes);

  rusage usage{};
  ASSERT_EQ(getrusage(RUSAGE_SELF, &usage), 0);
  const double rusage_seconds = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 +
                                usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
  EXPECT_NEAR(after->cpu_seconds, rusage_seconds, 0.05);
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(after->start_time_seconds, now + 1);
  EXPECT_GT(after->start_time_seconds, now - 86400);
  EXPECT_GE(after->open_fds, 3.0);
  EXPECT_EQ(touched[kBytes - 1], 1);
}

// The exposition lints clean with promtool (the linter Prometheus ships).
TEST(ProcessMetricsTest, TextLintsClean) {
  const std::string promtool = ::windquant::testing::FindOnPath("promtool");
  ASSERT_FALSE(promtool.empty()) << "promtool not found (Debian package prometheus)";
  const std::string text = ProcessMetricsText();
  ASSERT_THAT(text, HasSubstr("process_resident_memory_bytes "));
  char tmpl[] = "/tmp/wq_process_metrics_text_XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(tmpl) << text;
  auto result = ::windquant::testing::RunShell(absl::StrCat(promtool, " check metrics < ", tmpl));
  std::filesystem::remove(tmpl);
  EXPECT_EQ(result.exit_code, 0) << result.output << "\n--- input ---\n" << text;
  EXPECT_EQ(result.output, "") << text;
}

}  // namespace
}  // namespace windquant::metrics
