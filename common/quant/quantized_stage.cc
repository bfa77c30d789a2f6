#include "common/quant/quantized_stage.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::quant {

absl::StatusOr<std::shared_ptr<const PlanLinears>> PlanLinears::Create(
    std::shared_ptr<const StageFits> fits, std::shared_ptr<const std::vector<int>> actions) {
  if (fits == nullptr || actions == nullptr) {
    return absl::InvalidArgumentError("plan: no fits or no actions");
  }
  WQ_RETURN_IF_ERROR(fits->CheckPlan(*actions));
  return std::shared_ptr<const PlanLinears>(new PlanLinears(std::move(fits), std::move(actions)));
}

std::array<at::Tensor, model::kNumMatrices> PlanLinears::Linears(
    int64_t layer, const model::LayerWeights& stored) const {
  at::NoGradGuard no_grad;
  std::array<at::Tensor, model::kNumMatrices> out;
  for (int m = 0; m < model::kNumMatrices; ++m) {
    // A private FP32 copy on the CPU (also when stored FP32): overwritten in place.
    out[m] = stored.linear[m]
                 .to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true)
                 .contiguous();
  }
  fits_->ApplyToLayer(layer, *actions_, &out);
  for (int m = 0; m < model::kNumMatrices; ++m) {
    if (stored.linear[m].device() != out[m].device()) out[m] = out[m].to(stored.linear[m].device());
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const model::LlamaModel>> ApplyPlan(
    const model::LlamaModel& model, std::shared_ptr<const StageFits> fits,
    std::shared_ptr<const std::vector<int>> actions) {
  if (fits == nullptr) return absl::InvalidArgumentError("plan: no fits");
  if (fits->first_layer() != model.first_layer() || fits->end_layer() != model.end_layer()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan: fits of layers [", fits->first_layer(), ", ", fits->end_layer(),
        ") for a model of layers [", model.first_layer(), ", ", model.end_layer(), ")"));
  }
  WQ_ASSIGN_OR_RETURN(std::shared_ptr<const PlanLinears> linears,
                      PlanLinears::Create(std::move(fits), std::move(actions)));
  return model.WithLinears(std::move(linears));
}

absl::StatusOr<std::shared_ptr<const QuantizedStage>> QuantizedStage::Create(
    std::shared_ptr<const model::LlamaModel> model, std::shared_ptr<const StageFits> fits) {
  if (model == nullptr || fits == nullptr) {
    return absl::InvalidArgumentError("quantized stage: no model or no fits");
  }
  if (fits->first_layer() != model->first_layer() || fits->end_layer() != model->end_layer()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quantized stage: fits of layers [", fits->first_layer(), ", ", fits->end_layer(),
        ") for weights of layers [", model->first_layer(), ", ", model->end_layer(), ")"));
  }
  return std::shared_ptr<const QuantizedStage>(
      new QuantizedStage(std::move(model), std::move(fits)));
}

absl::StatusOr<std::shared_ptr<const model::LlamaModel>> QuantizedStage::PlanModel(
    std::shared_ptr<const std::vector<int>> actions) const {
  return ApplyPlan(*model_, fits_, std::move(actions));
}

}  // namespace windquant::quant
