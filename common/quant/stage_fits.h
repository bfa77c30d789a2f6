// StageFits: a stage's part of the unit table and, per unit, its fitted quantizer
// parameters in compact form (unit_fit.h): the FP16 per-row scales of the six quantized
// actions (+ the FP16 offsets of 1 bit) and the INT8 salient set. Nothing that can be
// recomputed is kept: a plan's weights are produced from these and the stage's
// full-precision weights one layer at a time (ApplyToLayer), when a forward needs them.
//
// Memory, for the object's life: per unit of m rows x c columns, 14 m bytes of FP16
// parameters and 5 bytes per salient entry (int32 index + int8 code), i.e.
// 14 / c + 5 * salient_fraction bytes per weight: 0.13 at c = 128, 0.08 at c = 256
// (the previous QuantizedWeights kept 28 bytes per weight: 7 float32 copies). With error
// compensation it also shares (holds a reference to) the stage's GptqFactors (gptq.h:
// ~1.2-1.3 bytes per BF16 weight byte, packed float32, in memory or spilled to a scratch
// file); ApplyToLayer holds one layer's factors while it runs and keeps nothing between
// calls.
//
// Immutable after construction; const methods are thread-safe, so one StageFits can be
// shared (std::shared_ptr<const StageFits>) by every user of a stage.
#ifndef WINDQUANT_COMMON_QUANT_STAGE_FITS_H_
#define WINDQUANT_COMMON_QUANT_STAGE_FITS_H_

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/llama_weights.h"
#include "common/plan/unit_table.h"
#include "common/quant/gptq.h"
#include "common/quant/unit_fit.h"

namespace windquant::quant {

class StageFits {
 public:
  // One unit's parameters.
  struct UnitParams {
    SalientSet salient;
    // FP16 bits, [kNumActions - 1][rows]: the scales of action indices 1..6 (8, 4, 3,
    // 2, 1.58, 1 bit) back to back.
    std::vector<uint16_t> scales;
    std::vector<uint16_t> offsets;  // [rows] FP16 bits: beta of action 1
  };

  StageFits() = default;
  // `params[i]` belongs to table.units[i]. INVALID_ARGUMENT when sizes disagree with the
  // table (rows, salient counts) or a salient index is out of its unit.
  static absl::StatusOr<StageFits> Create(plan::UnitTable table, std::vector<UnitParams> params);
  // The parameters of a UnitFit holding every action (FP16 values stored as FP16 bits).
  static UnitParams Compact(const UnitFit& fit);

  const plan::UnitTable& table() const { return table_; }
  // The table's identity as plans carry it (table_fingerprint.h); the cache
  // keys its entries by another one (UnitTableFingerprint).
  void set_fingerprint(std::string fingerprint) { table_.fingerprint = std::move(fingerprint); }
  int64_t first_layer() const { return table_.first_layer; }
  int64_t end_layer() const { return table_.end_layer; }
  const UnitParams& params(size_t unit_index) const { return params_[unit_index]; }
  // The indices [first, second) of `layer`'s units in table().units (a stage's layer).
  std::pair<size_t, size_t> LayerUnits(int64_t layer) const {
    return {layer_begin_[layer - table_.first_layer], layer_begin_[layer - table_.first_layer + 1]};
  }
  // Bytes held by the parameters (what the header above promises).
  int64_t ParamBytes() const;

  // INVALID_ARGUMENT unless `actions` (one per global unit) covers this stage's units
  // with action indices in [0, kNumActions).
  absl::Status CheckPlan(const std::vector<int>& actions) const;

  // Error compensation for ApplyToLayer (gptq.h): null (the default) rounds every unit
  // on its own; set before the fits are shared. The factors must cover the stage's layers.
  void set_compensation(std::shared_ptr<const GptqFactors> factors) {
    compensation_ = std::move(factors);
  }
  const GptqFactors* compensation() const { return compensation_.get(); }
  // The same factors, to hand to other fits of the stage (one set per stage, shared).
  const std::shared_ptr<const GptqFactors>& shared_compensation() const { return compensation_; }

  // Replaces, in `linears` (decoder `layer`'s seven float32 [out, in] contiguous tensors
  // holding its full-precision weights), the columns of every unit of the layer by the
  // dequantized values of its action in `actions` (global unit ids): without compensation
  // exactly as the fit scored them (parallel over units); with it, each linear column by
  // column with the error carried on (CompensateLinear, parallel over rows, on the CPU;
  // CompensateLinearTorch on the tensors' device when they are not on the CPU). When
  // `quantized_from` is not null it receives the weights each entry was quantized from
  // (the full-precision ones without compensation): the exporter's codes are theirs.
  // The plan must have passed CheckPlan.
  void ApplyToLayer(int64_t layer, const std::vector<int>& actions,
                    std::array<at::Tensor, model::kNumMatrices>* linears,
                    std::array<at::Tensor, model::kNumMatrices>* quantized_from = nullptr) const;

  // One unit's dequantized values [rows, cols] float32 from its full-precision columns
  // `weight` (the slow path of the tests and the exporter's check).
  at::Tensor DequantizeUnit(size_t unit_index, int action, const at::Tensor& weight) const;
  // One unit's integer codes [rows * cols] int8 (row-major) for action index `action` != 0.
  std::vector<int8_t> UnitCodes(size_t unit_index, int action, const at::Tensor& weight) const;
  // The FP16 scales / offsets of a unit's action as floats ([rows]; empty for 16 / none).
  std::vector<float> Scales(size_t unit_index, int action) const;
  std::vector<float> Offsets(size_t unit_index, int action) const;

  // Saves / loads the parameters as one safetensors file (the table is stored by the
  // caller beside it and handed back to Load). Format "windquant.fits" version 2:
  //   salient_index I32 [sum k], salient_codes I8 [sum k], salient_scale F32 [units],
  //   scales F16 [sum 6 * rows], offsets F16 [sum rows]   (all in unit order)
  // Load: DATA_LOSS naming the file when it is not that format or disagrees with `table`.
  absl::Status Save(const std::string& path) const;
  static absl::StatusOr<StageFits> Load(const std::string& path, plan::UnitTable table);

 private:
  StageFits(plan::UnitTable table, std::vector<UnitParams> params);
  // ApplyToLayer with compensation_ over the layer's units [begin, end).
  void ApplyCompensated(int64_t layer, size_t begin, size_t end, const std::vector<int>& actions,
                        std::array<at::Tensor, model::kNumMatrices>* linears,
                        std::array<at::Tensor, model::kNumMatrices>* quantized_from) const;

  plan::UnitTable table_;
  std::vector<UnitParams> params_;
  std::vector<size_t> layer_begin_;  // [layer - first_layer]: index of its first unit
  std::shared_ptr<const GptqFactors> compensation_;
};

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_STAGE_FITS_H_
