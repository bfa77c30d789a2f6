// The token slices of the quantize job (DESIGN.md section 4): the loss term is
// measured on the start of the calibration text, plans are selected on the
// start of the evaluation text, and the final numbers are also given on the
// rest of it (held out).
// The selection slice is rounded down to whole perplexity windows (context - 1
// ids each), so that its windows followed by the held-out part's are exactly
// the windows of the whole text: the whole text's NLL is the token-weighted
// sum of the two.
// Thread-safe (a pure function).
#ifndef WINDQUANT_JOB_EVALUATION_SLICES_H_
#define WINDQUANT_JOB_EVALUATION_SLICES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/run_config.h"

namespace windquant::job {

struct EvaluationSlices {
  std::vector<int32_t> calibration;  // first evaluation.calib_slice_tokens calibration ids
  std::vector<int32_t> selection;    // whole windows at the start of the evaluation ids
  std::vector<int32_t> heldout;      // the rest, up to evaluation.final_eval_tokens (0 = all)
};

// `calibration_ids` and `evaluation_ids`: the texts encoded without BOS.
// INVALID_ARGUMENT naming evaluation.eval_slice_tokens when the selection slice
// would be shorter than one window.
absl::StatusOr<EvaluationSlices> SliceEvaluationText(const config::EvaluationConfig& evaluation,
                                                     std::vector<int32_t> calibration_ids,
                                                     const std::vector<int32_t>& evaluation_ids);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_EVALUATION_SLICES_H_
