// The self-contained HTML report of one plan (DESIGN.md section 1): one file with
// inline CSS and inline SVG only (no scripts, no fonts or images from anywhere, a
// Content-Security-Policy that forbids loading anything), so it opens offline.
// Sections: summary table, the plan's bits heat map over layers x matrix types,
// perplexity against effective bits for the RL plan and every baseline, and the
// training curves (reward, best perplexity, lambda, bits against update).
// Output is a pure function of the ReportData (byte-identical for equal input).
// Stateless functions; thread-safe.
#ifndef WINDQUANT_COMMON_REPORT_HTML_REPORT_H_
#define WINDQUANT_COMMON_REPORT_HTML_REPORT_H_

#include <string>

#include "absl/status/status.h"
#include "common/report/report_data.h"

namespace windquant::report {

// Heat-map colour of `bits` effective bits per weight as "#rrggbb": a viridis ramp
// over log2(bits) on the fixed range [1, 16] bits (clamped), so colours mean the
// same bits in every report; strictly changes with bits inside that range.
std::string BitsColor(double bits);

// The report as one HTML document (well-formed XML: every element closed, all text
// escaped). Does not validate `data`; out-of-range units are skipped.
std::string RenderHtmlReport(const ReportData& data);

// Validates `data` and writes RenderHtmlReport(data) to `path` atomically.
absl::Status WriteHtmlReport(const ReportData& data, const std::string& path);

// Writes <dir>/report.json and <dir>/report.html (each atomically), the pair that
// goes next to a plan.
absl::Status WriteReportFiles(const ReportData& data, const std::string& dir);

}  // namespace windquant::report

#endif  // WINDQUANT_COMMON_REPORT_HTML_REPORT_H_
