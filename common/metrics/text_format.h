// Prometheus text exposition format 0.0.4 for collected families.
// https://prometheus.io/docs/instrumenting/exposition_formats/
//
// Output is deterministic: families in the given order (the registry sorts them by name),
// children in the given order, histogram buckets ascending with a final le="+Inf".
// Stateless functions; thread-safe.
#ifndef WINDQUANT_COMMON_METRICS_TEXT_FORMAT_H_
#define WINDQUANT_COMMON_METRICS_TEXT_FORMAT_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/metrics/metric.h"

namespace windquant::metrics {

// The Content-Type of FormatText's output.
inline constexpr char kTextContentType[] = "text/plain; version=0.0.4; charset=utf-8";

std::string FormatText(const std::vector<FamilySnapshot>& families);

// "# HELP" text: '\' -> "\\", newline -> "\n".
std::string EscapeHelp(absl::string_view help);
// Label values: '\' -> "\\", '"' -> "\"", newline -> "\n".
std::string EscapeLabelValue(absl::string_view value);
// A sample value or "le" bound: integers as integers (below 2^53), otherwise the shortest
// round-trip %g form; "+Inf", "-Inf", "NaN".
std::string FormatValue(double v);

}  // namespace windquant::metrics

#endif  // WINDQUANT_COMMON_METRICS_TEXT_FORMAT_H_
