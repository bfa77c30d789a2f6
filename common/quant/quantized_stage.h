// QuantizedStage: what a stage's users share: its full-precision weights (in their
// stored dtype, inside a model::LlamaModel) and its fits (StageFits, with the stage's
// unit table). Several users (the one-process session, an actor's forward passes, the
// exporter, later the in-process services) hold one std::shared_ptr<const
// QuantizedStage> and read it concurrently.
//
// A plan is applied by PlanModel: a LlamaModel sharing the weights whose forward
// dequantizes each layer's chosen actions when it reaches the layer (PlanLinears), so a
// plan costs 4 bytes per weight of one layer for the duration of that layer's forward,
// and nothing between forwards. With error compensation (StageFits::compensation) a
// layer's compensated weights cost far more to compute than to dequantize, and one plan
// evaluation runs several forwards (micro-batches, slices): the plan model computes
// each layer once, on its first forward, and keeps it as codes (1 byte per weight:
// the INT8 level of every entry; FP16 bits, 2 bytes, for units at 16 bits) for the
// plan model's life, decoding them, bit for bit, on every later forward.
//
// Memory: the model's weights (2 bytes per weight for BF16) + the fits (~0.13 bytes per
// weight at chunk 128), both for the object's life; with compensation, + 1 byte per
// weight of codes per plan model alive, and the factors as gptq.h says (the services
// spill them: one layer's at a time, while it is compensated).
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
#include "common/quant/stage_fits.h"

namespace windquant::quant {

// model::LinearSource of a plan: the layer's full-precision weights widened to float32
// (a copy), then every unit's chosen action dequantized in place (StageFits::ApplyToLayer);
// with compensation, the layer is compensated once and its codes kept (see above). The
// weights it hands out are cast to the compute dtype (`dtype`) on the way to the device
// (one copy; none more in float32), so a bfloat16 forward holds 2 bytes per weight of
// the layer on the device.
class PlanLinears : public model::LinearSource {
 public:
  // INVALID_ARGUMENT when `actions` does not cover fits' units (StageFits::CheckPlan).
  static absl::StatusOr<std::shared_ptr<const PlanLinears>> Create(
      std::shared_ptr<const StageFits> fits, std::shared_ptr<const std::vector<int>> actions,
      at::ScalarType dtype = at::kFloat);
  std::array<at::Tensor, model::kNumMatrices> Linears(
      int64_t layer, const model::LayerWeights& stored) const override;

 private:
  // A compensated layer as codes: per unit of the layer, its entries' levels (int8,
  // row-major) or, at 16 bits, FP16 bits. Salient entries come from the fits.
  struct LayerCodes {
    std::once_flag once;
    bool exact = true;  // false: the codes did not give the weights back (recomputed)
    std::vector<std::vector<int8_t>> levels;
    std::vector<std::vector<uint16_t>> halves;
  };
  PlanLinears(std::shared_ptr<const StageFits> fits,
              std::shared_ptr<const std::vector<int>> actions, at::ScalarType dtype);
  void Encode(int64_t layer, const std::array<at::Tensor, model::kNumMatrices>& w,
              LayerCodes* codes) const;
  // Writes the units of the layer (of matrix `only` when >= 0) into w's columns.
  void Decode(int64_t layer, const LayerCodes& codes,
              std::array<at::Tensor, model::kNumMatrices>* w, int only = -1) const;
  std::shared_ptr<const StageFits> fits_;
  std::shared_ptr<const std::vector<int>> actions_;
  at::ScalarType dtype_;
  std::unique_ptr<LayerCodes[]> codes_;  // [layer - first_layer], compensation only
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
