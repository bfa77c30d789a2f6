// `windquant report --in report.json --out report.html`: renders the self-contained
// HTML report of a plan (common/report) from its report.json.
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/command.h"
#include "common/base/location_check.h"
#include "common/report/html_report.h"
#include "common/report/report_data.h"

namespace windquant::cli {
namespace {

absl::Status RunReport(Args& args) {
  const std::string in = args.Get("in");
  std::string out = args.Get("out");
  absl::Status finish = args.Finish();
  if (!finish.ok()) return finish;
  if (in.empty()) return absl::InvalidArgumentError("--in: required (a report.json)");
  if (out.empty()) {
    // Default: report.html next to the input.
    const size_t slash = in.rfind('/');
    out = slash == std::string::npos ? "report.html" : in.substr(0, slash + 1) + "report.html";
  } else if (absl::Status parent = base::CheckOutputParent(out, "--out"); !parent.ok()) {
    return parent;
  }
  absl::StatusOr<report::ReportData> data = report::ReadReportJson(in);
  if (!data.ok()) return data.status();
  absl::Status written = report::WriteHtmlReport(*data, out);
  if (!written.ok()) return written;
  std::cout << "wrote " << out << " (" << data->units.size() << " units, " << data->points.size()
            << " methods, " << data->curve.size() << " updates)" << std::endl;
  return absl::OkStatus();
}

WQ_REGISTER_COMMAND(report, "report", "render a plan's report.json as a self-contained HTML page",
                    "usage: windquant report --in report.json [--out report.html]\n"
                    "Writes one HTML file (inline CSS and SVG, no scripts, nothing fetched):\n"
                    "summary table, bits heat map over layers x matrix types, perplexity\n"
                    "against effective bits for the RL plan and every baseline, training\n"
                    "curves. --out defaults to report.html beside --in. Written atomically.\n",
                    RunReport);

}  // namespace
}  // namespace windquant::cli
