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
  for (const char* expected : {"windquant_learner_episodes_total",
                               "windquant_learner_transitions_total",
                               "windquant_learner_ppo_updates_total",
                               "windquant_learner_policy_version",
                               "windquant_learner_policy_lag_versions",
                               "windquant_learner_mean_episode_reward",
                               "windquant_evaluator_lambda",
                               "windquant_learner_target_bitwidth",
                               "windquant_learner_best_plan_bitwidth",
                               "windquant_learner_best_plan_perplexity",
                               "windquant_evaluator_evaluation_duration_seconds",
                               "windquant_evaluator_queue_depth",
                               "windquant_actor_forward_duration_seconds",
                               "windquant_learner_connected_actors",
                               "windquant_net_sent_bytes_total",
                               "windquant_net_received_bytes_total",
                               "windquant_net_rpc_errors_total",
                               "windquant_learner_lambda",
                               "windquant_actor_episodes_total",
                               "windquant_learner_checkpoint_failures_total",
                               "windquant_learner_checkpoint_last_good_update",
                               "windquant_learner_max_perplexity_increase_ratio",
                               "windquant_learner_best_plan_perplexity_increase_ratio"}) {
    EXPECT_EQ(names.count(expected), 1u) << expected;
  }
  EXPECT_EQ(names.size(), 23u);
}

// The latency buckets reach the slowest calls expected at 70B (the derivation is next to
// the bounds in metric_names.h) with room for a pod at half that speed, and still resolve
// the tests' millisecond calls.
TEST(MetricNamesTest, LatencyBucketsSpanTinyModelsTo70bOnCpu) {
  constexpr double kSlowest70bStageForwardSeconds = 840;
  constexpr double kSlowest70bEvaluationSeconds = 11800;
  for (const MetricSpec* spec :
       {&kActorForwardDurationSeconds, &kEvaluatorEvaluationDurationSeconds}) {
    SCOPED_TRACE(spec->name);
    ASSERT_FALSE(spec->bounds.empty());
    for (size_t i = 1; i < spec->bounds.size(); ++i) {
      EXPECT_LT(spec->bounds[i - 1], spec->bounds[i]) << "bound " << i;
    }
    Registry registry;
    auto family = HistogramFamily(registry, *spec);
    ASSERT_TRUE(family.ok()) << family.status();
  }
  EXPECT_EQ(kActorForwardDurationSeconds.bounds.size(), 21u);
  EXPECT_LE(kActorForwardDurationSeconds.bounds.front(), 0.001);
  EXPECT_GE(kActorForwardDurationSeconds.bounds.back(), 2 * kSlowest70bStageForwardSeconds);
  EXPECT_EQ(kEvaluatorEvaluationDurationSeconds.bounds.size(), 17u);
  EXPECT_LE(kEvaluatorEvaluationDurationSeconds.bounds.front(), 0.1);
  EXPECT_GE(kEvaluatorEvaluationDurationSeconds.bounds.back(), 2 * kSlowest70bEvaluationSeconds);
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
