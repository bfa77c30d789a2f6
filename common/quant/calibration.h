// Calibration (DESIGN.md section 3): a pass over calibration text that
// collects, for the input of every decoder linear, per-input-channel
// statistics: mean |x_j| (the activation scale s_j of the error proxy and of
// salient selection) and mean x_j^2. It works stage by stage: a Calibrator
// owns layers [first_layer, end_layer), takes hidden states in, accumulates,
// and hands hidden states out to the next stage, as each actor process does.
//
// Reduction order: every statistic is a sum over tokens taken one token at a time
// in the order the tokens arrive (window by window, position by position), in
// double. So the one-process calibration (8 windows per forward) and the
// distributed pipeline (micro-batches of a few windows through each stage) add the
// same numbers in the same order: equal inputs give bit-identical statistics
// whatever the batching. (Different batching can still change the activations
// themselves in the last bit through the BLAS; the fits are made robust to that.)
// On a GPU the sums are float64 torch reductions over each batch's tokens on the device
// (no host copy of the activations; the statistics come to the host once, in Finish):
// another summation order, so the float32 means can differ from the CPU's in the last
// bit at a rounding midpoint, no more (float64 sums of float32 values).
// Memory: 16 bytes per input channel per linear of the stage (not per weight).
// Thread-compatible (one pass at a time).
#ifndef WINDQUANT_COMMON_QUANT_CALIBRATION_H_
#define WINDQUANT_COMMON_QUANT_CALIBRATION_H_

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/model/llama_model.h"

namespace windquant::quant {

// Statistics of the input of one linear (layer, matrix).
struct LinearInputStats {
  at::Tensor mean_abs;  // [in] float32: s_j = mean |x_j|
  at::Tensor mean_sq;   // [in] float32: mean x_j^2
  int64_t tokens = 0;
};

// Per layer of a stage, indexed by model::Matrix.
struct ActivationStats {
  int64_t first_layer = 0;
  std::vector<std::array<LinearInputStats, model::kNumMatrices>> layers;
  const LinearInputStats& at(int64_t layer, model::Matrix m) const {
    return layers[layer - first_layer][static_cast<int>(m)];
  }
};

// `samples` windows of `seq_len` tokens: BOS followed by seq_len-1 consecutive
// ids starting at seeded random offsets of `ids` (a text encoded without BOS).
// Returns int64 [samples, seq_len]. INVALID_ARGUMENT if the text is shorter
// than one window.
absl::StatusOr<at::Tensor> SampleCalibrationWindows(const std::vector<int32_t>& ids, int samples,
                                                    int seq_len, uint64_t seed, int64_t bos_id);

class Calibrator {
 public:
  // Accumulates statistics for layers [first_layer, end_layer) of `model`.
  Calibrator(const model::LlamaModel& model, int64_t first_layer, int64_t end_layer);

  // Runs hidden [B, T, H] through this stage, accumulating statistics of
  // every linear input; returns the stage's output hidden states.
  absl::StatusOr<at::Tensor> RunStage(const at::Tensor& hidden);

  // The statistics so far (means over every token seen), on the host.
  ActivationStats Finish() const;

  // Sums with torch reductions where the activations are (what a model off the CPU
  // does), here for a model on the CPU (the tests). Before the first RunStage.
  void UseTorchReductions() { torch_reductions_ = true; }

 private:
  const model::LlamaModel& model_;
  int64_t first_layer_, end_layer_;
  // [layer - first][matrix]: double accumulators of sum |x| and sum x^2.
  std::vector<std::array<at::Tensor, model::kNumMatrices>> sum_abs_, sum_sq_;
  std::vector<std::array<int64_t, model::kNumMatrices>> tokens_;
  bool torch_reductions_;
};

// The pass of a collector over a whole single-process model: embeds `windows`
// ([samples, seq_len] ids) in batches of `batch` windows, in order, and hands each
// batch's hidden states to `run_stage` (a Calibrator's or a HessianCollector's RunStage
// over all the model's layers), without gradients. The first error stops the pass; a
// torch error while embedding is INTERNAL "<what>: ...".
absl::Status RunCalibrationWindows(
    const model::LlamaModel& model, const at::Tensor& windows, int64_t batch,
    absl::string_view what, const std::function<absl::Status(const at::Tensor& hidden)>& run_stage);

// Calibrates a whole single-process model (embed, every stage, no head),
// running `windows` through it in batches of `batch`.
absl::StatusOr<ActivationStats> CalibrateModel(const model::LlamaModel& model,
                                               const at::Tensor& windows, int64_t batch);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_CALIBRATION_H_
