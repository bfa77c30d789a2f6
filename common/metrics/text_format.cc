#include "common/metrics/text_format.h"

#include <charconv>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace windquant::metrics {
namespace {

std::string Escape(absl::string_view in, bool quote) {
  std::string out;
  out.reserve(in.size());
  for (char c : in) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="x",b="y"}` with an optional extra pair (histogram "le"); "" when there are no labels.
std::string LabelSet(const std::vector<std::string>& names, const std::vector<std::string>& values,
                     absl::string_view extra_name = {}, absl::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    absl::StrAppend(&out, names[i], "=\"", EscapeLabelValue(values[i]), "\"");
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    absl::StrAppend(&out, extra_name, "=\"", extra_value, "\"");
  }
  out += '}';
  return out;
}

}  // namespace

std::string EscapeHelp(absl::string_view help) { return Escape(help, /*quote=*/false); }
std::string EscapeLabelValue(absl::string_view value) { return Escape(value, /*quote=*/true); }

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // Integral values (counts, bytes) print as integers while exactly representable;
  // everything else as the shortest round-trip %g form, like Go's FormatFloat(v, 'g', -1)
  // that Prometheus' own clients use (0.0005, 1e-07, 1e+21).
  constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53
  if (std::floor(v) == v && std::fabs(v) < kMaxExactInteger) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), static_cast<int64_t>(v));
    return std::string(buf, end);
  }
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general);
  return std::string(buf, end);
}

std::string FormatText(const std::vector<FamilySnapshot>& families) {
  std::string out;
  for (const FamilySnapshot& f : families) {
    absl::StrAppend(&out, "# HELP ", f.name, " ", EscapeHelp(f.help), "\n");
    absl::StrAppend(&out, "# TYPE ", f.name, " ", MetricTypeName(f.type), "\n");
    for (const MetricSnapshot& m : f.metrics) {
      if (f.type != MetricType::kHistogram) {
        absl::StrAppend(&out, f.name, LabelSet(f.label_names, m.label_values), " ",
                        FormatValue(m.value), "\n");
        continue;
      }
      const Histogram::Snapshot& h = m.histogram;
      for (size_t i = 0; i < h.cumulative.size(); ++i) {
        std::string le = i < h.bounds.size() ? FormatValue(h.bounds[i]) : "+Inf";
        absl::StrAppend(&out, f.name, "_bucket", LabelSet(f.label_names, m.label_values, "le", le),
                        " ", h.cumulative[i], "\n");
      }
      const std::string labels = LabelSet(f.label_names, m.label_values);
      absl::StrAppend(&out, f.name, "_sum", labels, " ", FormatValue(h.sum), "\n");
      absl::StrAppend(&out, f.name, "_count", labels, " ", h.count, "\n");
    }
  }
  return out;
}

}  // namespace windquant::metrics
