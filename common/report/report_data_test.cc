#include "common/report/report_data.h"

#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::report {
namespace {

using ::testing::HasSubstr;
using ::windquant::testing::StatusIs;

ReportData Sample() {
  ReportData d;
  d.model_name = "stories260k <tiny> & \"friends\"";
  d.fingerprint = "abc123";
  d.fp_perplexity = 12.5;
  d.target_bits = 2.0;
  d.units = {{0, 0, 1024, 4.25}, {0, 6, 2048, 2.125}, {1, 3, 512, 1.0}};
  d.points = {{"rl", 1.98, 20.5}, {"uniform-2", 2.0, 31.0}, {"greedy", 1.99, std::nan("")}};
  d.winner = "rl";
  d.curve = {{0, -1.5, std::nan(""), 2.6, 0.0, 3.0}, {1, -0.5, 25.0, 2.1, 0.25, 2.0}};
  d.wall_time_s = 61.25;
  d.notes = {"embeddings and lm_head stay FP16", "line two"};
  return d;
}

TEST(ReportDataTest, RoundTripsThroughJson) {
  const ReportData d = Sample();
  const std::string text = ToJson(d);
  absl::StatusOr<ReportData> back = FromJson(text, "report.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model_name, d.model_name);
  EXPECT_EQ(back->fingerprint, d.fingerprint);
  EXPECT_DOUBLE_EQ(back->fp_perplexity, d.fp_perplexity);
  EXPECT_DOUBLE_EQ(back->target_bits, d.target_bits);
  ASSERT_EQ(back->units.size(), d.units.size());
  for (size_t i = 0; i < d.units.size(); ++i) {
    EXPECT_EQ(back->units[i].layer, d.units[i].layer);
    EXPECT_EQ(back->units[i].matrix, d.units[i].matrix);
    EXPECT_EQ(back->units[i].n_weights, d.units[i].n_weights);
    EXPECT_DOUBLE_EQ(back->units[i].bits, d.units[i].bits);
  }
  ASSERT_EQ(back->points.size(), 3u);
  EXPECT_EQ(back->points[1].label, "uniform-2");
  EXPECT_DOUBLE_EQ(back->points[0].effective_bits, 1.98);
  EXPECT_TRUE(std::isnan(back->points[2].perplexity));  // null <-> NaN
  ASSERT_EQ(back->curve.size(), 2u);
  EXPECT_TRUE(std::isnan(back->curve[0].best_perplexity));
  EXPECT_DOUBLE_EQ(back->curve[1].lambda, 0.25);
  EXPECT_EQ(back->curve[1].update, 1);
  EXPECT_EQ(back->winner, "rl");
  EXPECT_DOUBLE_EQ(back->wall_time_s, 61.25);
  EXPECT_EQ(back->notes, d.notes);
  // Deterministic: the same data gives the same bytes.
  EXPECT_EQ(ToJson(*back), text);
}

TEST(ReportDataTest, OptionalKeysMayBeAbsent) {
  absl::StatusOr<ReportData> d = FromJson(
      R"({"model_name":"m","fingerprint":"f","fp_perplexity":3,"target_bits":2,
          "winner":"rl","units":[],"points":[]})",
      "r.json");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->curve.empty());
  EXPECT_TRUE(d->notes.empty());
}

TEST(ReportDataTest, MeanPerplexityIsOptionalAndRoundTrips) {
  ReportData d = Sample();
  d.curve[1].mean_perplexity = 31.5;
  absl::StatusOr<ReportData> back = FromJson(ToJson(d), "report.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::isnan(back->curve[0].mean_perplexity));  // default: unknown -> null
  EXPECT_DOUBLE_EQ(back->curve[1].mean_perplexity, 31.5);
  absl::StatusOr<ReportData> old = FromJson(
      R"({"model_name":"m","fingerprint":"f","fp_perplexity":3,"target_bits":2,"winner":"rl",
          "units":[],"points":[],"curve":[{"update":1,"mean_reward":0,"best_perplexity":4,
          "bits":2,"lambda":0,"target_bits":2}]})",
      "old.json");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_TRUE(std::isnan(old->curve[0].mean_perplexity));
}

// The quality-target keys: written only with max_ppl_increase > 0, read back
// exactly, absent (0, none) from a fixed-budget report.
TEST(ReportDataTest, QualityTargetKeysRoundTripAndStayOutOfAFixedBudgetReport) {
  ReportData d = Sample();
  EXPECT_FALSE(absl::StrContains(ToJson(d), "max_ppl_increase"));
  EXPECT_FALSE(absl::StrContains(ToJson(d), "measured"));
  d.max_ppl_increase = 0.02;
  d.measured = {{3.5, 0.015, ""}, {2.75, std::nan(""), ""}, {3.25, 0.019, "rl (returned)"}};
  absl::StatusOr<ReportData> back = FromJson(ToJson(d), "report.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_DOUBLE_EQ(back->max_ppl_increase, 0.02);
  ASSERT_EQ(back->measured.size(), 3u);
  EXPECT_DOUBLE_EQ(back->measured[0].effective_bits, 3.5);
  EXPECT_DOUBLE_EQ(back->measured[0].degradation, 0.015);
  EXPECT_TRUE(back->measured[0].label.empty());
  EXPECT_TRUE(std::isnan(back->measured[1].degradation));
  EXPECT_EQ(back->measured[2].label, "rl (returned)");
  d.measured[0].effective_bits = -1;
  EXPECT_EQ(ValidateReportData(d).message(), "measured[0].effective_bits: must be finite and >= 0");
}

// `windquant quantize` writes these keys into a larger report.json of its own, where
// wall_time_s is an object and other keys are unknown here.
TEST(ReportDataTest, ReadsTheKeysOfALargerQuantizeReport) {
  absl::StatusOr<ReportData> d = FromJson(
      R"({"config":"c.yaml","model_name":"m","fingerprint":"f","fp_perplexity":3,
          "target_bits":2,"winner":"greedy","wall_time_s":{"prepare":1,"train":2,"total":4.5},
          "plans":[{"name":"rl"}],"resumed_from_update":2,"units":[],"points":[]})",
      "runs/x/report.json");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_DOUBLE_EQ(d->wall_time_s, 4.5);
  EXPECT_EQ(d->winner, "greedy");
  absl::StatusOr<ReportData> bad = FromJson(
      R"({"model_name":"m","fingerprint":"f","fp_perplexity":3,"target_bits":2,"winner":"",
          "wall_time_s":{"train":2},"units":[],"points":[]})",
      "q.json");
  EXPECT_THAT(bad,
              StatusIs(absl::StatusCode::kInvalidArgument, "q.json: wall_time_s.total: missing"));
}

TEST(ReportDataTest, ErrorsNameSourceAndField) {
  ReportData d = Sample();
  d.units[1].matrix = 9;
  absl::Status s = ValidateReportData(d);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, "units[1].matrix"));

  std::string text = ToJson(Sample());
  const std::string from = "\"bits\": 2.125";
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, from.size(), "\"bits\": \"x\"");
  absl::StatusOr<ReportData> r = FromJson(text, "/tmp/report.json");
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument,
                          "/tmp/report.json: units[1].bits: expected a number"));

  EXPECT_THAT(FromJson("{", "x.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, "x.json: not valid JSON"));
  EXPECT_THAT(FromJson(R"({"model_name":"m"})", "y.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, "y.json: fingerprint: missing"));
  absl::StatusOr<ReportData> neg = FromJson(
      R"({"model_name":"m","fingerprint":"f","fp_perplexity":3,"target_bits":2,"winner":"",
          "units":[{"layer":-1,"matrix":0,"n_weights":4,"bits":2}],"points":[]})",
      "z.json");
  EXPECT_THAT(neg, StatusIs(absl::StatusCode::kInvalidArgument, "z.json: units[0].layer"));
}

TEST(ReportDataTest, WriteAndReadFile) {
  const std::string path = ::testing::TempDir() + "/report_data_test/report.json";
  ASSERT_TRUE(WriteReportJson(Sample(), path).ok());
  absl::StatusOr<ReportData> back = ReadReportJson(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->units.size(), 3u);
  EXPECT_THAT(ReadReportJson(path + ".missing"),
              StatusIs(absl::StatusCode::kNotFound, "report.json.missing"));
  ReportData bad = Sample();
  bad.points[0].label = "";
  EXPECT_THAT(WriteReportJson(bad, path),
              StatusIs(absl::StatusCode::kInvalidArgument, "points[0].label"));
}

}  // namespace
}  // namespace windquant::report
