#include "common/report/svg_chart.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace windquant::report {
namespace {

// Pixel coordinates with one decimal: enough for screens, keeps files small.
std::string Px(double v) { return FormatNumber(v, 1); }

// 1, 2 or 5 times a power of ten, nearest to raw.
double NiceStep(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / p;
  const double nice = f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0;
  return nice * p;
}

constexpr int kTargetTicks = 5;

}  // namespace

std::string XmlEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string FormatNumber(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  std::string s = absl::StrFormat("%.*f", decimals, v);
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

Axis Axis::Linear(double lo, double hi, double px_lo, double px_hi) {
  Axis a;
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo < 1e-12) {
    const double pad = std::max(std::abs(lo) * 0.1, 0.5);
    lo -= pad;
    hi += pad;
  }
  const double step = NiceStep((hi - lo) / (kTargetTicks - 1));
  a.lo_ = std::floor(lo / step + 1e-9) * step;
  a.hi_ = std::ceil(hi / step - 1e-9) * step;
  for (int k = 0;; ++k) {
    const double t = a.lo_ + k * step;
    if (t > a.hi_ + step * 1e-6) break;
    a.ticks_.push_back(t);
  }
  a.decimals_ = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  a.px_lo_ = px_lo;
  a.px_hi_ = px_hi;
  return a;
}

Axis Axis::Log(double lo, double hi, double px_lo, double px_hi) {
  Axis a;
  a.log_ = true;
  if (!(lo > 0) || !std::isfinite(lo)) lo = 1;
  if (!(hi > lo) || !std::isfinite(hi)) hi = lo * 10;
  a.lo_ = lo / 1.15;
  a.hi_ = hi * 1.15;
  // Ticks at 1, 2, 5 x 10^e; all of 1..9 x 10^e when that gives fewer than three.
  static constexpr double kCoarse[] = {1, 2, 5, 0};
  static constexpr double kFine[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 0};
  for (const double* mults : {kCoarse, kFine}) {
    a.ticks_.clear();
    for (int e = static_cast<int>(std::floor(std::log10(a.lo_)));
         e <= static_cast<int>(std::ceil(std::log10(a.hi_))); ++e) {
      for (const double* m = mults; *m != 0; ++m) {
        const double t = *m * std::pow(10.0, e);
        if (t >= a.lo_ && t <= a.hi_) a.ticks_.push_back(t);
      }
    }
    if (a.ticks_.size() >= 3) break;
  }
  a.px_lo_ = px_lo;
  a.px_hi_ = px_hi;
  return a;
}

double Axis::ToPx(double v) const {
  double f;
  if (log_) {
    f = (std::log10(std::max(v, 1e-300)) - std::log10(lo_)) / (std::log10(hi_) - std::log10(lo_));
  } else {
    f = (v - lo_) / (hi_ - lo_);
  }
  return px_lo_ + f * (px_hi_ - px_lo_);
}

std::string Axis::TickLabel(double v) const {
  if (log_) {
    if (v >= 1e5) return absl::StrFormat("%.0e", v);
    return FormatNumber(v, v < 1 ? 3 : 0);
  }
  return FormatNumber(v, decimals_);
}

SvgChart::SvgChart(int width, int height, int left, int right, int top, int bottom)
    : width_(width), height_(height), left_(left), right_(right), top_(top), bottom_(bottom) {}

void SvgChart::SetAxes(double x_lo, double x_hi, double y_lo, double y_hi, bool log_y) {
  x_ = Axis::Linear(x_lo, x_hi, plot_left(), plot_right());
  y_ = log_y ? Axis::Log(y_lo, y_hi, plot_bottom(), plot_top())
             : Axis::Linear(y_lo, y_hi, plot_bottom(), plot_top());
}

void SvgChart::DrawFrame(absl::string_view title, absl::string_view x_label,
                         absl::string_view y_label) {
  title_ = std::string(title);
  std::string& b = body_;
  absl::StrAppend(&b, "<rect x=\"", Px(plot_left()), "\" y=\"", Px(plot_top()), "\" width=\"",
                  Px(plot_right() - plot_left()), "\" height=\"", Px(plot_bottom() - plot_top()),
                  "\" fill=\"#fbfbfd\" stroke=\"#888\" stroke-width=\"1\" />\n");
  for (double t : x_.ticks()) {
    const std::string p = Px(x_.ToPx(t));
    absl::StrAppend(&b, "<line x1=\"", p, "\" y1=\"", Px(plot_top()), "\" x2=\"", p, "\" y2=\"",
                    Px(plot_bottom()), "\" stroke=\"#e3e3e8\" />\n");
    TextPx(x_.ToPx(t), plot_bottom() + 14, x_.TickLabel(t), "middle", 11, "#333");
  }
  for (double t : y_.ticks()) {
    const std::string p = Px(y_.ToPx(t));
    absl::StrAppend(&b, "<line x1=\"", Px(plot_left()), "\" y1=\"", p, "\" x2=\"", Px(plot_right()),
                    "\" y2=\"", p, "\" stroke=\"#e3e3e8\" />\n");
    TextPx(plot_left() - 5, y_.ToPx(t) + 4, y_.TickLabel(t), "end", 11, "#333");
  }
  TextPx(plot_left(), 16, title, "start", 13, "#111", /*bold=*/true);
  TextPx((plot_left() + plot_right()) / 2, height_ - 6, x_label, "middle", 12, "#333");
  const double cy = (plot_top() + plot_bottom()) / 2;
  absl::StrAppend(&b, "<text x=\"12\" y=\"", Px(cy), "\" transform=\"rotate(-90 12 ", Px(cy),
                  ")\" text-anchor=\"middle\" font-size=\"12\" fill=\"#333\">", XmlEscape(y_label),
                  "</text>\n");
}

void SvgChart::Line(const std::vector<double>& xs, const std::vector<double>& ys,
                    absl::string_view color, double width, bool dashed) {
  std::vector<std::string> segment;
  auto flush = [&] {
    if (segment.size() >= 2) {
      absl::StrAppend(&body_, "<polyline fill=\"none\" stroke=\"", XmlEscape(color),
                      "\" stroke-width=\"", FormatNumber(width, 1), "\"",
                      dashed ? " stroke-dasharray=\"6 4\"" : "", " points=\"",
                      absl::StrJoin(segment, " "), "\" />\n");
    } else if (segment.size() == 1) {
      const size_t comma = segment[0].find(',');
      absl::StrAppend(&body_, "<circle cx=\"", segment[0].substr(0, comma), "\" cy=\"",
                      segment[0].substr(comma + 1), "\" r=\"", FormatNumber(width, 1), "\" fill=\"",
                      XmlEscape(color), "\" />\n");
    }
    segment.clear();
  };
  const size_t n = std::min(xs.size(), ys.size());
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(xs[i]) || !std::isfinite(ys[i]) || (y_.log() && ys[i] <= 0)) {
      flush();
      continue;
    }
    segment.push_back(absl::StrCat(Px(x_.ToPx(xs[i])), ",", Px(y_.ToPx(ys[i]))));
  }
  flush();
}

void SvgChart::Circle(double x, double y, double r, absl::string_view color) {
  absl::StrAppend(&body_, "<circle cx=\"", Px(x_.ToPx(x)), "\" cy=\"", Px(y_.ToPx(y)), "\" r=\"",
                  FormatNumber(r, 1), "\" fill=\"", XmlEscape(color),
                  "\" stroke=\"#222\" stroke-width=\"0.8\" />\n");
}

void SvgChart::Diamond(double x, double y, double r, absl::string_view color) {
  const double cx = x_.ToPx(x), cy = y_.ToPx(y);
  absl::StrAppend(&body_, "<polygon points=\"", Px(cx), ",", Px(cy - r), " ", Px(cx + r), ",",
                  Px(cy), " ", Px(cx), ",", Px(cy + r), " ", Px(cx - r), ",", Px(cy), "\" fill=\"",
                  XmlEscape(color), "\" stroke=\"#222\" stroke-width=\"0.8\" />\n");
}

void SvgChart::TextPx(double px, double py, absl::string_view text, absl::string_view anchor,
                      int size, absl::string_view color, bool bold) {
  absl::StrAppend(&body_, "<text x=\"", Px(px), "\" y=\"", Px(py), "\" text-anchor=\"",
                  XmlEscape(anchor), "\" font-size=\"", size, "\" fill=\"", XmlEscape(color), "\"",
                  bold ? " font-weight=\"bold\"" : "", ">", XmlEscape(text), "</text>\n");
}

std::string SvgChart::Finish() const {
  return absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", width_, "\" height=\"",
                      height_, "\" viewBox=\"0 0 ", width_, " ", height_,
                      "\" role=\"img\" aria-label=\"", XmlEscape(title_), "\">\n", body_,
                      "</svg>\n");
}

}  // namespace windquant::report
