// Metric value types of the windquant metrics registry: Counter, Gauge, Histogram.
//
// Each is a lock-free (atomic) cell owned by a Family in a Registry (registry.h);
// callers hold plain pointers/references that stay valid for the registry's lifetime.
// All methods are thread-safe.
#ifndef WINDQUANT_COMMON_METRICS_METRIC_H_
#define WINDQUANT_COMMON_METRICS_METRIC_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace windquant::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// Name used on the "# TYPE" line: "counter", "gauge", "histogram".
const char* MetricTypeName(MetricType type);

// A monotonically increasing value (events, bytes). Exposed as <name> (which ends in _total).
class Counter {
 public:
  static constexpr MetricType kType = MetricType::kCounter;

  // Adds `v`. Counters never go down: a negative or NaN `v` is ignored.
  void Inc(double v = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down (queue depth, current policy version).
class Gauge {
 public:
  static constexpr MetricType kType = MetricType::kGauge;

  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Inc(double v = 1.0);
  void Dec(double v = 1.0) { Inc(-v); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Counts observations into fixed buckets given by their upper bounds (inclusive, in base
// units: seconds, bytes, ...). The implicit last bucket is +Inf.
class Histogram {
 public:
  static constexpr MetricType kType = MetricType::kHistogram;

  // `bounds` must be strictly increasing and finite (checked by Registry::AddHistogram).
  explicit Histogram(std::vector<double> bounds);

  // Records `v` in the first bucket whose bound is >= v (NaN goes to +Inf only).
  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;        // upper bounds, without +Inf
    std::vector<uint64_t> cumulative;  // bounds.size() + 1 entries, the last is +Inf
    double sum = 0.0;
    uint64_t count = 0;  // == cumulative.back()
  };
  // A point-in-time copy; count always equals the +Inf bucket.
  Snapshot Collect() const;

  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1, non-cumulative
  std::atomic<double> sum_{0.0};
};

// A point-in-time copy of one family, the input of the text exposition (text_format.h).
struct MetricSnapshot {
  std::vector<std::string> label_values;  // one per FamilySnapshot::label_names
  double value = 0.0;                     // counters and gauges
  Histogram::Snapshot histogram;          // histograms
};
struct FamilySnapshot {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<std::string> label_names;
  std::vector<MetricSnapshot> metrics;  // sorted by label values
};

// Bucket helpers. `count` bounds: start, start*factor, ... / start, start+width, ...
std::vector<double> ExponentialBuckets(double start, double factor, int count);
std::vector<double> LinearBuckets(double start, double width, int count);

}  // namespace windquant::metrics

#endif  // WINDQUANT_COMMON_METRICS_METRIC_H_
