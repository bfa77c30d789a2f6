// `windquant report` (cli/report_command.cc), run through the CLI's command registry
// without linking the whole `windquant` binary.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "cli/command.h"
#include "common/base/files.h"
#include "common/report/html_report.h"
#include "common/report/report_data.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace windquant::cli {
namespace {

using ::windquant::testing::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

absl::Status RunCommand(std::vector<std::string> argv) {
  auto& registry = CommandRegistry();
  auto it = registry.find("report");
  if (it == registry.end()) return absl::NotFoundError("report not registered");
  Args args("report", std::move(argv));
  return it->second.run(args);
}

report::ReportData Sample() {
  report::ReportData d;
  d.model_name = "m<1>";
  d.fingerprint = "fp";
  d.fp_perplexity = 10;
  d.target_bits = 2;
  d.units = {{0, 0, 16, 2.5}, {0, 6, 16, 1.5}, {1, 3, 32, 4.2}};
  d.points = {{"rl", 2.0, 12}, {"uniform-2", 2.1, 15}};
  d.winner = "rl";
  d.curve = {{0, -1, 14, 2.4, 0, 2}, {1, -0.5, 12, 2.0, 0.1, 2}};
  return d;
}

TEST(ReportCommandTest, RendersReportJsonToHtml) {
  const std::string dir = ::testing::TempDir() + "/report_command_test";
  ASSERT_TRUE(report::WriteReportJson(Sample(), dir + "/report.json").ok());
  ASSERT_TRUE(RunCommand({"--in", dir + "/report.json", "--out", dir + "/out.html"}).ok());
  absl::StatusOr<std::string> html = base::ReadFile(dir + "/out.html");
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_EQ(*html, report::RenderHtmlReport(Sample()));
  // --out defaults to report.html beside --in.
  ASSERT_TRUE(RunCommand({"--in=" + dir + "/report.json"}).ok());
  EXPECT_TRUE(base::PathExists(dir + "/report.html"));
}

TEST(ReportCommandTest, OneLineErrors) {
  const std::string dir = ::testing::TempDir() + "/report_command_test_err";
  absl::Status missing = RunCommand({"--out", dir + "/x.html"});
  EXPECT_THAT(missing, StatusIs(kInvalid, "--in: required (a report.json)"));
  absl::Status absent = RunCommand({"--in", dir + "/nope.json"});
  EXPECT_THAT(absent, StatusIs(absl::StatusCode::kNotFound, dir + "/nope.json"));
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/bad.json", "{\"model_name\": 3}").ok());
  absl::Status bad = RunCommand({"--in", dir + "/bad.json", "--out", dir + "/x.html"});
  EXPECT_THAT(bad, StatusIs(kInvalid, "bad.json: model_name: expected a string"));
  EXPECT_FALSE(base::PathExists(dir + "/x.html"));
  absl::Status unknown = RunCommand({"--in", dir + "/bad.json", "--bogus", "1"});
  EXPECT_THAT(unknown, StatusIs(kInvalid, "unknown flag --bogus (see windquant report --help)"));
}

TEST(ReportCommandTest, HasUsage) {
  const Command& c = CommandRegistry().at("report");
  EXPECT_TRUE(absl::StrContains(c.usage, "--in report.json"));
  EXPECT_FALSE(c.summary.empty());
}

}  // namespace
}  // namespace windquant::cli
