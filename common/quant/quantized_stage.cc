#include "common/quant/quantized_stage.h"

#include <c10/core/GradMode.h>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::quant {
namespace {

// A layer's linears as float32 copies on the host (also when stored float32), to be
// overwritten in place.
std::array<at::Tensor, model::kNumMatrices> HostCopy(const model::LayerWeights& stored) {
  std::array<at::Tensor, model::kNumMatrices> w;
  for (int m = 0; m < model::kNumMatrices; ++m) {
    w[m] = stored.linear[m]
               .to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true)
               .contiguous();
  }
  return w;
}

// The same on the weights' own device.
std::array<at::Tensor, model::kNumMatrices> Float32Copy(const model::LayerWeights& stored) {
  std::array<at::Tensor, model::kNumMatrices> w;
  for (int m = 0; m < model::kNumMatrices; ++m) {
    w[m] = stored.linear[m].to(at::kFloat, /*non_blocking=*/false, /*copy=*/true).contiguous();
  }
  return w;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const PlanLinears>> PlanLinears::Create(
    std::shared_ptr<const StageFits> fits, std::shared_ptr<const std::vector<int>> actions,
    at::ScalarType dtype) {
  if (fits == nullptr || actions == nullptr) {
    return absl::InvalidArgumentError("plan: no fits or no actions");
  }
  WQ_RETURN_IF_ERROR(fits->CheckPlan(*actions));
  return std::shared_ptr<const PlanLinears>(
      new PlanLinears(std::move(fits), std::move(actions), dtype));
}

PlanLinears::PlanLinears(std::shared_ptr<const StageFits> fits,
                         std::shared_ptr<const std::vector<int>> actions, at::ScalarType dtype)
    : fits_(std::move(fits)),
      actions_(std::move(actions)),
      dtype_(dtype),
      slots_(new Slot[fits_->end_layer() - fits_->first_layer()]) {}

std::array<at::Tensor, model::kNumMatrices> PlanLinears::Linears(
    int64_t layer, const model::LayerWeights& stored) const {
  c10::NoGradGuard no_grad;
  const bool on_host = stored.linear[0].device().is_cpu();
  if (on_host && fits_->compensation() == nullptr) {
    // The CPU kernels per forward: a float32 copy, dequantized in place.
    std::array<at::Tensor, model::kNumMatrices> w = HostCopy(stored);
    fits_->ApplyToLayer(layer, *actions_, &w);
    if (dtype_ != at::kFloat) {
      for (at::Tensor& t : w) t = t.to(dtype_);
    }
    return w;
  }
  Slot& slot = slots_[layer - fits_->first_layer()];
  std::call_once(slot.once, [&] {
    if (fits_->compensation() == nullptr) {
      slot.codes = LayerCodes::FromWeights(*fits_, *actions_, layer, stored.linear);
      return;
    }
    // Compensated where the weights are (CompensateLinearTorch off the CPU), then coded.
    std::array<at::Tensor, model::kNumMatrices> w =
        on_host ? HostCopy(stored) : Float32Copy(stored);
    fits_->ApplyToLayer(layer, *actions_, &w);
    slot.codes =
        LayerCodes::FromValues(*fits_, *actions_, layer, w, stored.linear[0].device(), dtype_);
  });
  return slot.codes.Decode(dtype_);
}

bool PlanLinears::HoldsCodes(const model::LlamaModel& model, const StageFits& fits) {
  return fits.compensation() != nullptr || !model.device().is_cpu();
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
                      PlanLinears::Create(std::move(fits), std::move(actions), model.dtype()));
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
