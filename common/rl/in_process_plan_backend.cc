#include "common/rl/in_process_plan_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/quant/quantized_stage.h"

namespace windquant::rl {

InProcessPlanBackend::InProcessPlanBackend(const model::LlamaModel* model,
                                           const quant::StageFits* fits,
                                           const plan::UnitTable* table,
                                           std::vector<int32_t> calib_ids,
                                           std::vector<int32_t> eval_ids,
                                           const model::PerplexityOptions& options)
    : model_(model),
      fits_(fits),
      table_(table),
      calib_ids_(std::move(calib_ids)),
      eval_ids_(std::move(eval_ids)),
      options_(options) {}

absl::StatusOr<std::shared_ptr<const model::LlamaModel>> InProcessPlanBackend::Model(
    const std::vector<int>& actions) {
  // A non-owning handle on the FP model (it outlives this backend).
  std::shared_ptr<const model::LlamaModel> fp(std::shared_ptr<const model::LlamaModel>(), model_);
  if (actions.empty()) return fp;
  if (actions.size() != table_->units.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan: ", actions.size(), " actions for ", table_->units.size(), " units"));
  }
  return quant::ApplyPlan(
      *model_,
      std::shared_ptr<const quant::StageFits>(std::shared_ptr<const quant::StageFits>(), fits_),
      std::make_shared<const std::vector<int>>(actions));
}

absl::StatusOr<SliceMeasurement> InProcessPlanBackend::Measure(const plan::Plan* plan) {
  static const std::vector<int> kFullPrecision;
  if (plan != nullptr && plan->actions.empty()) {
    return absl::InvalidArgumentError("plan: no actions");
  }
  const std::vector<int>& actions = plan != nullptr ? plan->actions : kFullPrecision;
  WQ_ASSIGN_OR_RETURN(std::shared_ptr<const model::LlamaModel> m, Model(actions));
  SliceMeasurement out;
  WQ_ASSIGN_OR_RETURN(out.calibration, model::ComputePerplexity(*m, calib_ids_, options_));
  WQ_ASSIGN_OR_RETURN(out.evaluation, model::ComputePerplexity(*m, eval_ids_, options_));
  if (plan != nullptr) out.effective_bits = table_->EffectiveBits(actions);
  return out;
}

absl::StatusOr<model::PerplexityResult> InProcessPlanBackend::Perplexity(
    const std::vector<int>& actions, const std::vector<int32_t>& ids, int64_t max_tokens) {
  WQ_ASSIGN_OR_RETURN(std::shared_ptr<const model::LlamaModel> m, Model(actions));
  model::PerplexityOptions o = options_;
  o.max_tokens = max_tokens;
  return model::ComputePerplexity(*m, ids, o);
}

}  // namespace windquant::rl
