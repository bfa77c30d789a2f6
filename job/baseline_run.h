// `windquant baseline` on an open session: the baselines that measure plans on
// the selection slice (SearchSessionPlan, MeasuredSessionPlan) and the command's
// JSON description of a plan with its held-out perplexity (DescribeBaseline).
// The command parses flags and prints; these compute.
// Thread-compatible (the session's const methods).
#ifndef WINDQUANT_JOB_BASELINE_RUN_H_
#define WINDQUANT_JOB_BASELINE_RUN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/base/text_range.h"
#include "common/plan/plan.h"
#include "common/quant/quantization_session.h"
#include "job/baseline_plans.h"
#include "nlohmann/json.hpp"

namespace windquant::job {

// The search baseline (search_baseline.h) of `spec` on the session's model,
// each candidate measured on `selection` (evaluation.selection). `info` gets its
// counts and perplexities. Errors: evaluation.selection's, SearchPlan's.
absl::StatusOr<plan::Plan> SearchSessionPlan(const quant::QuantizationSession& session,
                                             const base::TextRange& selection,
                                             const BaselineSpec& spec, nlohmann::json* info);

// The Lagrangian plan of `spec.bits` on the measured proxy (measured_proxy.h,
// `spec.rounds` rounds, every plan measured on `selection`); `measured_table`
// gets the table it was chosen on and `info` the counts and perplexities.
// Errors: evaluation.selection's, MeasureProxy's.
absl::StatusOr<plan::Plan> MeasuredSessionPlan(const quant::QuantizationSession& session,
                                               const base::TextRange& selection,
                                               const BaselineSpec& spec, nlohmann::json* info,
                                               plan::UnitTable* measured_table);

struct DescribeOptions {
  bool measure = true;     // the plan's perplexity on the held-out text
  bool with_fp = false;    // and the FP model's
  int64_t max_tokens = 0;  // first N held-out ids (0 = all)
};

// plan_id, method, bits, proxy error, action counts, cache and fingerprint,
// and (options.measure) the held-out perplexity: the `--json` object.
absl::StatusOr<nlohmann::json> DescribeBaseline(const quant::QuantizationSession& session,
                                                const plan::Plan& plan, const std::string& method,
                                                const DescribeOptions& options);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_BASELINE_RUN_H_
