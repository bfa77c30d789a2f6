#include "common/metrics/registry.h"

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::metrics {
namespace {

using ::windquant::testing::StatusIs;

using ::testing::HasSubstr;

TEST(ValidateMetricNameTest, AcceptsStyleNames) {
  EXPECT_TRUE(ValidateMetricName("windquant_learner_episodes_total", MetricType::kCounter).ok());
  EXPECT_TRUE(ValidateMetricName("windquant_net_sent_bytes_total", MetricType::kCounter).ok());
  EXPECT_TRUE(ValidateMetricName("windquant_evaluator_lambda", MetricType::kGauge).ok());
  EXPECT_TRUE(
      ValidateMetricName("windquant_actor_forward_duration_seconds", MetricType::kHistogram).ok());
}

TEST(ValidateMetricNameTest, RejectsBadNames) {
  struct Case {
    const char* name;
    MetricType type;
    const char* why;
  };
  const Case cases[] = {
      {"learner_episodes_total", MetricType::kCounter, "windquant_"},
      {"windquant_learner_episodes", MetricType::kCounter, "_total"},
      {"windquant_learner_total", MetricType::kCounter, "<what>"},
      {"windquant_learner_depth_total", MetricType::kGauge, "only counters"},
      {"windquant_lambda", MetricType::kGauge, "<part>_<what>"},
      {"windquant_Learner_depth", MetricType::kGauge, "lower_snake_case"},
      {"windquant_learner__depth", MetricType::kGauge, "lower_snake_case"},
      {"windquant_learner_depth_", MetricType::kGauge, "lower_snake_case"},
      {"windquant_learner-depth", MetricType::kGauge, "lower_snake_case"},
      {"", MetricType::kGauge, "lower_snake_case"},
      {"windquant_actor_forward_duration_ms", MetricType::kHistogram, "base units"},
      {"windquant_net_sent_megabytes_total", MetricType::kCounter, "base units"},
      {"windquant_evaluator_plans_count", MetricType::kGauge, "reserved"},
      {"windquant_evaluator_latency_bucket", MetricType::kGauge, "reserved"},
  };
  for (const Case& c : cases) {
    absl::Status s = ValidateMetricName(c.name, c.type);
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                            absl::StrCat("metric name '", c.name, "': ")))
        << c.name;
    EXPECT_THAT(s.message(), HasSubstr(c.why)) << c.name;
  }
}

TEST(ValidateLabelNameTest, AcceptsAndRejects) {
  EXPECT_TRUE(ValidateLabelName("code", MetricType::kCounter).ok());
  EXPECT_TRUE(ValidateLabelName("_x9", MetricType::kCounter).ok());
  EXPECT_TRUE(ValidateLabelName("le", MetricType::kGauge).ok());
  EXPECT_THAT(ValidateLabelName("le", MetricType::kHistogram),
              StatusIs(absl::StatusCode::kInvalidArgument, "label name 'le'"));
  EXPECT_THAT(ValidateLabelName("__name__", MetricType::kGauge),
              StatusIs(absl::StatusCode::kInvalidArgument, "label name '__name__'"));
  EXPECT_THAT(ValidateLabelName("9x", MetricType::kGauge),
              StatusIs(absl::StatusCode::kInvalidArgument, "label name '9x'"));
  EXPECT_THAT(ValidateLabelName("a-b", MetricType::kGauge),
              StatusIs(absl::StatusCode::kInvalidArgument, "label name 'a-b'"));
  EXPECT_THAT(ValidateLabelName("", MetricType::kGauge),
              StatusIs(absl::StatusCode::kInvalidArgument, "label name ''"));
}

TEST(RegistryTest, RequiresHelp) {
  Registry registry;
  auto family = registry.AddGauge("windquant_test_depth", "");
  EXPECT_THAT(family, StatusIs(absl::StatusCode::kInvalidArgument,
                               "metric windquant_test_depth: help text is required"));
}

TEST(RegistryTest, RejectsDuplicateAndReservedLabels) {
  Registry registry;
  EXPECT_EQ(
      registry.AddCounter("windquant_test_errors_total", "h", {"code", "code"}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      registry.AddHistogram("windquant_test_latency_seconds", "h", {1.0}, {"le"}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(RegistryTest, RejectsBadBuckets) {
  Registry registry;
  const double inf = std::numeric_limits<double>::infinity();
  for (const std::vector<double>& bounds :
       std::vector<std::vector<double>>{{}, {1.0, 1.0}, {2.0, 1.0}, {1.0, inf}, {std::nan("")}}) {
    EXPECT_EQ(registry.AddHistogram("windquant_test_latency_seconds", "h", bounds).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(RegistryTest, ReRegistrationReturnsSameFamilyOrConflicts) {
  Registry registry;
  auto a = registry.AddCounter("windquant_test_events_total", "Events.", {"kind"});
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = registry.AddCounter("windquant_test_events_total", "Events.", {"kind"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(registry.AddCounter("windquant_test_events_total", "Other.", {"kind"}).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddCounter("windquant_test_events_total", "Events.").status().code(),
            absl::StatusCode::kAlreadyExists);
  auto h = registry.AddHistogram("windquant_test_latency_seconds", "L.", {1, 2});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(registry.AddHistogram("windquant_test_latency_seconds", "L.", {1, 3}).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddGauge("windquant_test_latency_seconds", "L.").status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(CounterTest, IncrementsAndIgnoresNegative) {
  Counter c;
  c.Inc();
  c.Inc(2.5);
  c.Inc(-10);
  c.Inc(std::nan(""));
  EXPECT_DOUBLE_EQ(c.Value(), 3.5);
}

TEST(GaugeTest, SetIncDec) {
  Gauge g;
  g.Set(10);
  g.Inc(2);
  g.Dec(0.5);
  g.Dec();
  EXPECT_DOUBLE_EQ(g.Value(), 10.5);
}

TEST(HistogramTest, BucketsAreInclusiveUpperBounds) {
  Histogram h({1.0, 2.0, 5.0});
  for (double v : {0.5, 1.0, 1.5, 2.0, 4.0, 5.0, 7.0}) h.Observe(v);
  Histogram::Snapshot s = h.Collect();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 6, 7}));
  EXPECT_EQ(s.count, 7u);
  EXPECT_DOUBLE_EQ(s.sum, 21.0);
}

TEST(FamilyTest, UnlabelledChildExistsAtRegistration) {
  Registry registry;
  auto family = registry.AddGauge("windquant_test_depth", "Depth.");
  ASSERT_TRUE(family.ok());
  std::vector<FamilySnapshot> snapshot = registry.Collect();
  ASSERT_EQ(snapshot.size(), 1u);
  ASSERT_EQ(snapshot[0].metrics.size(), 1u);
  EXPECT_EQ(snapshot[0].metrics[0].value, 0.0);
  (*family)->Get().Set(3);
  EXPECT_EQ(registry.Collect()[0].metrics[0].value, 3.0);
}

TEST(FamilyTest, LabelledChildrenAreStableAndSorted) {
  Registry registry;
  auto family = registry.AddCounter("windquant_test_errors_total", "Errors.", {"code"});
  ASSERT_TRUE(family.ok());
  Counter& unavailable = (*family)->Labels({"UNAVAILABLE"});
  (*family)->Labels({"INTERNAL"}).Inc(2);
  unavailable.Inc();
  EXPECT_EQ(&(*family)->Labels({"UNAVAILABLE"}), &unavailable);
  FamilySnapshot s = registry.Collect()[0];
  ASSERT_EQ(s.metrics.size(), 2u);
  EXPECT_EQ(s.metrics[0].label_values, std::vector<std::string>{"INTERNAL"});
  EXPECT_EQ(s.metrics[0].value, 2.0);
  EXPECT_EQ(s.metrics[1].label_values, std::vector<std::string>{"UNAVAILABLE"});
  EXPECT_EQ(s.metrics[1].value, 1.0);
}

TEST(FamilyDeathTest, WrongLabelCountAborts) {
  Registry registry;
  auto family = registry.AddCounter("windquant_test_errors_total", "Errors.", {"code"});
  ASSERT_TRUE(family.ok());
  EXPECT_DEATH((*family)->Get(), "has 1 labels");
}

TEST(RegistryTest, CollectIsSortedByName) {
  Registry registry;
  ASSERT_TRUE(registry.AddGauge("windquant_zz_depth", "Z.").ok());
  ASSERT_TRUE(registry.AddGauge("windquant_aa_depth", "A.").ok());
  ASSERT_TRUE(registry.AddGauge("windquant_mm_depth", "M.").ok());
  std::vector<FamilySnapshot> s = registry.Collect();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].name, "windquant_aa_depth");
  EXPECT_EQ(s[1].name, "windquant_mm_depth");
  EXPECT_EQ(s[2].name, "windquant_zz_depth");
}

TEST(RegistryTest, DefaultIsASingleton) { EXPECT_EQ(&Registry::Default(), &Registry::Default()); }

// Threads hammer one counter, a labelled family (creating children concurrently), a gauge
// and a histogram while another thread collects; totals must be exact.
TEST(RegistryConcurrencyTest, ConcurrentUpdatesAreExact) {
  Registry registry;
  Family<Counter>* counter = registry.AddCounter("windquant_test_events_total", "E.").value();
  Family<Counter>* errors =
      registry.AddCounter("windquant_test_errors_total", "E.", {"code"}).value();
  Family<Gauge>* gauge = registry.AddGauge("windquant_test_depth", "D.").value();
  Family<Histogram>* hist =
      registry.AddHistogram("windquant_test_latency_seconds", "L.", {0.5, 1.5}).value();
  constexpr int kThreads = 8;
  constexpr int kIters = 20000;
  std::atomic<bool> done{false};
  std::thread collector([&] {
    while (!done.load()) {
      for (const FamilySnapshot& f : registry.Collect()) {
        for (const MetricSnapshot& m : f.metrics) {
          if (f.type == MetricType::kHistogram) {
            ASSERT_EQ(m.histogram.count, m.histogram.cumulative.back());
          }
        }
      }
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        counter->Get().Inc();
        errors->Labels({i % 2 == 0 ? "A" : "B"}).Inc(0.5);
        gauge->Get().Inc();
        gauge->Get().Dec(t % 2 == 0 ? 1.0 : 0.0);
        hist->Get().Observe(i % 2);  // 0 -> le 0.5, 1 -> le 1.5
      }
    });
  }
  for (std::thread& t : threads) t.join();
  done = true;
  collector.join();
  EXPECT_EQ(counter->Get().Value(), kThreads * kIters);
  EXPECT_EQ(errors->Labels({"A"}).Value(), kThreads * kIters / 2 * 0.5);
  EXPECT_EQ(errors->Labels({"B"}).Value(), kThreads * kIters / 2 * 0.5);
  EXPECT_EQ(gauge->Get().Value(), kThreads / 2 * kIters);
  Histogram::Snapshot h = hist->Get().Collect();
  EXPECT_EQ(h.cumulative,
            (std::vector<uint64_t>{kThreads * kIters / 2, kThreads * kIters, kThreads * kIters}));
  EXPECT_EQ(h.sum, kThreads * kIters / 2);
}

}  // namespace
}  // namespace windquant::metrics
