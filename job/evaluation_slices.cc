#include "job/evaluation_slices.h"

#include <algorithm>

namespace windquant::job {

absl::StatusOr<EvaluationSlices> SliceEvaluationText(const config::EvaluationConfig& evaluation,
                                                     std::vector<int32_t> calibration_ids,
                                                     const std::vector<int32_t>& evaluation_ids) {
  EvaluationSlices s;
  s.calibration = std::move(calibration_ids);
  if (static_cast<int64_t>(s.calibration.size()) > evaluation.calib_slice_tokens) {
    s.calibration.resize(evaluation.calib_slice_tokens);
  }
  const int64_t window = evaluation.context - 1;
  int64_t end = static_cast<int64_t>(evaluation_ids.size());
  if (evaluation.final_eval_tokens > 0) end = std::min(end, evaluation.final_eval_tokens);
  const int64_t slice = std::min<int64_t>(evaluation.eval_slice_tokens, end) / window * window;
  if (slice < window) {
    return absl::InvalidArgumentError(
        "evaluation.eval_slice_tokens: shorter than one window of evaluation.context");
  }
  s.selection.assign(evaluation_ids.begin(), evaluation_ids.begin() + slice);
  s.heldout.assign(evaluation_ids.begin() + slice, evaluation_ids.begin() + end);
  return s;
}

}  // namespace windquant::job
