// SvgChart: a small deterministic SVG plot builder (axes, grid, lines, markers,
// labels) for the HTML report. Emits well-formed XML (every element closed, every
// attribute quoted, every text escaped) with no scripts, fonts or external refs.
// Plus Axis (linear or log10 mapping with "nice" ticks) and XmlEscape.
// Thread-compatible.
#ifndef WINDQUANT_COMMON_REPORT_SVG_CHART_H_
#define WINDQUANT_COMMON_REPORT_SVG_CHART_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace windquant::report {

// Escapes & < > " ' as entities (safe in element text and quoted attributes).
std::string XmlEscape(absl::string_view text);

// Number for display: fixed `decimals`, trailing zeros trimmed, "n/a" if not finite.
std::string FormatNumber(double v, int decimals);

// Maps data values in [lo, hi] to pixels [px_lo, px_hi] (px_hi may be < px_lo, as for
// a y axis). Linear axes widen the domain to whole tick steps; log axes need lo > 0.
class Axis {
 public:
  static Axis Linear(double lo, double hi, double px_lo, double px_hi);
  static Axis Log(double lo, double hi, double px_lo, double px_hi);

  double ToPx(double v) const;
  const std::vector<double>& ticks() const { return ticks_; }
  std::string TickLabel(double v) const;
  bool log() const { return log_; }
  double lo() const { return lo_; }
  double hi() const { return hi_; }

 private:
  Axis() = default;
  bool log_ = false;
  double lo_ = 0, hi_ = 1, px_lo_ = 0, px_hi_ = 1;
  int decimals_ = 0;  // for linear tick labels
  std::vector<double> ticks_;
};

// One chart: a plot area inside margins, with axes set by the caller.
class SvgChart {
 public:
  // Plot area = [left, width-right] x [top, height-bottom].
  SvgChart(int width, int height, int left = 56, int right = 16, int top = 28, int bottom = 40);

  double plot_left() const { return left_; }
  double plot_right() const { return width_ - right_; }
  double plot_top() const { return top_; }
  double plot_bottom() const { return height_ - bottom_; }

  // Axes spanning the plot area for data ranges [x_lo,x_hi] x [y_lo,y_hi].
  void SetAxes(double x_lo, double x_hi, double y_lo, double y_hi, bool log_y);
  const Axis& x() const { return x_; }
  const Axis& y() const { return y_; }

  // Title, frame, grid lines, ticks and axis labels.
  void DrawFrame(absl::string_view title, absl::string_view x_label, absl::string_view y_label);
  // A line through (xs[i], ys[i]); a non-finite value breaks it into segments.
  void Line(const std::vector<double>& xs, const std::vector<double>& ys, absl::string_view color,
            double width, bool dashed);
  void Circle(double x, double y, double r, absl::string_view color);
  void Diamond(double x, double y, double r, absl::string_view color);
  // Text at pixel coordinates; anchor is start|middle|end.
  void TextPx(double px, double py, absl::string_view text, absl::string_view anchor, int size,
              absl::string_view color, bool bold = false);
  void Raw(absl::string_view svg) { body_.append(svg.data(), svg.size()); }

  // The whole <svg> element (with role="img" and an aria-label = title).
  std::string Finish() const;

 private:
  int width_, height_, left_, right_, top_, bottom_;
  Axis x_ = Axis::Linear(0, 1, 0, 1);
  Axis y_ = Axis::Linear(0, 1, 0, 1);
  std::string title_;
  std::string body_;
};

}  // namespace windquant::report

#endif  // WINDQUANT_COMMON_REPORT_SVG_CHART_H_
