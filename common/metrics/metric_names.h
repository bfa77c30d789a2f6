// Catalogue of the windquant metrics operators rely on (dashboards, alerts in deploy/).
//
// Names only: each service registers the catalogue (RegisterWindquantMetrics) into its
// registry and updates the metrics it owns, e.g.
//   auto* episodes = registry.AddCounter(kLearnerEpisodesTotal.name,
//                                        kLearnerEpisodesTotal.help).value();
// or, shorter, CounterFamily(registry, kLearnerEpisodesTotal)->Get().Inc();
// Changing a name here breaks dashboards: treat it as an API.
#ifndef WINDQUANT_COMMON_METRICS_METRIC_NAMES_H_
#define WINDQUANT_COMMON_METRICS_METRIC_NAMES_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/metrics/registry.h"

namespace windquant::metrics {

struct MetricSpec {
  absl::string_view name;
  absl::string_view help;
  MetricType type;
  absl::Span<const absl::string_view> label_names = {};
  absl::Span<const double> bounds = {};  // histograms only, base units
};

// Bucket bounds. The slowest expected calls are those of LLaMA-3-70B as
// configs/llama3-70b.yaml lays it out (3 stages of up to 27 layers, micro-batches of
// 2 x 2048 tokens, 12 micro-batches per plan) while the actors compute on their pods' 8 CPU
// cores, as the code does today (docs/capacity.md, "Not implemented"): at 240 GFLOP/s (4 x
// the 60 GFLOP/s measured on 2 cores) one stage forward is 4096 tokens x 48.0 GFLOP
// (142.27 GFLOP per token over 80 layers, x 27/80) = 820 s, plus ~20 s of plan application
// = ~840 s; one plan is (12 + 3 - 1) of them = ~11,800 s. On the GPUs the same calls take
// 2.8 s and 39 s, and the tests' tiny models take milliseconds, so the bounds
// span both ends.
//
// Evaluating one plan (calibration-slice loss + selection perplexity): 0.1 s .. ~3.3 h.
inline constexpr double kEvaluationDurationBoundsSeconds[] = {
    0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000};
// One stage forward pass of one micro-batch on an actor: 0.5 ms .. ~14 min.
inline constexpr double kForwardDurationBoundsSeconds[] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
    2.5,    5,     10,     25,    50,   100,   250,  500, 1000, 2500};
// Policy versions between the policy that acted and the learner's current one.
inline constexpr double kPolicyLagBoundsVersions[] = {0, 1, 2, 3, 4, 6, 8, 12, 16, 32};

inline constexpr absl::string_view kCodeLabel[] = {"code"};

// learner
inline constexpr MetricSpec kLearnerEpisodesTotal{
    "windquant_learner_episodes_total", "Episodes (complete plans) received by the learner.",
    MetricType::kCounter};
inline constexpr MetricSpec kLearnerTransitionsTotal{
    "windquant_learner_transitions_total", "Transitions (unit decisions) ingested by the learner.",
    MetricType::kCounter};
inline constexpr MetricSpec kLearnerPpoUpdatesTotal{"windquant_learner_ppo_updates_total",
                                                    "PPO updates applied to the policy.",
                                                    MetricType::kCounter};
inline constexpr MetricSpec kLearnerPolicyVersion{"windquant_learner_policy_version",
                                                  "Version of the learner's current policy.",
                                                  MetricType::kGauge};
inline constexpr MetricSpec kLearnerPolicyLagVersions{
    "windquant_learner_policy_lag_versions",
    "Policy versions between the policy that produced an episode and the current one.",
    MetricType::kHistogram,
    {},
    kPolicyLagBoundsVersions};
inline constexpr MetricSpec kLearnerMeanEpisodeReward{
    "windquant_learner_mean_episode_reward", "Mean reward of the episodes of the last update.",
    MetricType::kGauge};
inline constexpr MetricSpec kLearnerTargetBits{
    "windquant_learner_target_bitwidth",
    "Current curriculum target of average bits per weight (a bit-width, not a data size).",
    MetricType::kGauge};
inline constexpr MetricSpec kLearnerBestPlanEffectiveBits{
    "windquant_learner_best_plan_bitwidth",
    "Average effective bits per weight of the best plan so far (a bit-width).", MetricType::kGauge};
inline constexpr MetricSpec kLearnerBestPlanPerplexity{
    "windquant_learner_best_plan_perplexity", "Calibration perplexity of the best plan so far.",
    MetricType::kGauge};
inline constexpr MetricSpec kLearnerLambda{
    "windquant_learner_lambda",
    "Lagrange multiplier the evaluator last pushed to the learner (what it prices: "
    "lagrange.prices, docs/lagrange.md).",
    MetricType::kGauge};
inline constexpr MetricSpec kLearnerMaxPerplexityIncreaseRatio{
    "windquant_learner_max_perplexity_increase_ratio",
    "Quality-target mode's epsilon: the maximum relative perplexity increase on the selection "
    "slice (0 in the fixed-budget mode).",
    MetricType::kGauge};
inline constexpr MetricSpec kLearnerBestPlanPerplexityIncreaseRatio{
    "windquant_learner_best_plan_perplexity_increase_ratio",
    "Relative perplexity increase (PPL / FP PPL - 1) of the best plan so far on the selection "
    "slice.",
    MetricType::kGauge};
inline constexpr MetricSpec kLearnerCheckpointFailuresTotal{
    "windquant_learner_checkpoint_failures_total",
    "Checkpoint writes that failed (disk full, I/O error); the last good checkpoint was kept.",
    MetricType::kCounter};
inline constexpr MetricSpec kLearnerCheckpointLastGoodUpdate{
    "windquant_learner_checkpoint_last_good_update",
    "PPO update of the newest checkpoint on disk (a restart resumes there); -1 before any.",
    MetricType::kGauge};
inline constexpr MetricSpec kLearnerConnectedActors{"windquant_learner_connected_actors",
                                                    "Actors currently connected to the learner.",
                                                    MetricType::kGauge};

// evaluator
inline constexpr MetricSpec kEvaluatorLambda{
    "windquant_evaluator_lambda",
    "Current Lagrange multiplier (what it prices: lagrange.prices, docs/lagrange.md).",
    MetricType::kGauge};
inline constexpr MetricSpec kEvaluatorEvaluationDurationSeconds{
    "windquant_evaluator_evaluation_duration_seconds",
    "Wall time to evaluate one plan.",
    MetricType::kHistogram,
    {},
    kEvaluationDurationBoundsSeconds};
inline constexpr MetricSpec kEvaluatorQueueDepth{
    "windquant_evaluator_queue_depth", "Plans waiting for evaluation.", MetricType::kGauge};

// actor
inline constexpr MetricSpec kActorForwardDurationSeconds{
    "windquant_actor_forward_duration_seconds",
    "Wall time of one forward pass of this actor's stage.",
    MetricType::kHistogram,
    {},
    kForwardDurationBoundsSeconds};
inline constexpr MetricSpec kActorEpisodesTotal{
    "windquant_actor_episodes_total", "Episodes (complete plans) this actor's rollouts produced.",
    MetricType::kCounter};

// net (every process)
inline constexpr MetricSpec kNetSentBytesTotal{"windquant_net_sent_bytes_total",
                                               "Bytes sent on the wire (payloads of RPC messages).",
                                               MetricType::kCounter};
inline constexpr MetricSpec kNetReceivedBytesTotal{
    "windquant_net_received_bytes_total", "Bytes received on the wire (payloads of RPC messages).",
    MetricType::kCounter};
inline constexpr MetricSpec kNetRpcErrorsTotal{"windquant_net_rpc_errors_total",
                                               "Failed RPCs by gRPC status code name.",
                                               MetricType::kCounter, kCodeLabel};

// Every entry above, in declaration order.
absl::Span<const MetricSpec> AllMetricSpecs();

// Registers every catalogue metric in `registry` (idempotent). Errors as Registry::Add*.
absl::Status RegisterWindquantMetrics(Registry& registry);

// Register-or-look-up one spec. FAILED_PRECONDITION if the spec's type does not match.
absl::StatusOr<Family<Counter>*> CounterFamily(Registry& registry, const MetricSpec& spec);
absl::StatusOr<Family<Gauge>*> GaugeFamily(Registry& registry, const MetricSpec& spec);
absl::StatusOr<Family<Histogram>*> HistogramFamily(Registry& registry, const MetricSpec& spec);

}  // namespace windquant::metrics

#endif  // WINDQUANT_COMMON_METRICS_METRIC_NAMES_H_
