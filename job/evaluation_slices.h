// The token slices of the quantize job (DESIGN.md section 4), one per text
// role of the run config (base::TextRange, disjoint by the config's own
// check): the loss term of the episode-end reward is measured on the start of
// the calibration range, plans are chosen on the selection range, and the
// final numbers are also given on the held-out range, which no step of
// calibration or selection reads.
// Thread-safe (pure functions).
#ifndef WINDQUANT_JOB_EVALUATION_SLICES_H_
#define WINDQUANT_JOB_EVALUATION_SLICES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/run_config.h"

namespace windquant::job {

struct EvaluationSlices {
  std::vector<int32_t> calibration;  // first evaluation.calib_slice_tokens calibration-range ids
  std::vector<int32_t> selection;    // evaluation.selection's ids
  std::vector<int32_t> heldout;      // evaluation.heldout's ids
};

// The ids of each role (texts encoded without BOS, ranges already cut);
// `calibration_ids` is cut to evaluation.calib_slice_tokens. INVALID_ARGUMENT
// naming evaluation.selection.tokens when the selection slice is shorter than
// one window of evaluation.context.
absl::StatusOr<EvaluationSlices> SliceEvaluationText(const config::EvaluationConfig& evaluation,
                                                     std::vector<int32_t> calibration_ids,
                                                     std::vector<int32_t> selection_ids,
                                                     std::vector<int32_t> heldout_ids);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_EVALUATION_SLICES_H_
