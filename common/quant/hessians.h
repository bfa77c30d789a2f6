// HessianCollector: the calibration Hessians of error compensation (gptq.h). For the
// input x of every decoder linear of a stage it accumulates sum_t x_t x_t^T over the
// calibration tokens, once per input kind (q/k/v read one input, gate/up another, o and
// down their own), and returns H = 2/N sum_t x_t x_t^T in float32.
//
// Accumulated in float64 through ATen's matrix product: the products of two floats are
// exact in float64 and the sums over a few thousand tokens lose ~1e-16 relative, so the
// float32 result does not depend on the BLAS's summation order except at a rounding
// midpoint (the same standing as the activations themselves, calibration.h).
// The sums live where the model's activations are (on a GPU: its float64 GEMM, no host
// copy per batch) and come to the host once, in Finish / TakeWidened, or stay there to be
// factored there (TakeWidened(on_device), gptq_torch.h).
// Memory while collecting: 8 bytes * in^2 per input kind per layer, on the model's device
// (at LLaMA-3.2-1B, 0.64 GB per layer: hold a stage's layers, not a whole large model, at
// once); the result, on the host, is half of that. Thread-compatible (one pass at a time).
#ifndef WINDQUANT_COMMON_QUANT_HESSIANS_H_
#define WINDQUANT_COMMON_QUANT_HESSIANS_H_

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/llama_model.h"
#include "common/quant/gptq.h"

namespace windquant::quant {

class HessianCollector {
 public:
  // Accumulates for layers [first_layer, end_layer) of `model` (which must hold them).
  HessianCollector(const model::LlamaModel& model, int64_t first_layer, int64_t end_layer);

  // Runs hidden [B, T, H] through the stage, accumulating; returns the stage's output.
  // INVALID_ARGUMENT when the layers are not the model's; INTERNAL for a torch error.
  absl::StatusOr<at::Tensor> RunStage(const at::Tensor& hidden);

  // H = 2/N X^T X of every (layer, kind) so far. FAILED_PRECONDITION before any token.
  absl::StatusOr<StageHessians> Finish() const;
  // Finish's Hessians as float64 tensors holding exactly its float32 values, made in
  // place in the sums' own memory, which they take (the collector is empty after): no
  // float32 copy, so the peak is the sums' 8 bytes * in^2 per kind, and
  // GptqFactors::Create factors each of them in that same memory. With `on_device` sums
  // off the CPU stay where they are (Create then factors them there: gptq_torch.h), made
  // in place as well (+ a float32 copy of one Hessian while it is rounded); else they
  // come to the host, the device's memory freed as they go. Errors as Finish.
  absl::StatusOr<StageHessians> TakeWidened(bool on_device = false);

 private:
  const model::LlamaModel& model_;
  int64_t first_layer_, end_layer_;
  std::vector<std::array<at::Tensor, kNumInputKinds>> sums_;  // float64
  int64_t tokens_ = 0;
};

// The Hessians of every layer of a single-process model over calibration `windows`
// ([samples, seq_len] ids), in batches of `batch` windows.
absl::StatusOr<StageHessians> CollectModelHessians(const model::LlamaModel& model,
                                                   const at::Tensor& windows, int64_t batch);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_HESSIANS_H_
