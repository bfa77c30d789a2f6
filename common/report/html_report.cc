#include "common/report/html_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"
#include "common/report/degradation_chart.h"
#include "common/report/svg_chart.h"

namespace windquant::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Perplexity axes switch to log scale when max/min exceeds this.
constexpr double kLogScaleRatio = 4.0;
// Training curves keep at most this many rows (evenly strided, last row kept).
constexpr size_t kMaxCurveRows = 2000;
// Heat-map colour range, in bits; see BitsColor.
constexpr double kMinBits = 1.0, kMaxBits = 16.0;

constexpr char kRlColor[] = "#d62728";
constexpr char kMeanPplColor[] = "#f4a582";  // mean perplexity of an update's plans
constexpr std::array<const char*, 9> kPalette = {"#1f77b4", "#2ca02c", "#9467bd",
                                                 "#8c564b", "#e377c2", "#7f7f7f",
                                                 "#bcbd22", "#17becf", "#ff7f0e"};

constexpr char kCss[] = R"css(
body { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; margin: 24px;
       color: #1a1a1a; background: #ffffff; max-width: 1140px; }
h1 { font-size: 22px; margin: 0 0 4px 0; }
h2 { font-size: 17px; margin: 26px 0 8px 0; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
p.sub { color: #555; margin: 0 0 12px 0; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border: 1px solid #d4d4dc; padding: 3px 9px; text-align: left; }
th { background: #f0f0f5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.win td { background: #fff3c4; font-weight: bold; }
.row { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
.small { font-size: 12px; color: #555; }
code { font-size: 12px; }
svg { background: #ffffff; }
)css";

struct Rgb {
  double r, g, b;
};

std::string Num(double v, int decimals) { return FormatNumber(v, decimals); }

const ReportPoint* FindPoint(const ReportData& d, absl::string_view label) {
  for (const ReportPoint& p : d.points) {
    if (p.label == label) return &p;
  }
  return nullptr;
}

// Above the target bits (beyond the tolerance the winner's pick allows): a reference at
// its own bits, e.g. uniform 2-bit with its scales, never a contender.
bool OverTarget(const ReportData& d, const ReportPoint& p) {
  return d.target_bits > 0 && p.effective_bits > d.target_bits + 0.01;
}

// The baseline (non-RL point within the target) with the lowest known perplexity.
const ReportPoint* BestBaseline(const ReportData& d) {
  const ReportPoint* best = nullptr;
  for (const ReportPoint& p : d.points) {
    if (p.label == kRlLabel || !std::isfinite(p.perplexity) || OverTarget(d, p)) continue;
    if (best == nullptr || p.perplexity < best->perplexity) best = &p;
  }
  return best;
}

// Family of a label for joining points with a line: "uniform-4" -> "uniform" when the
// suffix after the last '-' is a number; otherwise the label itself.
std::string Family(const std::string& label) {
  const size_t dash = label.rfind('-');
  double unused;
  if (dash != std::string::npos && dash > 0 &&
      absl::SimpleAtod(absl::string_view(label).substr(dash + 1), &unused)) {
    return label.substr(0, dash);
  }
  return label;
}

// --- sections -------------------------------------------------------------------------

void AppendRow(std::string* h, absl::string_view key, absl::string_view value_html) {
  absl::StrAppend(h, "<tr><th>", XmlEscape(key), "</th><td>", value_html, "</td></tr>\n");
}

std::string PointText(const ReportPoint* p) {
  if (p == nullptr) return "n/a";
  return absl::StrCat("<b>", XmlEscape(p->label), "</b>: perplexity ", Num(p->perplexity, 3),
                      " at ", Num(p->effective_bits, 3), " bits");
}

std::string SummarySection(const ReportData& d) {
  std::string h = "<h2>Summary</h2>\n<div class=\"row\">\n<table class=\"summary\">\n";
  const ReportPoint* rl = FindPoint(d, kRlLabel);
  const ReportPoint* base = BestBaseline(d);
  AppendRow(&h, "FP16 perplexity", Num(d.fp_perplexity, 3));
  AppendRow(&h, "RL plan", PointText(rl));
  AppendRow(&h, "Target bits", Num(d.target_bits, 3));
  AppendRow(&h, "Best baseline within the target", PointText(base));
  if (rl != nullptr && base != nullptr && std::isfinite(rl->perplexity)) {
    AppendRow(&h, "RL / best baseline perplexity", Num(rl->perplexity / base->perplexity, 4));
  }
  if (rl != nullptr && d.fp_perplexity > 0 && std::isfinite(rl->perplexity)) {
    AppendRow(&h, "RL / FP16 perplexity", Num(rl->perplexity / d.fp_perplexity, 4));
  }
  AppendRow(&h, "Winner",
            absl::StrCat("<b>", XmlEscape(d.winner.empty() ? "n/a" : d.winner), "</b>"));
  double sum_n = 0, sum_bits = 0;
  for (const ReportUnit& u : d.units) {
    sum_n += static_cast<double>(u.n_weights);
    sum_bits += static_cast<double>(u.n_weights) * u.bits;
  }
  AppendRow(&h, "Units / weights",
            absl::StrCat(d.units.size(), " units, ", absl::StrFormat("%.0f", sum_n), " weights, ",
                         Num(sum_n > 0 ? sum_bits / sum_n : kNaN, 3), " bits per weight"));
  AppendRow(&h, "Wall time", absl::StrCat(Num(d.wall_time_s, 1), " s"));
  h += "</table>\n";

  // Every method, sorted by effective bits (stable: ties keep input order).
  std::vector<const ReportPoint*> pts;
  for (const ReportPoint& p : d.points) pts.push_back(&p);
  std::stable_sort(pts.begin(), pts.end(), [](const ReportPoint* a, const ReportPoint* b) {
    return a->effective_bits < b->effective_bits;
  });
  h += "<table class=\"points\">\n<tr><th>method</th><th>effective bits</th>"
       "<th>perplexity</th><th>vs FP16</th></tr>\n";
  for (const ReportPoint* p : pts) {
    const bool win = p->label == d.winner;
    absl::StrAppend(&h, win ? "<tr class=\"win\">" : "<tr>", "<td>", XmlEscape(p->label),
                    win ? " (winner)" : "", OverTarget(d, *p) ? " (over the target)" : "",
                    "</td><td class=\"num\">", Num(p->effective_bits, 3), "</td><td class=\"num\">",
                    Num(p->perplexity, 3), "</td><td class=\"num\">",
                    d.fp_perplexity > 0
                        ? absl::StrCat("&#215;", Num(p->perplexity / d.fp_perplexity, 3))
                        : "n/a",
                    "</td></tr>\n");
  }
  h += "</table>\n</div>\n";
  return h;
}

// One cell of the heat map: the weighted mean bits nnb / nn (grey when nn is 0), with
// the number written in it when the cell is tall enough.
void HeatCell(SvgChart& svg, double x, double y, double w, double hgt, double nn, double nnb) {
  if (nn <= 0) {
    svg.Raw(absl::StrCat("<rect x=\"", x, "\" y=\"", y, "\" width=\"", w, "\" height=\"", hgt,
                         "\" fill=\"#eeeeee\" stroke=\"#ffffff\" stroke-width=\"1\" />\n"));
    return;
  }
  const double bits = nnb / nn;
  const std::string color = BitsColor(bits);
  svg.Raw(absl::StrCat("<rect x=\"", x, "\" y=\"", y, "\" width=\"", w, "\" height=\"", hgt,
                       "\" fill=\"", color, "\" stroke=\"#ffffff\" stroke-width=\"1\">", "<title>",
                       Num(bits, 3), " bits</title></rect>\n"));
  if (hgt >= 14) {  // numbers in the cells only when they fit
    const double t = std::log2(std::clamp(bits, kMinBits, kMaxBits)) / std::log2(kMaxBits);
    svg.TextPx(x + w / 2, y + hgt / 2 + 4, Num(bits, 2), "middle",
               static_cast<int>(std::min(11.0, hgt - 3)), t < 0.6 ? "#ffffff" : "#111111");
  }
}

// Weights (n) and weights x bits (nb) per (layer, matrix) cell.
struct LayerMatrixSums {
  std::vector<std::array<double, kNumMatrixTypes>> n, nb;
};
LayerMatrixSums SumByLayerAndMatrix(const ReportData& d, int layers) {
  LayerMatrixSums s;
  s.n.resize(layers);
  s.nb.resize(layers);
  for (auto& a : s.n) a.fill(0);
  for (auto& a : s.nb) a.fill(0);
  for (const ReportUnit& u : d.units) {
    if (u.layer < 0 || u.matrix < 0 || u.matrix >= kNumMatrixTypes || u.n_weights <= 0) continue;
    s.n[u.layer][u.matrix] += static_cast<double>(u.n_weights);
    s.nb[u.layer][u.matrix] += static_cast<double>(u.n_weights) * u.bits;
  }
  return s;
}

// The colour ramp in 64 steps over log2(bits) at (lx, legend_y), width lw, with ticks at
// the action precisions.
void HeatLegend(SvgChart& svg, double lx, double lw, int legend_y) {
  const double lh = 14;
  constexpr int kSteps = 64;
  for (int i = 0; i < kSteps; ++i) {
    const double bits = std::pow(kMaxBits, (i + 0.5) / kSteps);
    svg.Raw(absl::StrCat("<rect x=\"", Num(lx + lw * i / kSteps, 2), "\" y=\"", legend_y,
                         "\" width=\"", Num(lw / kSteps + 0.6, 2), "\" height=\"", lh, "\" fill=\"",
                         BitsColor(bits), "\" />\n"));
  }
  svg.TextPx(lx, legend_y - 6, "effective bits per weight (log scale)", "start", 11, "#333");
  for (double b : {1.0, 1.58, 2.0, 3.0, 4.0, 8.0, 16.0}) {
    const double x = lx + lw * std::log2(b) / std::log2(kMaxBits);
    svg.Raw(absl::StrCat("<line x1=\"", Num(x, 1), "\" y1=\"", legend_y + lh, "\" x2=\"", Num(x, 1),
                         "\" y2=\"", legend_y + lh + 4, "\" stroke=\"#333\" />\n"));
    svg.TextPx(x, legend_y + lh + 16, Num(b, 2), "middle", 11, "#333");
  }
}

std::string HeatMapSection(const ReportData& d) {
  std::string h = "<h2>Bits per layer and matrix type</h2>\n";
  int layers = 0;
  for (const ReportUnit& u : d.units) layers = std::max(layers, u.layer + 1);
  if (layers == 0) return h + "<p class=\"small\">No units recorded.</p>\n";
  // Weighted sums: cell (layer, matrix), row means, column means.
  const LayerMatrixSums sums = SumByLayerAndMatrix(d, layers);
  const auto& n = sums.n;
  const auto& nb = sums.nb;
  const int kColW = 78, kLeft = 72, kTop = 46, kGap = 14;
  const int row_h = std::clamp(620 / layers, 3, 26);
  const int mean_h = std::max(row_h, 18);
  const int grid_w = kNumMatrixTypes * kColW;
  const int width = kLeft + grid_w + kGap + kColW + 20;
  const int grid_bottom = kTop + layers * row_h;
  const int legend_y = grid_bottom + kGap + mean_h + 26;
  const int height = legend_y + 48;
  SvgChart svg(width, height);
  svg.TextPx(kLeft, 16, "Mean effective bits per (layer, matrix), weighted by weights", "start", 13,
             "#111", true);
  for (int m = 0; m < kNumMatrixTypes; ++m) {
    svg.TextPx(kLeft + m * kColW + kColW / 2.0, kTop - 8, kMatrixNames[m], "middle", 12, "#222",
               true);
  }
  svg.TextPx(kLeft + grid_w + kGap + kColW / 2.0, kTop - 8, "mean", "middle", 12, "#222", true);
  const int label_every = std::max(1, static_cast<int>(std::ceil(12.0 / row_h)));
  std::array<double, kNumMatrixTypes> col_n{}, col_nb{};
  for (int l = 0; l < layers; ++l) {
    const double y = kTop + l * row_h;
    double rn = 0, rnb = 0;
    for (int m = 0; m < kNumMatrixTypes; ++m) {
      HeatCell(svg, kLeft + m * kColW, y, kColW, row_h, n[l][m], nb[l][m]);
      rn += n[l][m];
      rnb += nb[l][m];
      col_n[m] += n[l][m];
      col_nb[m] += nb[l][m];
    }
    HeatCell(svg, kLeft + grid_w + kGap, y, kColW, row_h, rn, rnb);
    if (l % label_every == 0) {
      svg.TextPx(kLeft - 6, y + row_h / 2.0 + 4, absl::StrCat("layer ", l), "end",
                 std::min(11, std::max(row_h * label_every - 2, 8)), "#333");
    }
  }
  const double mean_y = grid_bottom + kGap;
  double all_n = 0, all_nb = 0;
  for (int m = 0; m < kNumMatrixTypes; ++m) {
    HeatCell(svg, kLeft + m * kColW, mean_y, kColW, mean_h, col_n[m], col_nb[m]);
    all_n += col_n[m];
    all_nb += col_nb[m];
  }
  HeatCell(svg, kLeft + grid_w + kGap, mean_y, kColW, mean_h, all_n, all_nb);
  svg.TextPx(kLeft - 6, mean_y + mean_h / 2.0 + 4, "mean", "end", 11, "#333", true);
  HeatLegend(svg, kLeft, grid_w, legend_y);
  h += svg.Finish();
  absl::StrAppend(
      &h,
      "<p class=\"small\">Rows: decoder layers; columns: the seven linear "
      "weights of a layer. Embeddings, final norm and lm_head keep the model's dtype and "
      "are not counted in the bits.</p>\n");
  return h;
}

// The plotted range of the perplexity chart: every point, the target bits and the FP16
// perplexity; a log y axis when perplexities span more than kLogScaleRatio.
struct PlotRange {
  double x_lo, x_hi, y_lo, y_hi;
  bool log_y;
};
PlotRange PerplexityRange(const std::vector<const ReportPoint*>& pts, const ReportData& d) {
  double x_lo = pts[0]->effective_bits, x_hi = x_lo, y_lo = pts[0]->perplexity, y_hi = y_lo;
  for (const ReportPoint* p : pts) {
    x_lo = std::min(x_lo, p->effective_bits);
    x_hi = std::max(x_hi, p->effective_bits);
    y_lo = std::min(y_lo, p->perplexity);
    y_hi = std::max(y_hi, p->perplexity);
  }
  if (d.target_bits > 0) x_lo = std::min(x_lo, d.target_bits), x_hi = std::max(x_hi, d.target_bits);
  if (d.fp_perplexity > 0 && std::isfinite(d.fp_perplexity)) {
    y_lo = std::min(y_lo, d.fp_perplexity);
    y_hi = std::max(y_hi, d.fp_perplexity);
  }
  const bool log_y = y_hi / y_lo > kLogScaleRatio;
  if (!log_y) {  // a little headroom so markers do not sit on the frame
    const double pad = std::max((y_hi - y_lo) * 0.08, y_hi * 0.01);
    y_lo = std::max(0.0, y_lo - pad);
    y_hi += pad;
  }
  const double x_pad = std::max((x_hi - x_lo) * 0.06, 0.05);
  return {x_lo - x_pad, x_hi + x_pad, y_lo, y_hi, log_y};
}

// Colours by family in order of first appearance; families with several points
// (e.g. uniform-2/3/4) are joined by a line in bits order.
std::map<std::string, std::string> DrawFamilies(SvgChart& svg,
                                                const std::vector<const ReportPoint*>& pts) {
  std::map<std::string, std::string> family_color;
  std::vector<std::string> family_order;
  for (const ReportPoint* p : pts) {
    const std::string f = Family(p->label);
    if (family_color.count(f)) continue;
    family_color[f] = p->label == kRlLabel
                          ? std::string(kRlColor)
                          : std::string(kPalette[family_order.size() % kPalette.size()]);
    family_order.push_back(f);
  }
  for (const std::string& f : family_order) {
    std::vector<const ReportPoint*> members;
    for (const ReportPoint* p : pts) {
      if (Family(p->label) == f) members.push_back(p);
    }
    if (members.size() < 2) continue;
    std::stable_sort(members.begin(), members.end(),
                     [](auto* a, auto* b) { return a->effective_bits < b->effective_bits; });
    std::vector<double> xs, ys;
    for (const ReportPoint* p : members)
      xs.push_back(p->effective_bits), ys.push_back(p->perplexity);
    svg.Line(xs, ys, family_color[f], 1.5, false);
  }
  return family_color;
}

// Markers, then labels placed right of the marker, nudged vertically off earlier ones.
void DrawMarkersAndLabels(SvgChart& svg, const std::vector<const ReportPoint*>& pts,
                          std::map<std::string, std::string>& family_color) {
  struct Box {
    double x0, y0, x1, y1;
  };
  std::vector<Box> placed;
  for (const ReportPoint* p : pts) {
    const std::string& color = family_color[Family(p->label)];
    if (p->label == kRlLabel) {
      svg.Diamond(p->effective_bits, p->perplexity, 8, color);
    } else {
      svg.Circle(p->effective_bits, p->perplexity, 5, color);
    }
  }
  for (const ReportPoint* p : pts) {
    const double px = svg.x().ToPx(p->effective_bits) + 9;
    const double py = svg.y().ToPx(p->perplexity) + 4;
    const double w = 7.0 * static_cast<double>(p->label.size()) + 4;
    double best_dy = 0;
    for (double dy : {0.0, -13.0, 13.0, -26.0, 26.0, -39.0, 39.0}) {
      bool clash = false;
      for (const Box& b : placed) {
        if (px < b.x1 && px + w > b.x0 && py + dy - 11 < b.y1 && py + dy + 2 > b.y0) clash = true;
      }
      if (!clash) {
        best_dy = dy;
        break;
      }
    }
    placed.push_back({px, py + best_dy - 11, px + w, py + best_dy + 2});
    const std::string& color = family_color[Family(p->label)];
    svg.TextPx(px, py + best_dy, p->label, "start", p->label == kRlLabel ? 13 : 11, color,
               p->label == kRlLabel);
  }
}

std::string PerplexitySection(const ReportData& d) {
  std::string h = "<h2>Perplexity against effective bits</h2>\n";
  std::vector<const ReportPoint*> pts;
  std::vector<std::string> missing;
  for (const ReportPoint& p : d.points) {
    if (std::isfinite(p.perplexity) && p.perplexity > 0 && std::isfinite(p.effective_bits)) {
      pts.push_back(&p);
    } else {
      missing.push_back(p.label);
    }
  }
  if (pts.empty()) return h + "<p class=\"small\">No measured points.</p>\n";
  const PlotRange r = PerplexityRange(pts, d);
  SvgChart svg(760, 440, 64, 110, 30, 42);
  svg.SetAxes(r.x_lo, r.x_hi, r.y_lo, r.y_hi, r.log_y);
  svg.DrawFrame(
      r.log_y ? "Perplexity (log scale) vs effective bits" : "Perplexity vs effective bits",
      "effective bits per weight", "perplexity");
  if (d.fp_perplexity > 0 && std::isfinite(d.fp_perplexity)) {
    svg.Line({svg.x().lo(), svg.x().hi()}, {d.fp_perplexity, d.fp_perplexity}, "#555", 1.2, true);
    svg.TextPx(svg.plot_right() + 4, svg.y().ToPx(d.fp_perplexity) + 4,
               absl::StrCat("FP16 ", Num(d.fp_perplexity, 2)), "start", 11, "#555");
  }
  if (d.target_bits > 0) {
    svg.Line({d.target_bits, d.target_bits}, {svg.y().lo(), svg.y().hi()}, "#999", 1.2, true);
    svg.TextPx(svg.x().ToPx(d.target_bits) + 3, svg.plot_bottom() - 6,
               absl::StrCat("target ", Num(d.target_bits, 2)), "start", 11, "#777");
  }
  std::map<std::string, std::string> family_color = DrawFamilies(svg, pts);
  DrawMarkersAndLabels(svg, pts, family_color);
  h += svg.Finish();
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing)
      absl::StrAppend(&list, list.empty() ? "" : ", ", XmlEscape(m));
    absl::StrAppend(&h, "<p class=\"small\">Not plotted (no perplexity): ", list, "</p>\n");
  }
  return h;
}

// One training curve against update: `field` (solid), optionally `second` (a thinner,
// lighter line in the same chart, when it has any finite value) and the curriculum
// target (dashed grey).
std::string CurveChart(const std::vector<TrainingRow>& rows, const char* title,
                       double TrainingRow::*field, const char* color, bool allow_log,
                       bool with_target, double TrainingRow::*second = nullptr,
                       const char* second_color = nullptr) {
  std::vector<double> xs, ys, ys2, target;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const TrainingRow& r : rows) {
    xs.push_back(static_cast<double>(r.update));
    ys.push_back(r.*field);
    ys2.push_back(second != nullptr ? r.*second : kNaN);
    target.push_back(r.target_bits);
    for (double v : {r.*field, with_target ? r.target_bits : r.*field, ys2.back()}) {
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
  }
  if (!(lo <= hi)) lo = 0, hi = 1;
  const bool has_second =
      std::any_of(ys2.begin(), ys2.end(), [](double v) { return std::isfinite(v); });
  const bool log_y = allow_log && lo > 0 && hi / lo > kLogScaleRatio;
  SvgChart svg(370, 230, 58, 14, 26, 38);
  svg.SetAxes(xs.front(), xs.back(), lo, hi, log_y);
  svg.DrawFrame(log_y ? absl::StrCat(title, " (log)") : title, "update", title);
  if (with_target) svg.Line(xs, target, "#888", 1.2, true);
  if (has_second) svg.Line(xs, ys2, second_color, 1.2, false);
  svg.Line(xs, ys, color, 1.8, false);
  return svg.Finish();
}

std::string CurvesSection(const ReportData& d) {
  std::string h = "<h2>Training curves</h2>\n";
  if (d.curve.empty()) return h + "<p class=\"small\">No training curve recorded.</p>\n";
  std::vector<TrainingRow> rows;
  const size_t stride = (d.curve.size() + kMaxCurveRows - 1) / kMaxCurveRows;
  for (size_t i = 0; i < d.curve.size(); i += stride) rows.push_back(d.curve[i]);
  if ((d.curve.size() - 1) % stride != 0) rows.push_back(d.curve.back());
  h += "<div class=\"row\">\n";
  h += CurveChart(rows, "mean reward", &TrainingRow::mean_reward, "#1f77b4", false, false);
  const bool has_mean_ppl = std::any_of(d.curve.begin(), d.curve.end(), [](const TrainingRow& r) {
    return std::isfinite(r.mean_perplexity);
  });
  h += CurveChart(rows, has_mean_ppl ? "perplexity" : "best perplexity",
                  &TrainingRow::best_perplexity, kRlColor, true, false,
                  &TrainingRow::mean_perplexity, kMeanPplColor);
  h += CurveChart(rows, "lambda", &TrainingRow::lambda, "#9467bd", false, false);
  h += CurveChart(rows, "bits", &TrainingRow::bits, "#2ca02c", false, true);
  h += "</div>\n<p class=\"small\">";
  absl::StrAppend(&h, d.curve.size(), " updates",
                  stride > 1 ? absl::StrCat(" (every ", stride, "th shown)") : "",
                  ". Dashed in the bits chart: the curriculum's target bits.",
                  has_mean_ppl ? " Perplexity chart: best feasible plan so far (bold) and the "
                                 "mean over the update's sampled plans (light)."
                               : "",
                  "</p>\n");
  return h;
}

}  // namespace

std::string BitsColor(double bits) {
  // Viridis anchors at t = 0, 0.25, 0.5, 0.75, 1.
  static constexpr Rgb kRamp[] = {
      {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  if (!std::isfinite(bits)) return "#cccccc";
  const double t = std::log2(std::clamp(bits, kMinBits, kMaxBits)) / std::log2(kMaxBits);
  const double s = t * 4.0;
  const int i = std::min(3, static_cast<int>(s));
  const double f = s - i;
  auto mix = [&](double a, double b) { return static_cast<int>(std::lround(a + (b - a) * f)); };
  return absl::StrFormat("#%02x%02x%02x", mix(kRamp[i].r, kRamp[i + 1].r),
                         mix(kRamp[i].g, kRamp[i + 1].g), mix(kRamp[i].b, kRamp[i + 1].b));
}

std::string RenderHtmlReport(const ReportData& d) {
  const std::string title = absl::StrCat("windquant report: ", d.model_name);
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\" />\n";
  // Nothing may be fetched: no scripts, no connections, only inline styles and data: images.
  h += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
       "style-src 'unsafe-inline'; img-src data:\" />\n";
  absl::StrAppend(&h, "<title>", XmlEscape(title), "</title>\n<style>", kCss,
                  "</style>\n</head>\n<body>\n");
  absl::StrAppend(&h, "<h1>", XmlEscape(title), "</h1>\n<p class=\"sub\">fingerprint <code>",
                  XmlEscape(d.fingerprint), "</code> &#183; target ", Num(d.target_bits, 3),
                  " bits &#183; winner <b>", XmlEscape(d.winner.empty() ? "n/a" : d.winner),
                  "</b></p>\n");
  h += SummarySection(d);
  h += HeatMapSection(d);
  h += PerplexitySection(d);
  h += DegradationSection(d);
  h += CurvesSection(d);
  h += "<h2>Notes</h2>\n<ul class=\"small\">\n";
  for (const std::string& n : d.notes) absl::StrAppend(&h, "<li>", XmlEscape(n), "</li>\n");
  h += "<li>Bits are effective bits per weight (codes, INT8 salient weights with their "
       "indices, per-row scales), DESIGN.md section 3.</li>\n</ul>\n</body>\n</html>\n";
  return h;
}

absl::Status WriteHtmlReport(const ReportData& data, const std::string& path) {
  absl::Status valid = ValidateReportData(data);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", valid.message()));
  return base::WriteFileAtomic(path, RenderHtmlReport(data));
}

absl::Status WriteReportFiles(const ReportData& data, const std::string& dir) {
  absl::Status s = WriteReportJson(data, dir + "/report.json");
  if (!s.ok()) return s;
  return WriteHtmlReport(data, dir + "/report.html");
}

}  // namespace windquant::report
