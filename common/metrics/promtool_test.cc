// Checks our exposition with Prometheus' own linter, `promtool check metrics`.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/metrics/metric_names.h"
#include "common/metrics/registry.h"
#include "common/testing/shell.h"
#include "gtest/gtest.h"

namespace windquant::metrics {
namespace {

constexpr char kPromtool[] = "/usr/bin/promtool";

using ::windquant::testing::CommandResult;

// Runs `promtool check metrics` with `exposition` on stdin.
CommandResult CheckMetrics(const std::string& exposition) {
  char path[] = "/tmp/wq_promtool_XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << exposition;
  CommandResult result =
      ::windquant::testing::RunShell(absl::StrCat(kPromtool, " check metrics < ", path));
  unlink(path);
  return result;
}

class PromtoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(access(kPromtool, X_OK), 0)
        << kPromtool << " not found (Debian package 'prometheus': scripts/install-deps.sh)";
  }
};

// The whole catalogue, with values, labels that need escaping and odd help text, must lint
// fully clean: no finding is accepted.
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
  ASSERT_TRUE(registry
                  .AddGauge("windquant_test_escaping_ratio",
                            "Help with \\ backslash, \"quotes\" and\na newline.")
                  .ok());

  const std::string exposition = registry.TextExposition();
  CommandResult result = CheckMetrics(exposition);
  // Exit 0 and no output: no lint findings at all (3 would mean findings only).
  EXPECT_EQ(result.exit_code, 0) << result.output << "\n--- input ---\n" << exposition;
  EXPECT_EQ(result.output, "") << "\n--- input ---\n" << exposition;
}

// Why the bit-width gauges are named *_bitwidth: promtool reads a "_bits" token as a data
// size whose base unit is bytes, so the old names were flagged.
TEST_F(PromtoolTest, FlagsBitsSuffixAsDataSize) {
  CommandResult result = CheckMetrics(
      "# HELP windquant_learner_target_bits Old name of the curriculum target.\n"
      "# TYPE windquant_learner_target_bits gauge\n"
      "windquant_learner_target_bits 2\n");
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_EQ(result.output,
            "windquant_learner_target_bits use base unit \"bytes\" instead of \"bits\"\n");
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
