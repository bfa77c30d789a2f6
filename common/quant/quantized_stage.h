// QuantizedStage: what a stage's users share: its full-precision weights (in their
// stored dtype, on their device, inside a model::LlamaModel) and its fits (StageFits, with
// the stage's unit table). Several users (the one-process session, an actor's forward
// passes, the exporter, later the in-process services) hold one std::shared_ptr<const
// QuantizedStage> and read it concurrently.
//
// A plan is applied by PlanModel: a LlamaModel sharing the weights whose forward takes
// each layer's linears from PlanLinears, in one of two ways:
//  * weights on the CPU, no compensation: every forward widens the layer to float32 and
//    dequantizes every unit's action in place with the CPU kernels
//    (StageFits::ApplyToLayer): 4 bytes per weight of one layer during its forward,
//    nothing between forwards. On the CPU this is as fast as decoding cached codes
//    (measured at the 1B shape, bench/stage_bench: 0.18 s per layer against 0.19-0.30 s,
//    plus 1.5-2.4 s to make the codes) and holds nothing.
//  * weights on another device (a GPU), or with error compensation
//    (StageFits::compensation): the first forward to reach a layer makes its codes once
//    (LayerCodes, plan_codes.h: INT8 levels, per-row steps, salient values, on the
//    weights' device, with torch ops) and every forward decodes them there: no host copy,
//    no host sync. With compensation the layer's compensated weights are computed once
//    where the weights are (CompensateLinear on the CPU, CompensateLinearTorch on a GPU:
//    gptq_torch.h), and the codes made from them.
//
// Memory: the model's weights (2 bytes per weight for BF16) + the fits (~0.13 bytes per
// weight at chunk 128), both for the object's life; per plan model that holds codes, its
// codes (~1.1 bytes per weight of the layers it has run, on the device) for the plan
// model's life; during a layer's forward its dequantized weights (4 bytes per weight of
// the layer, + 2 in bfloat16); with compensation, the factors as gptq.h says (the services
// spill them: one layer's at a time, while it is compensated) and, while a layer's codes
// are made, its float32 weights where they are stored (on a GPU also the compensation's
// working copies and the layer's factors: gptq_torch.h).
// Immutable; thread-safe.
#ifndef WINDQUANT_COMMON_QUANT_QUANTIZED_STAGE_H_
#define WINDQUANT_COMMON_QUANT_QUANTIZED_STAGE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/llama_model.h"
#include "common/plan/unit_table.h"
#include "common/quant/plan_codes.h"
#include "common/quant/stage_fits.h"

namespace windquant::quant {

// model::LinearSource of a plan: per layer, its weights dequantized per forward on the CPU,
// or its codes made once (on the first forward to reach it) and decoded on every forward
// (see above), handed out in the compute dtype (`dtype`) on the stored weights' device.
class PlanLinears : public model::LinearSource {
 public:
  // INVALID_ARGUMENT when `actions` does not cover fits' units (StageFits::CheckPlan).
  static absl::StatusOr<std::shared_ptr<const PlanLinears>> Create(
      std::shared_ptr<const StageFits> fits, std::shared_ptr<const std::vector<int>> actions,
      at::ScalarType dtype = at::kFloat);
  std::array<at::Tensor, model::kNumMatrices> Linears(
      int64_t layer, const model::LayerWeights& stored) const override;
  // Whether a plan model of `model` with `fits` holds its layers' codes between forwards.
  static bool HoldsCodes(const model::LlamaModel& model, const StageFits& fits);

 private:
  struct Slot {
    std::once_flag once;
    LayerCodes codes;
  };
  PlanLinears(std::shared_ptr<const StageFits> fits,
              std::shared_ptr<const std::vector<int>> actions, at::ScalarType dtype);
  std::shared_ptr<const StageFits> fits_;
  std::shared_ptr<const std::vector<int>> actions_;
  at::ScalarType dtype_;
  std::unique_ptr<Slot[]> slots_;  // [layer - first_layer]
};

// `model` with `actions` applied from `fits` (which must cover the model's layers), its
// linears in the model's compute dtype.
// INVALID_ARGUMENT for a plan of the wrong length, an action out of range or fits of
// other layers.
absl::StatusOr<std::shared_ptr<const model::LlamaModel>> ApplyPlan(
    const model::LlamaModel& model, std::shared_ptr<const StageFits> fits,
    std::shared_ptr<const std::vector<int>> actions);

class QuantizedStage {
 public:
  // INVALID_ARGUMENT when the fits cover other layers than the model's decoder layers.
  static absl::StatusOr<std::shared_ptr<const QuantizedStage>> Create(
      std::shared_ptr<const model::LlamaModel> model, std::shared_ptr<const StageFits> fits);

  const model::LlamaModel& model() const { return *model_; }
  const std::shared_ptr<const model::LlamaModel>& shared_model() const { return model_; }
  const StageFits& fits() const { return *fits_; }
  const std::shared_ptr<const StageFits>& shared_fits() const { return fits_; }
  const plan::UnitTable& table() const { return fits_->table(); }

  // The stage with `actions` (one per global unit) applied; errors as ApplyPlan.
  absl::StatusOr<std::shared_ptr<const model::LlamaModel>> PlanModel(
      std::shared_ptr<const std::vector<int>> actions) const;

 private:
  QuantizedStage(std::shared_ptr<const model::LlamaModel> model,
                 std::shared_ptr<const StageFits> fits)
      : model_(std::move(model)), fits_(std::move(fits)) {}
  std::shared_ptr<const model::LlamaModel> model_;
  std::shared_ptr<const StageFits> fits_;
};

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_QUANTIZED_STAGE_H_
