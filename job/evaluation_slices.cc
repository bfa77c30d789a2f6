#include "job/evaluation_slices.h"

#include <utility>

namespace windquant::job {

absl::StatusOr<EvaluationSlices> SliceEvaluationText(const config::EvaluationConfig& evaluation,
                                                     std::vector<int32_t> calibration_ids,
                                                     std::vector<int32_t> selection_ids,
                                                     std::vector<int32_t> heldout_ids) {
  EvaluationSlices s;
  s.calibration = std::move(calibration_ids);
  if (static_cast<int64_t>(s.calibration.size()) > evaluation.calib_slice_tokens) {
    s.calibration.resize(evaluation.calib_slice_tokens);
  }
  if (static_cast<int64_t>(selection_ids.size()) < evaluation.context - 1) {
    return absl::InvalidArgumentError(
        "evaluation.selection.tokens: shorter than one window of evaluation.context");
  }
  s.selection = std::move(selection_ids);
  s.heldout = std::move(heldout_ids);
  return s;
}

}  // namespace windquant::job
