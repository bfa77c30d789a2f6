#include "common/metrics/metric_names.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::metrics {
namespace {

using ::windquant::testing::StatusIs;

TEST(MetricNamesTest, CatalogueHasTheOperatorMetrics) {
  std::set<std::string> names;
  for (const MetricSpec& spec : AllMetricSpecs()) {
    EXPECT_TRUE(names.insert(std::string(spec.name)).second) << "duplicate " << spec.name;
    EXPECT_FALSE(spec.help.empty()) << spec.name;
    EXPECT_TRUE(ValidateMetricName(spec.name, spec.type).ok()) << spec.name;
    EXPECT_EQ(spec.type == MetricType::kHistogram, !spec.bounds.empty()) << spec.name;
  }
  for (const char* expected :
       {"windquant_learner_episodes_total", "windquant_learner_transitions_total",
        "windquant_learner_ppo_updates_total", "windquant_learner_policy_version",
        "windquant_learner_policy_lag_versions", "windquant_learner_mean_episode_reward",
        "windquant_evaluator_lambda", "windquant_learner_target_bitwidth",
        "windquant_learner_best_plan_bitwidth", "windquant_learner_best_plan_perplexity",
        "windquant_evaluator_evaluation_duration_seconds", "windquant_evaluator_queue_depth",
        "windquant_actor_forward_duration_seconds", "windquant_learner_connected_actors",
        "windquant_net_sent_bytes_total", "windquant_net_received_bytes_total",
        "windquant_net_rpc_errors_total", "windquant_learner_lambda",
        "windquant_actor_episodes_total"}) {
    EXPECT_EQ(names.count(expected), 1u) << expected;
  }
  EXPECT_EQ(names.size(), 19u);
}

TEST(MetricNamesTest, RegistersAllIdempotently) {
  Registry registry;
  ASSERT_TRUE(RegisterWindquantMetrics(registry).ok());
  ASSERT_TRUE(RegisterWindquantMetrics(registry).ok());
  EXPECT_EQ(registry.Collect().size(), AllMetricSpecs().size());
  auto errors = CounterFamily(registry, kNetRpcErrorsTotal);
  ASSERT_TRUE(errors.ok()) << errors.status();
  (*errors)->Labels({"UNAVAILABLE"}).Inc();
  auto again = CounterFamily(registry, kNetRpcErrorsTotal);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Labels({"UNAVAILABLE"}).Value(), 1.0);
}

TEST(MetricNamesTest, TypeMismatchIsAnError) {
  Registry registry;
  EXPECT_EQ(GaugeFamily(registry, kLearnerEpisodesTotal).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CounterFamily(registry, kActorForwardDurationSeconds).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(HistogramFamily(registry, kActorForwardDurationSeconds).ok());
}

TEST(MetricNamesTest, ConflictingEarlierRegistrationFails) {
  Registry registry;
  ASSERT_TRUE(registry.AddGauge(kEvaluatorLambda.name, "something else").ok());
  EXPECT_THAT(RegisterWindquantMetrics(registry),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       absl::StrCat("metric ", kEvaluatorLambda.name, ": already registered")));
}

}  // namespace
}  // namespace windquant::metrics
