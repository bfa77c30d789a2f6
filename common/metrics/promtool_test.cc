// Checks our exposition with Prometheus' own linter, `promtool check metrics`.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/metrics/metric_names.h"
#include "common/metrics/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::metrics {
namespace {

constexpr char kPromtool[] = "/usr/bin/promtool";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

// Runs `promtool check metrics` with `exposition` on stdin.
CommandResult CheckMetrics(const std::string& exposition) {
  char path[] = "/tmp/wq_promtool_XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << exposition;
  CommandResult result;
  FILE* pipe =
      popen(absl::StrCat(kPromtool, " check metrics < ", path, " 2>&1").c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  unlink(path);
  return result;
}

// promtool's linter treats any "_bits" token as a data size whose base unit is bytes. Our
// two "bits" metrics are average bit-widths (bits per weight, DESIGN.md's "effective bits"),
// not amounts of data, and their names are part of the catalogue contract, so exactly these
// findings are accepted; anything else promtool reports fails the test.
constexpr const char* kAcceptedFindings[] = {
    "windquant_learner_best_plan_effective_bits use base unit \"bytes\" instead of \"bits\"",
    "windquant_learner_target_bits use base unit \"bytes\" instead of \"bits\"",
};

std::vector<std::string> UnexpectedFindings(const std::string& output) {
  std::vector<std::string> unexpected;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
    bool accepted = false;
    for (const char* finding : kAcceptedFindings) accepted |= line == finding;
    if (!accepted) unexpected.emplace_back(line);
  }
  return unexpected;
}

class PromtoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPromtool, X_OK) != 0) {
      GTEST_SKIP() << kPromtool << " not found (Debian package 'prometheus')";
    }
  }
};

TEST_F(PromtoolTest, CatalogueExpositionIsClean) {
  Registry registry;
  ASSERT_TRUE(RegisterWindquantMetrics(registry).ok());
  CounterFamily(registry, kLearnerEpisodesTotal).value()->Get().Inc(12);
  CounterFamily(registry, kNetSentBytesTotal).value()->Get().Inc(1 << 20);
  GaugeFamily(registry, kEvaluatorLambda).value()->Get().Set(0.25);
  GaugeFamily(registry, kLearnerBestPlanPerplexity).value()->Get().Set(1e21);
  Family<Counter>* errors = CounterFamily(registry, kNetRpcErrorsTotal).value();
  errors->Labels({"UNAVAILABLE"}).Inc();
  errors->Labels({"weird \"code\"\\\nwith newline"}).Inc(2);
  Histogram& forward = HistogramFamily(registry, kActorForwardDurationSeconds).value()->Get();
  for (double v : {0.0001, 0.003, 0.2, 10.0}) forward.Observe(v);
  HistogramFamily(registry, kLearnerPolicyLagVersions).value()->Get().Observe(3);
  ASSERT_TRUE(registry.AddGauge("windquant_test_escaping_ratio",
                                "Help with \\ backslash, \"quotes\" and\na newline.")
                  .ok());

  const std::string exposition = registry.TextExposition();
  CommandResult result = CheckMetrics(exposition);
  EXPECT_TRUE(result.exit_code == 0 || result.exit_code == 3)  // 3 = lint findings only
      << result.exit_code << " " << result.output;
  EXPECT_THAT(UnexpectedFindings(result.output), ::testing::IsEmpty())
      << "\n--- input ---\n" << exposition;
}

// Without the two accepted "bits" metrics promtool is silent and exits 0.
TEST_F(PromtoolTest, ExpositionWithoutBitWidthsIsFullyClean) {
  Registry registry;
  for (const MetricSpec& spec : AllMetricSpecs()) {
    if (spec.name == kLearnerTargetBits.name || spec.name == kLearnerBestPlanEffectiveBits.name) {
      continue;
    }
    absl::Status s = spec.type == MetricType::kCounter ? CounterFamily(registry, spec).status()
                     : spec.type == MetricType::kGauge ? GaugeFamily(registry, spec).status()
                                                       : HistogramFamily(registry, spec).status();
    ASSERT_TRUE(s.ok()) << s;
  }
  CounterFamily(registry, kNetRpcErrorsTotal).value()->Labels({"a\"b\\c\nd"}).Inc();
  HistogramFamily(registry, kActorForwardDurationSeconds).value()->Get().Observe(0.01);
  const std::string exposition = registry.TextExposition();
  CommandResult result = CheckMetrics(exposition);
  EXPECT_EQ(result.exit_code, 0) << result.output << "\n--- input ---\n" << exposition;
  EXPECT_EQ(result.output, "") << "\n--- input ---\n" << exposition;
}

// The check above is only meaningful if promtool does flag problems in this setup.
TEST_F(PromtoolTest, FlagsABadExposition) {
  CommandResult result = CheckMetrics(
      "# HELP windquant_bad_events counter without _total\n"
      "# TYPE windquant_bad_events counter\n"
      "windquant_bad_events 1\n");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output, "");
}

}  // namespace
}  // namespace windquant::metrics
