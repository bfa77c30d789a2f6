#include "common/metrics/metric_names.h"

#include "absl/strings/str_cat.h"

namespace windquant::metrics {
namespace {

std::vector<std::string> Labels(const MetricSpec& spec) {
  return std::vector<std::string>(spec.label_names.begin(), spec.label_names.end());
}

absl::Status CheckType(const MetricSpec& spec, MetricType want) {
  if (spec.type == want) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "metric ", spec.name, " is a ", MetricTypeName(spec.type), ", not a ", MetricTypeName(want)));
}

constexpr MetricSpec kAll[] = {
    kLearnerEpisodesTotal,
    kLearnerTransitionsTotal,
    kLearnerPpoUpdatesTotal,
    kLearnerPolicyVersion,
    kLearnerPolicyLagVersions,
    kLearnerMeanEpisodeReward,
    kLearnerTargetBits,
    kLearnerBestPlanEffectiveBits,
    kLearnerBestPlanPerplexity,
    kLearnerLambda,
    kLearnerMaxPerplexityIncreaseRatio,
    kLearnerBestPlanPerplexityIncreaseRatio,
    kLearnerConnectedActors,
    kLearnerCheckpointFailuresTotal,
    kLearnerCheckpointLastGoodUpdate,
    kEvaluatorLambda,
    kEvaluatorEvaluationDurationSeconds,
    kEvaluatorQueueDepth,
    kActorForwardDurationSeconds,
    kActorEpisodesTotal,
    kNetSentBytesTotal,
    kNetReceivedBytesTotal,
    kNetRpcErrorsTotal,
};

}  // namespace

absl::Span<const MetricSpec> AllMetricSpecs() { return kAll; }

absl::StatusOr<Family<Counter>*> CounterFamily(Registry& registry, const MetricSpec& spec) {
  if (absl::Status s = CheckType(spec, MetricType::kCounter); !s.ok()) return s;
  return registry.AddCounter(spec.name, spec.help, Labels(spec));
}

absl::StatusOr<Family<Gauge>*> GaugeFamily(Registry& registry, const MetricSpec& spec) {
  if (absl::Status s = CheckType(spec, MetricType::kGauge); !s.ok()) return s;
  return registry.AddGauge(spec.name, spec.help, Labels(spec));
}

absl::StatusOr<Family<Histogram>*> HistogramFamily(Registry& registry, const MetricSpec& spec) {
  if (absl::Status s = CheckType(spec, MetricType::kHistogram); !s.ok()) return s;
  return registry.AddHistogram(spec.name, spec.help,
                               std::vector<double>(spec.bounds.begin(), spec.bounds.end()),
                               Labels(spec));
}

absl::Status RegisterWindquantMetrics(Registry& registry) {
  for (const MetricSpec& spec : AllMetricSpecs()) {
    absl::Status status;
    switch (spec.type) {
      case MetricType::kCounter:
        status = CounterFamily(registry, spec).status();
        break;
      case MetricType::kGauge:
        status = GaugeFamily(registry, spec).status();
        break;
      case MetricType::kHistogram:
        status = HistogramFamily(registry, spec).status();
        break;
    }
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace windquant::metrics
