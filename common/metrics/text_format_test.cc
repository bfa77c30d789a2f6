#include "common/metrics/text_format.h"

#include <cmath>
#include <limits>

#include "common/metrics/registry.h"
#include "gtest/gtest.h"

namespace windquant::metrics {
namespace {

TEST(TextFormatTest, CounterGolden) {
  Registry registry;
  Family<Counter>* f =
      registry.AddCounter("windquant_net_rpc_errors_total", "Failed RPCs.", {"code", "method"})
          .value();
  f->Labels({"UNAVAILABLE", "Act"}).Inc(3);
  f->Labels({"INTERNAL", "Act"}).Inc();
  registry.AddCounter("windquant_learner_episodes_total", "Episodes.").value()->Get().Inc(7);
  EXPECT_EQ(registry.TextExposition(),
            "# HELP windquant_learner_episodes_total Episodes.\n"
            "# TYPE windquant_learner_episodes_total counter\n"
            "windquant_learner_episodes_total 7\n"
            "# HELP windquant_net_rpc_errors_total Failed RPCs.\n"
            "# TYPE windquant_net_rpc_errors_total counter\n"
            "windquant_net_rpc_errors_total{code=\"INTERNAL\",method=\"Act\"} 1\n"
            "windquant_net_rpc_errors_total{code=\"UNAVAILABLE\",method=\"Act\"} 3\n");
}

TEST(TextFormatTest, GaugeGolden) {
  Registry registry;
  registry.AddGauge("windquant_evaluator_lambda", "Lambda.").value()->Get().Set(-0.125);
  registry.AddGauge("windquant_learner_best_plan_perplexity", "PPL.").value()->Get().Set(1e21);
  EXPECT_EQ(registry.TextExposition(),
            "# HELP windquant_evaluator_lambda Lambda.\n"
            "# TYPE windquant_evaluator_lambda gauge\n"
            "windquant_evaluator_lambda -0.125\n"
            "# HELP windquant_learner_best_plan_perplexity PPL.\n"
            "# TYPE windquant_learner_best_plan_perplexity gauge\n"
            "windquant_learner_best_plan_perplexity 1e+21\n");
}

TEST(TextFormatTest, HistogramGolden) {
  Registry registry;
  Family<Histogram>* f = registry
                             .AddHistogram("windquant_actor_forward_duration_seconds",
                                           "Forward time.", {0.005, 0.1, 1}, {"stage"})
                             .value();
  Histogram& h = f->Labels({"0"});
  for (double v : {0.001, 0.005, 0.05, 0.5, 2.0}) h.Observe(v);
  f->Labels({"1"});  // exported with zeros
  EXPECT_EQ(registry.TextExposition(),
            "# HELP windquant_actor_forward_duration_seconds Forward time.\n"
            "# TYPE windquant_actor_forward_duration_seconds histogram\n"
            "windquant_actor_forward_duration_seconds_bucket{stage=\"0\",le=\"0.005\"} 2\n"
            "windquant_actor_forward_duration_seconds_bucket{stage=\"0\",le=\"0.1\"} 3\n"
            "windquant_actor_forward_duration_seconds_bucket{stage=\"0\",le=\"1\"} 4\n"
            "windquant_actor_forward_duration_seconds_bucket{stage=\"0\",le=\"+Inf\"} 5\n"
            "windquant_actor_forward_duration_seconds_sum{stage=\"0\"} 2.556\n"
            "windquant_actor_forward_duration_seconds_count{stage=\"0\"} 5\n"
            "windquant_actor_forward_duration_seconds_bucket{stage=\"1\",le=\"0.005\"} 0\n"
            "windquant_actor_forward_duration_seconds_bucket{stage=\"1\",le=\"0.1\"} 0\n"
            "windquant_actor_forward_duration_seconds_bucket{stage=\"1\",le=\"1\"} 0\n"
            "windquant_actor_forward_duration_seconds_bucket{stage=\"1\",le=\"+Inf\"} 0\n"
            "windquant_actor_forward_duration_seconds_sum{stage=\"1\"} 0\n"
            "windquant_actor_forward_duration_seconds_count{stage=\"1\"} 0\n");
}

TEST(TextFormatTest, UnlabelledHistogramGolden) {
  Registry registry;
  registry.AddHistogram("windquant_learner_policy_lag_versions", "Lag.", {0, 2})
      .value()
      ->Get()
      .Observe(1);
  EXPECT_EQ(registry.TextExposition(),
            "# HELP windquant_learner_policy_lag_versions Lag.\n"
            "# TYPE windquant_learner_policy_lag_versions histogram\n"
            "windquant_learner_policy_lag_versions_bucket{le=\"0\"} 0\n"
            "windquant_learner_policy_lag_versions_bucket{le=\"2\"} 1\n"
            "windquant_learner_policy_lag_versions_bucket{le=\"+Inf\"} 1\n"
            "windquant_learner_policy_lag_versions_sum 1\n"
            "windquant_learner_policy_lag_versions_count 1\n");
}

TEST(TextFormatTest, EscapingGolden) {
  Registry registry;
  Family<Counter>* f =
      registry
          .AddCounter("windquant_net_rpc_errors_total",
                      "Errors with \\ backslash, \"quotes\"\nand a newline.", {"code"})
          .value();
  f->Labels({"a\\b \"q\"\nz"}).Inc();
  f->Labels({"ünï"}).Inc();
  EXPECT_EQ(registry.TextExposition(),
            "# HELP windquant_net_rpc_errors_total Errors with \\\\ backslash, \"quotes\"\\nand a "
            "newline.\n"
            "# TYPE windquant_net_rpc_errors_total counter\n"
            "windquant_net_rpc_errors_total{code=\"a\\\\b \\\"q\\\"\\nz\"} 1\n"
            "windquant_net_rpc_errors_total{code=\"ünï\"} 1\n");
}

TEST(TextFormatTest, LabelledFamilyWithoutChildrenHasOnlyMetadata) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter("windquant_net_rpc_errors_total", "E.", {"code"}).ok());
  EXPECT_EQ(registry.TextExposition(),
            "# HELP windquant_net_rpc_errors_total E.\n"
            "# TYPE windquant_net_rpc_errors_total counter\n");
}

TEST(FormatValueTest, SpecialAndShortest) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(3), "3");
  EXPECT_EQ(FormatValue(123456789012.0), "123456789012");
  EXPECT_EQ(FormatValue(1048576), "1048576");
  EXPECT_EQ(FormatValue(-0.0), "0");
  EXPECT_EQ(FormatValue(0.0005), "0.0005");
  EXPECT_EQ(FormatValue(1e-7), "1e-07");
  EXPECT_EQ(FormatValue(1e21), "1e+21");
  EXPECT_EQ(FormatValue(2.556), "2.556");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  EXPECT_EQ(std::stod(FormatValue(1.0 / 3.0)), 1.0 / 3.0);  // round-trips
}

TEST(EscapeTest, HelpKeepsQuotes) {
  EXPECT_EQ(EscapeHelp("a\"b\\c\nd"), "a\"b\\\\c\\nd");
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

}  // namespace
}  // namespace windquant::metrics
