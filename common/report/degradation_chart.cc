#include "common/report/degradation_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/report/svg_chart.h"

namespace windquant::report {
namespace {

constexpr char kEpisodeColor[] = "#7f7f7f";
constexpr char kFinalColor[] = "#d62728";
constexpr char kEpsilonColor[] = "#2ca02c";
// The degradation axis switches to log scale when every d is > 0 and max/min exceeds this.
constexpr double kLogScaleRatio = 30.0;

struct Range {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  double y_lo = x_lo, y_hi = -x_lo;
  int points = 0;
};

Range RangeOf(const ReportData& d) {
  Range r;
  for (const DegradationPoint& m : d.measured) {
    if (!std::isfinite(m.degradation)) continue;
    r.x_lo = std::min(r.x_lo, m.effective_bits), r.x_hi = std::max(r.x_hi, m.effective_bits);
    r.y_lo = std::min(r.y_lo, m.degradation), r.y_hi = std::max(r.y_hi, m.degradation);
    ++r.points;
  }
  r.y_lo = std::min(r.y_lo, d.max_ppl_increase), r.y_hi = std::max(r.y_hi, d.max_ppl_increase);
  if (r.points == 0) r.x_lo = 0, r.x_hi = 16;
  if (r.x_hi - r.x_lo < 0.1) r.x_lo -= 0.05, r.x_hi += 0.05;
  if (r.y_hi - r.y_lo < 1e-6) r.y_hi = r.y_lo + 1e-3;
  return r;
}

}  // namespace

std::string DegradationSection(const ReportData& d) {
  if (d.max_ppl_increase <= 0) return "";
  std::string h = "<h2>Degradation against effective bits (quality target)</h2>\n";
  const Range r = RangeOf(d);
  const bool log_y = r.y_lo > 0 && r.y_hi / r.y_lo > kLogScaleRatio;
  SvgChart svg(760, 400, 72, 110, 30, 42);
  svg.SetAxes(r.x_lo, r.x_hi, r.y_lo, r.y_hi, log_y);
  svg.DrawFrame(log_y ? "Relative perplexity increase (log) vs effective bits"
                      : "Relative perplexity increase vs effective bits",
                "effective bits per weight", "d on the selection slice");
  const double eps = d.max_ppl_increase;
  svg.Line({svg.x().lo(), svg.x().hi()}, {eps, eps}, kEpsilonColor, 1.4, true);
  svg.TextPx(svg.plot_right() + 4, svg.y().ToPx(eps) + 4,
             absl::StrCat("epsilon ", FormatNumber(eps, 4)), "start", 11, kEpsilonColor);
  int within = 0;
  for (const DegradationPoint& m : d.measured) {
    if (!std::isfinite(m.degradation) || !m.label.empty()) continue;
    within += m.degradation <= eps;
    svg.Circle(m.effective_bits, m.degradation, 2.5, kEpisodeColor);
  }
  int row = 0;  // the final rows on top, labelled one line apart (they often coincide)
  for (const DegradationPoint& m : d.measured) {
    if (!std::isfinite(m.degradation) || m.label.empty()) continue;
    svg.Diamond(m.effective_bits, m.degradation, 5, kFinalColor);
    svg.TextPx(svg.x().ToPx(m.effective_bits) + 7, svg.y().ToPx(m.degradation) - 5 - 13 * row++,
               m.label, "start", 11, kFinalColor);
  }
  h += svg.Finish();
  absl::StrAppend(&h, "<p class=\"small\">Grey: the ", r.points, " plans measured (", within,
                  " of those measured in training within epsilon); red: the final rows, "
                  "measured again at the end. Dashed: epsilon = ",
                  FormatNumber(eps, 4), ", the maximum relative perplexity increase.</p>\n");
  return h;
}

}  // namespace windquant::report
