// LlamaModel: the LLaMA forward pass in ATen (FP32 compute), over all layers or
// over a stage [begin, end) of them. Embeddings, RMSNorm, RoPE in the Hugging
// Face rotate_half convention (rope_theta, llama3 frequency scaling),
// grouped-query attention with a causal mask, SwiGLU MLP, final norm, lm_head
// or tied embeddings. Batched over sequences ([B, T]). Differentiable when the
// weights require grad (used by `windquant pretrain`).
// Thread-safety: const methods may be called concurrently.
#ifndef WINDQUANT_COMMON_MODEL_LLAMA_MODEL_H_
#define WINDQUANT_COMMON_MODEL_LLAMA_MODEL_H_

#include <functional>

#include <ATen/ATen.h>

#include "common/model/llama_weights.h"

namespace windquant::model {

// Called with the input of every decoder linear before it is applied
// (`input` is [B, T, in_features]); used by calibration. q/k/v share one
// input, as do gate/up; the hook is called once per matrix.
using LinearInputHook = std::function<void(int64_t layer, Matrix m, const at::Tensor& input)>;

// RoPE inverse frequencies [head_dim / 2] (float64) for `config`: rope_theta
// and, when rope_scaling.rope_type == "llama3", HF's llama3 frequency scaling.
at::Tensor RopeInvFreq(const LlamaConfig& config);

class LlamaModel {
 public:
  // Takes ownership of `weights` and moves them to `device`.
  explicit LlamaModel(LlamaWeights weights, at::Device device = at::kCPU);

  const LlamaConfig& config() const { return weights_.config; }
  const LlamaWeights& weights() const { return weights_; }
  // For applying a quantization plan (replace linear weights in place).
  LlamaWeights& mutable_weights() { return weights_; }
  at::Device device() const { return device_; }

  // ids [B, T] (int64) -> hidden [B, T, H]. Requires embeddings.
  at::Tensor Embed(const at::Tensor& ids) const;
  // Runs hidden [B, T, H] through decoder layers [begin, end) (absolute layer
  // indices, which must lie in this stage). Positions are 0..T-1.
  at::Tensor ForwardLayers(const at::Tensor& hidden, int64_t begin, int64_t end,
                           const LinearInputHook* hook = nullptr) const;
  // Final norm + lm_head: hidden [B, T, H] -> logits [B, T, V]. Requires head.
  at::Tensor Head(const at::Tensor& hidden) const;
  // Embed + all layers of this stage + Head.
  at::Tensor Logits(const at::Tensor& ids) const;

  int64_t first_layer() const { return weights_.first_layer; }
  int64_t end_layer() const {
    return weights_.first_layer + static_cast<int64_t>(weights_.layers.size());
  }

 private:
  LlamaWeights weights_;
  at::Device device_;
  at::Tensor rope_cos_, rope_sin_;  // [max_pos, head_dim]
};

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_LLAMA_MODEL_H_
