// report.json and report.html of a quantize run (`windquant quantize` writes
// both into output.dir): FP / RL / baseline perplexities and bits, the winner,
// the returned plan's origin, the search baseline's and the RL run's counts of
// real plan evaluations,
// wall times, λ, the curriculum history and the training curve per update,
// and beside them the keys of common/report's ReportData, so that
// `windquant report --in report.json` renders report.html again.
// Thread-compatible.
#ifndef WINDQUANT_JOB_QUANTIZE_REPORT_H_
#define WINDQUANT_JOB_QUANTIZE_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/config/run_config.h"
#include "common/plan/plan.h"
#include "common/plan/unit_table.h"
#include "common/report/report_data.h"
#include "common/rl/run_result.h"
#include "job/bisection_baseline.h"
#include "job/evaluation_slices.h"
#include "job/plan_measurement.h"
#include "job/search_baseline.h"

namespace windquant::job {

struct QuantizeReport {
  const config::RunConfig* config = nullptr;  // borrowed, as the pointers below
  const plan::UnitTable* table = nullptr;
  const rl::RunResult* training = nullptr;
  const EvaluationSlices* slices = nullptr;
  std::string fingerprint;          // config::RunFingerprint of the run
  std::string commit;               // the commit of the binary (QuantizeOptions::build_commit)
  double target_bits = 0;           // the final curriculum target (the cap in quality-target mode)
  double compared_at_bits = 0;      // the final rows' bits (quantize_job.cc CompareAtBits)
  MeasuredPlan fp;                  // the full-precision model
  std::vector<MeasuredPlan> plans;  // the RL plan first, then the baselines
  // UniformAnchors' plans, in its order (pairs: uniform, then the Lagrangian
  // plan at its bits); report.json "uniform_anchors". Empty: none measured.
  std::vector<MeasuredPlan> anchors;
  bool have_heldout = false;  // winner metric: held-out PPL, else whole-text PPL
  std::string winner;
  std::string origin;                    // the returned plan's origin (QuantizeResult::origin)
  std::string returned = "rl";           // the row of `plans` returned
  int64_t rl_evaluations = 0;            // real plan evaluations of the RL run (its start's too)
  const SearchResult* search = nullptr;  // the search baseline's run (nullptr: not run)
  const SearchResult* screened_search = nullptr;  // the screened search's (nullptr: not run)
  // The quality-target mode's bisections (rows "lagrange-bisect", "screened-bisect").
  const BisectionResult* lagrange_bisect = nullptr;  // nullptr: not run
  const BisectionResult* screened_bisect = nullptr;
  // The quality-target mode's start of RL (quantize_job.cc StartBisection); nullptr: none.
  const BisectionResult* rl_start = nullptr;
  std::string exported;  // the fake-quant checkpoint's directory ("" = none)
  double prepare_s = 0, train_s = 0, total_s = 0;
};

// The origin of the plan the RL run returned, from the learner's candidate
// source: "rl" (a sampled episode), "greedy-of-policy" (the learner's
// "rl-greedy": the policy's argmax plan after an update) or "lagrange" (the
// reference plan, when no policy plan beat it on the selection slice); any
// other source is returned as it is.
std::string ReturnedPlanOrigin(const std::string& learner_source);

// The returned plan as plan.json / plan.bin carry it: training.best's actions
// at `target_bits`, source = its origin, its policy version.
plan::Plan ReturnedPlan(const plan::UnitTable& table, const rl::RunResult& training,
                        double target_bits);

// The HTML report's data: the RL plan's bits per unit, every measured plan
// at its effective bits, the training curve. Perplexities are the winner
// metric's (non-finite ones become NaN: unknown).
report::ReportData MakeReportData(const QuantizeReport& r);

// Writes output.dir/report.json (atomically) and output.dir/report.html.
// INVALID_ARGUMENT when the report data is inconsistent; the file errors.
absl::Status WriteQuantizeReport(const QuantizeReport& r);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_QUANTIZE_REPORT_H_
