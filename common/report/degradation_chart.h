// The quality-target section of the HTML report (docs/lagrange.md): every plan
// a quality-target run measured, its relative perplexity increase on the
// selection slice against its effective bits, the epsilon line, and the final
// rows (the returned plan, the searches at its bits) marked and labelled.
// Stateless; thread-safe.
#ifndef WINDQUANT_COMMON_REPORT_DEGRADATION_CHART_H_
#define WINDQUANT_COMMON_REPORT_DEGRADATION_CHART_H_

#include <string>

#include "common/report/report_data.h"

namespace windquant::report {

// The section's HTML (a heading, one inline SVG chart, a line of text); ""
// for a fixed-budget run (max_ppl_increase 0).
std::string DegradationSection(const ReportData& data);

}  // namespace windquant::report

#endif  // WINDQUANT_COMMON_REPORT_DEGRADATION_CHART_H_
