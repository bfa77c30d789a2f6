// A small thread-safe metrics registry (prometheus-cpp is not packaged on Debian 12).
//
// A Registry owns metric families; a family has a name, help text, a type and fixed label
// names, and owns one child metric per distinct tuple of label values, e.g.
//   windquant_net_rpc_errors_total{code="UNAVAILABLE"}.
// Names follow STYLE.md: windquant_<part>_<what>_<unit>, base units, counters end in
// _total; help text is required. Violations are reported as absl::Status at registration.
//
// Ownership: families and children live as long as their Registry, so callers cache the
// returned pointers/references and update them without any lookup on the hot path.
// Thread-safety: every method of Registry, Family and the metrics is thread-safe.
// Registering the same name twice with identical type, help, labels and buckets returns
// the existing family, so independent components can each register what they use.
#ifndef WINDQUANT_COMMON_METRICS_REGISTRY_H_
#define WINDQUANT_COMMON_METRICS_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/metric.h"

namespace windquant::metrics {

// OK iff `name` is a valid windquant metric name for `type` (see the file comment).
absl::Status ValidateMetricName(absl::string_view name, MetricType type);
// OK iff `name` is a valid Prometheus label name, not reserved ("__*", "le" on histograms).
absl::Status ValidateLabelName(absl::string_view name, MetricType type);

// Type-erased part of a family, used to collect the registry.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  virtual MetricType type() const = 0;
  virtual FamilySnapshot Collect() const = 0;

 protected:
  FamilyBase(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
};

// The children of one metric name; T is Counter, Gauge or Histogram.
template <typename T>
class Family final : public FamilyBase {
 public:
  // Internal: use Registry::Add*.
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> bounds);

  // The child for `label_values` (one per label name, in order), created on first use.
  // A wrong number of values is a programmer error and aborts with a message.
  // Label values may be any UTF-8 text; they are escaped on exposition.
  T& Labels(const std::vector<std::string>& label_values);
  // The single child of a family without labels (created at registration, so it is
  // exported as 0 before its first update). Aborts if the family has labels.
  T& Get() { return Labels({}); }

  MetricType type() const override { return T::kType; }
  FamilySnapshot Collect() const override;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;  // histograms only
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_ ABSL_GUARDED_BY(mu_);
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The process-wide registry served by each process's MetricsServer. Never destroyed.
  static Registry& Default();

  // Register (or look up an identical) family. Errors: INVALID_ARGUMENT for a bad name,
  // empty help, bad or duplicate label names, bad buckets; ALREADY_EXISTS when the name is
  // registered with a different type, help, labels or buckets.
  absl::StatusOr<Family<Counter>*> AddCounter(absl::string_view name, absl::string_view help,
                                              std::vector<std::string> label_names = {});
  absl::StatusOr<Family<Gauge>*> AddGauge(absl::string_view name, absl::string_view help,
                                          std::vector<std::string> label_names = {});
  // `bounds`: strictly increasing finite upper bounds in base units (+Inf is implicit).
  absl::StatusOr<Family<Histogram>*> AddHistogram(absl::string_view name, absl::string_view help,
                                                  std::vector<double> bounds,
                                                  std::vector<std::string> label_names = {});

  // All families sorted by name, children sorted by label values.
  std::vector<FamilySnapshot> Collect() const;
  // Collect() in the Prometheus text format 0.0.4 (text_format.h).
  std::string TextExposition() const;

 private:
  template <typename T>
  absl::StatusOr<Family<T>*> Add(absl::string_view name, absl::string_view help,
                                 std::vector<std::string> label_names, std::vector<double> bounds);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<FamilyBase>, std::less<>> families_ ABSL_GUARDED_BY(mu_);
};

}  // namespace windquant::metrics

#endif  // WINDQUANT_COMMON_METRICS_REGISTRY_H_
