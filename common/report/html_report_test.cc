#include "common/report/html_report.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/report/svg_chart.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::windquant::testing::StatusIs;

// A report like the trainer's, with a hostile label and model name.
ReportData Sample(int layers = 4) {
  ReportData d;
  d.model_name = "stories <260k> & co";
  d.fingerprint = "f00d";
  d.fp_perplexity = 11.75;
  d.target_bits = 2.0;
  for (int l = 0; l < layers; ++l) {
    for (int m = 0; m < kNumMatrixTypes; ++m) {
      for (int chunk = 0; chunk < 2; ++chunk) {
        const double bits = (l + m + chunk) % 3 == 0 ? 4.25 : (m == 6 ? 1.05 : 2.13);
        d.units.push_back({l, m, chunk == 0 ? 4096 : 1024, bits});
      }
    }
  }
  d.points = {{"rl", 1.99, 17.5},       {"uniform-2", 2.12, 40.0},   {"uniform-3", 3.1, 14.0},
              {"uniform-4", 4.1, 12.2}, {"greedy", 2.0, 21.0},       {"lagrange", 2.0, 19.5},
              {"random", 1.98, 95.0},   {"x<&>y", 2.5, std::nan("")}};
  d.winner = "rl";
  for (int u = 0; u < 30; ++u) {
    d.curve.push_back({u, -2.0 + 0.05 * u, u < 3 ? std::nan("") : 30.0 - 0.4 * u, 2.6 - 0.02 * u,
                       0.01 * u, u < 15 ? 2.5 : 2.0});
  }
  d.wall_time_s = 123.4;
  d.notes = {"note with <b>markup</b> & an ampersand"};
  return d;
}

// Checks the document is well-formed XML-ish: every tag closed in order, attributes
// quoted, no raw '<' or stray '&' in text. Returns "" or the first problem.
std::string CheckWellFormed(const std::string& s, int* elements) {
  std::vector<std::string> stack;
  *elements = 0;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '&') {
      const size_t semi = s.find(';', i);
      if (semi == std::string::npos || semi - i > 8) return absl::StrCat("stray & at ", i);
      const std::string ent = s.substr(i, semi - i + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&#39;" &&
          ent[1] != '#') {
        return "unknown entity " + ent;
      }
      i = semi + 1;
      continue;
    }
    if (s[i] != '<') {
      if (s[i] == '>') return absl::StrCat("raw > in text at ", i);
      ++i;
      continue;
    }
    if (s.compare(i, 9, "<!DOCTYPE") == 0) {
      i = s.find('>', i) + 1;
      continue;
    }
    const size_t end = s.find('>', i);
    if (end == std::string::npos) return "unterminated tag";
    std::string tag = s.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name) {
        return absl::StrCat("</", name, "> closes <", stack.empty() ? "" : stack.back(), ">");
      }
      stack.pop_back();
      // <style> content is CSS; it must not contain '<' anyway (checked by the find).
      continue;
    }
    const bool self_closing = tag.back() == '/';
    if (self_closing) tag.pop_back();
    const std::string name = tag.substr(0, tag.find_first_of(" \n"));
    // Attributes: name="value" pairs; the value must not contain '<'.
    size_t q = 0;
    int quotes = 0;
    while ((q = tag.find('"', q)) != std::string::npos) ++quotes, ++q;
    if (quotes % 2 != 0) return "unbalanced quotes in <" + name + ">";
    ++*elements;
    if (name == "style") {  // skip CSS verbatim
      const size_t close = s.find("</style>", i);
      if (close == std::string::npos) return "unclosed style";
      if (s.substr(i, close - i).find_first_of("<&") != std::string::npos) return "< or & in CSS";
      i = close + 8;
      continue;
    }
    if (!self_closing) stack.push_back(name);
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  return "";
}

std::vector<std::string> Fills(const std::string& html) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = html.find("fill=\"#", at)) != std::string::npos) {
    out.push_back(html.substr(at + 6, 7));
    at += 7;
  }
  return out;
}

TEST(HtmlReportTest, IsWellFormedAndSelfContained) {
  const std::string html = RenderHtmlReport(Sample());
  int elements = 0;
  EXPECT_EQ(CheckWellFormed(html, &elements), "");
  EXPECT_GT(elements, 200);
  EXPECT_TRUE(absl::StartsWith(html, "<!DOCTYPE html>"));
  // Four curves + heat map + PPL chart.
  size_t svgs = 0;
  for (size_t at = 0; (at = html.find("<svg ", at)) != std::string::npos; ++at) ++svgs;
  EXPECT_EQ(svgs, 6u);
  // No network: the only URL is the SVG namespace, no scripts, no external refs.
  std::string without_ns = html;
  for (size_t at;
       (at = without_ns.find("xmlns=\"http://www.w3.org/2000/svg\"")) != std::string::npos;) {
    without_ns.erase(at, 34);
  }
  EXPECT_FALSE(absl::StrContains(without_ns, "http:")) << "http:";
  EXPECT_FALSE(absl::StrContains(without_ns, "https:")) << "https:";
  EXPECT_FALSE(absl::StrContains(without_ns, "//")) << "//";
  EXPECT_FALSE(absl::StrContains(html, "<script")) << "<script";
  EXPECT_FALSE(absl::StrContains(html, "src=")) << "src=";
  EXPECT_FALSE(absl::StrContains(html, "href")) << "href";
  EXPECT_FALSE(absl::StrContains(html, "@import")) << "@import";
  EXPECT_FALSE(absl::StrContains(html, "url(")) << "url(";
}

// A quality-target report adds the degradation chart (one more SVG) with the
// epsilon line, one grey point per plan measured in training and the final rows
// labelled; a fixed-budget report has none of it (the test above: 6 SVGs).
TEST(HtmlReportTest, QualityTargetDrawsDegradationAgainstBitsWithTheEpsilonLine) {
  ReportData d = Sample();
  EXPECT_FALSE(absl::StrContains(RenderHtmlReport(d), "Degradation against effective bits"));
  d.max_ppl_increase = 0.02;
  d.measured = {{3.5, 0.015, ""}, {3.0, 0.03, ""}, {2.5, 0.2, ""}, {3.25, 0.019, "rl (returned)"}};
  const std::string html = RenderHtmlReport(d);
  int elements = 0;
  EXPECT_EQ(CheckWellFormed(html, &elements), "");
  size_t svgs = 0;
  for (size_t at = 0; (at = html.find("<svg ", at)) != std::string::npos; ++at) ++svgs;
  EXPECT_EQ(svgs, 7u);
  const size_t at = html.find("Degradation against effective bits");
  ASSERT_NE(at, std::string::npos);
  const std::string section = html.substr(at, html.find("</svg>", at) - at);
  EXPECT_TRUE(absl::StrContains(section, ">epsilon 0.02</text>"));
  EXPECT_TRUE(absl::StrContains(section, ">rl (returned)</text>"));
  size_t circles = 0;
  for (size_t c = 0; (c = section.find("<circle", c)) != std::string::npos; ++c) ++circles;
  EXPECT_EQ(circles, 3u);
  EXPECT_TRUE(absl::StrContains(html, "1 of those measured in training within epsilon"));
}

TEST(HtmlReportTest, EscapesText) {
  const std::string html = RenderHtmlReport(Sample());
  EXPECT_TRUE(absl::StrContains(html, "x&lt;&amp;&gt;y")) << "x&lt;&amp;&gt;y";
  EXPECT_FALSE(absl::StrContains(html, "x<&>y")) << "x<&>y";
  EXPECT_TRUE(absl::StrContains(html, "stories &lt;260k&gt; &amp; co"))
      << "stories &lt;260k&gt; &amp; co";
  EXPECT_TRUE(absl::StrContains(html, "note with &lt;b&gt;markup&lt;/b&gt; &amp; an ampersand"))
      << "note with &lt;b&gt;markup&lt;/b&gt; &amp; an ampersand";
  EXPECT_FALSE(absl::StrContains(html, "<b>markup")) << "<b>markup";
  EXPECT_EQ(XmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  // A label that is only unsafe characters is still well-formed.
  ReportData d = Sample();
  d.winner = "<\"'&>";
  d.points.push_back({"<\"'&>", 2.0, 15.0});
  int elements = 0;
  EXPECT_EQ(CheckWellFormed(RenderHtmlReport(d), &elements), "");
}

TEST(HtmlReportTest, ShowsSummaryNumbersAndEveryMethod) {
  const std::string html = RenderHtmlReport(Sample());
  EXPECT_TRUE(absl::StrContains(html, "11.75")) << "11.75";  // FP perplexity
  EXPECT_TRUE(absl::StrContains(html, "perplexity 17.5 at 1.99 bits"))
      << "perplexity 17.5 at 1.99 bits";  // RL
  // The best baseline within the target: uniform-4 (12.2 at 4.1 bits) and uniform-2
  // (2.12 bits) are over it, listed at their own bits and never the best baseline.
  EXPECT_TRUE(absl::StrContains(html, "<b>lagrange</b>: perplexity 19.5"))
      << "<b>lagrange</b>: perplexity 19.5";
  EXPECT_TRUE(absl::StrContains(html, "uniform-4 (over the target)</td>"));
  EXPECT_TRUE(absl::StrContains(html, "uniform-2 (over the target)</td>"));
  EXPECT_FALSE(absl::StrContains(html, "lagrange (over the target)"));
  EXPECT_TRUE(absl::StrContains(html, "rl (winner)")) << "rl (winner)";
  for (const char* label : {"uniform-2", "greedy", "lagrange", "random"}) {
    EXPECT_TRUE(absl::StrContains(html, absl::StrCat(">", label, "</text>")))
        << absl::StrCat(">", label, "</text>") << label;
  }
  EXPECT_TRUE(absl::StrContains(html, "Not plotted (no perplexity): x&lt;&amp;&gt;y"))
      << "Not plotted (no perplexity): x&lt;&amp;&gt;y";
  // random's 95 vs FP 11.75 is a range over 4x: log scale.
  EXPECT_TRUE(absl::StrContains(html, "Perplexity (log scale) vs effective bits"))
      << "Perplexity (log scale) vs effective bits";
  ReportData narrow = Sample();
  narrow.points.erase(narrow.points.begin() + 6);  // drop "random": 40/11.75 < 4
  EXPECT_TRUE(absl::StrContains(RenderHtmlReport(narrow), ">Perplexity vs effective bits<"))
      << ">Perplexity vs effective bits<";
  for (const char* m : {">q</text>", ">gate</text>", ">down</text>", ">layer 3</text>"}) {
    EXPECT_TRUE(absl::StrContains(html, m)) << m;
  }
}

TEST(HtmlReportTest, PerplexityCurveShowsTheMeanWhenRecorded) {
  const std::string without = RenderHtmlReport(Sample());
  EXPECT_TRUE(absl::StrContains(without, "aria-label=\"best perplexity")) << without;
  EXPECT_FALSE(absl::StrContains(without, "#f4a582"));
  ReportData d = Sample();
  for (size_t i = 0; i < d.curve.size(); ++i)
    d.curve[i].mean_perplexity = 40.0 - static_cast<double>(i);
  const std::string with = RenderHtmlReport(d);
  EXPECT_TRUE(absl::StrContains(with, "aria-label=\"perplexity")) << with;
  EXPECT_TRUE(absl::StrContains(with, "stroke=\"#f4a582\"")) << "the mean's line";
  EXPECT_TRUE(absl::StrContains(with, "mean over the update's sampled plans"));
  int elements = 0;
  EXPECT_EQ(CheckWellFormed(with, &elements), "");
}

TEST(HtmlReportTest, HeatMapColoursFollowBits) {
  // Distinct bits -> distinct colours; monotone in bits; clamped outside [1, 16].
  std::set<std::string> colours;
  for (double b : {1.0, 1.58, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0})
    colours.insert(BitsColor(b));
  EXPECT_EQ(colours.size(), 10u);
  EXPECT_EQ(BitsColor(0.5), BitsColor(1.0));
  EXPECT_EQ(BitsColor(32), BitsColor(16));
  EXPECT_EQ(BitsColor(1.0), "#440154");
  EXPECT_EQ(BitsColor(16.0), "#fde725");

  // A plan whose two layers differ gets different cell colours, each in the page.
  ReportData d = Sample(2);
  d.units.clear();
  for (int m = 0; m < kNumMatrixTypes; ++m) {
    d.units.push_back({0, m, 100, 2.0});
    d.units.push_back({1, m, 100, 4.0});
  }
  const std::string html = RenderHtmlReport(d);
  const std::vector<std::string> fills = Fills(html);
  auto count = [&](const std::string& c) { return std::count(fills.begin(), fills.end(), c); };
  EXPECT_GE(count(BitsColor(2.0)), 8);  // 7 cells + the matrix means row... at least
  EXPECT_GE(count(BitsColor(4.0)), 8);
  EXPECT_GE(count(BitsColor(3.0)), 1);  // the means (2 and 4 bits, equal weights)
  // Numbers in the cells, white on the dark (low-bits) end of the ramp.
  EXPECT_TRUE(absl::StrContains(html, "font-size=\"11\" fill=\"#ffffff\">2</text>"));
  EXPECT_TRUE(absl::StrContains(html, "font-size=\"11\" fill=\"#ffffff\">4</text>"));

  // Weighted by n: 3 weights at 2 bits + 1 at 6 bits = mean 3 bits.
  d.units = {{0, 0, 3, 2.0}, {0, 0, 1, 6.0}};
  EXPECT_TRUE(absl::StrContains(RenderHtmlReport(d), absl::StrCat("fill=\"", BitsColor(3.0), "\"")))
      << absl::StrCat("fill=\"", BitsColor(3.0), "\"");
}

TEST(HtmlReportTest, DeterministicAndHandlesEmptyAndLargeInputs) {
  EXPECT_EQ(RenderHtmlReport(Sample()), RenderHtmlReport(Sample()));
  ReportData empty;
  int elements = 0;
  const std::string e = RenderHtmlReport(empty);
  EXPECT_EQ(CheckWellFormed(e, &elements), "");
  EXPECT_TRUE(absl::StrContains(e, "No units recorded.")) << "No units recorded.";
  EXPECT_TRUE(absl::StrContains(e, "No training curve recorded.")) << "No training curve recorded.";
  // 80 layers (LLaMA-70B) and 10k updates: still well-formed, no numbers in cells,
  // curves downsampled.
  ReportData big = Sample(80);
  big.curve.clear();
  for (int u = 0; u < 10000; ++u) big.curve.push_back({u, 0.1, 20.0, 2.0, 0.0, 2.0});
  const std::string b = RenderHtmlReport(big);
  EXPECT_EQ(CheckWellFormed(b, &elements), "");
  EXPECT_TRUE(absl::StrContains(b, "every 5th shown")) << "every 5th shown";
  EXPECT_TRUE(absl::StrContains(b, ">layer 78</text>")) << ">layer 78</text>";
  EXPECT_LT(b.size(), 2u << 20);
}

TEST(HtmlReportTest, AxisTicksAreNice) {
  const Axis a = Axis::Linear(0.13, 0.97, 0, 100);
  EXPECT_DOUBLE_EQ(a.lo(), 0.0);
  EXPECT_DOUBLE_EQ(a.hi(), 1.0);
  EXPECT_EQ(a.TickLabel(a.ticks()[1]), "0.2");
  EXPECT_DOUBLE_EQ(a.ToPx(0.5), 50.0);
  const Axis l = Axis::Log(12, 900, 100, 0);
  EXPECT_TRUE(l.log());
  EXPECT_NEAR(l.ToPx(l.lo()), 100.0, 1e-9);
  EXPECT_NEAR(l.ToPx(l.hi()), 0.0, 1e-9);
  EXPECT_THAT(l.ticks(), ::testing::Contains(100.0));
  const Axis flat = Axis::Linear(2.0, 2.0, 0, 10);  // a constant series
  EXPECT_LT(flat.lo(), 2.0);
  EXPECT_GT(flat.hi(), 2.0);
}

TEST(HtmlReportTest, WritesFilesAtomicallyAndValidates) {
  const std::string dir = ::testing::TempDir() + "/html_report_test";
  ASSERT_TRUE(WriteReportFiles(Sample(), dir).ok());
  absl::StatusOr<std::string> html = base::ReadFile(dir + "/report.html");
  ASSERT_TRUE(html.ok());
  EXPECT_EQ(*html, RenderHtmlReport(Sample()));
  absl::StatusOr<ReportData> back = ReadReportJson(dir + "/report.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(RenderHtmlReport(*back), *html);  // report.json renders to the same page
  ReportData bad = Sample();
  bad.units[0].matrix = 7;
  absl::Status s = WriteHtmlReport(bad, dir + "/bad.html");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, "bad.html: units[0].matrix"));
  EXPECT_FALSE(base::PathExists(dir + "/bad.html"));
}

}  // namespace
}  // namespace windquant::report
