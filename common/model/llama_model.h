// LlamaModel: the LLaMA forward pass in ATen, in the compute dtype of its
// ComputeOptions (float32 or bfloat16; logits are float32 either way), over all layers or
// over a stage [begin, end) of them. Embeddings, RMSNorm, RoPE in the Hugging
// Face rotate_half convention (rope_theta, llama3 frequency scaling),
// grouped-query attention with a causal mask, SwiGLU MLP, final norm, lm_head
// or tied embeddings. Batched over sequences ([B, T]). Differentiable when the
// weights require grad (used by `windquant pretrain`).
//
// Memory: the weights stay in their stored dtype (2 bytes per weight for a BF16
// checkpoint, 4 for F32) for the model's life, and are shared (not copied) by the
// models WithLinears makes. A forward casts one decoder layer's linears at a time to the
// compute dtype (4 bytes per weight of that layer for float32, 2 for bfloat16, freed when
// the layer is done; nothing when they are stored in it), or takes them from a
// LinearSource (a quantization plan), the embeddings per looked-up row and lm_head in
// blocks of rows.
// Thread-safety: const methods may be called concurrently.
#ifndef WINDQUANT_COMMON_MODEL_LLAMA_MODEL_H_
#define WINDQUANT_COMMON_MODEL_LLAMA_MODEL_H_

#include <array>
#include <functional>
#include <memory>
#include <string>

#include <ATen/ATen.h>

#include "common/model/compute_options.h"
#include "common/model/llama_weights.h"

namespace windquant::model {

// Called with the input of every decoder linear before it is applied
// (`input` is [B, T, in_features]); used by calibration. q/k/v share one
// input, as do gate/up; the hook is called once per matrix.
using LinearInputHook = std::function<void(int64_t layer, Matrix m, const at::Tensor& input)>;

// RoPE inverse frequencies [head_dim / 2] (float64) for `config`: rope_theta
// and, when rope_scaling.rope_type == "llama3", HF's llama3 frequency scaling.
at::Tensor RopeInvFreq(const LlamaConfig& config);

// The torch device of `compute` (at::Device parses "cpu", "cuda", "cuda:N").
at::Device TorchDevice(const ComputeOptions& compute);
// The torch dtype of `compute` (at::kFloat or at::kBFloat16).
at::ScalarType TorchDtype(const ComputeOptions& compute);
// A dtype in the config's words ("float32", "bfloat16"; torch's name for any other).
std::string DtypeName(at::ScalarType dtype);

// Supplies the weights of a decoder layer's seven linears for one forward pass, in the
// model's compute dtype and on its device (LlamaModel casts another dtype, at a copy's cost)
// (e.g. a quantization plan's dequantized weights). Called once per layer per forward,
// possibly from several threads at once; the tensors it returns are dropped when the
// layer is done. Implementations must be thread-safe and must not fail on a layer of the
// model they were made for (validate at creation); torch errors propagate as c10::Error.
class LinearSource {
 public:
  virtual ~LinearSource() = default;
  // `stored` is the model's own layer (weights in their stored dtype).
  virtual std::array<at::Tensor, kNumMatrices> Linears(int64_t layer,
                                                       const LayerWeights& stored) const = 0;
};

class LlamaModel {
 public:
  // Takes ownership of `weights` (kept in their dtype) and moves them to `compute`'s device
  // (TorchDevice); torch errors (a device this build or machine lacks) are thrown as
  // c10::Error: config::CheckThisMachine refuses those at start.
  // `linears`, when given, replaces the decoder linears in every forward.
  explicit LlamaModel(LlamaWeights weights, const ComputeOptions& compute = {},
                      std::shared_ptr<const LinearSource> linears = nullptr);

  // A model sharing this one's weights (no copy) whose decoder linears come from
  // `linears` (nullptr: the stored weights).
  std::shared_ptr<const LlamaModel> WithLinears(std::shared_ptr<const LinearSource> linears) const;

  // The linears of decoder `layer` exactly as a forward uses them (from the
  // LinearSource or cast from the stored weights), in the compute dtype.
  std::array<at::Tensor, kNumMatrices> LayerLinears(int64_t layer) const;

  const LlamaConfig& config() const { return weights_.config; }
  const LlamaWeights& weights() const { return weights_; }
  // For training (pretrain updates the weights in place).
  LlamaWeights& mutable_weights() { return weights_; }
  const ComputeOptions& compute() const { return compute_; }
  at::Device device() const { return device_; }
  // The compute dtype (TorchDtype(compute())): of hidden states in and out of
  // ForwardLayers and of Embed's output; Head returns float32.
  at::ScalarType dtype() const { return dtype_; }

  // ids [B, T] (int64) -> hidden [B, T, H]. Requires embeddings.
  at::Tensor Embed(const at::Tensor& ids) const;
  // Runs hidden [B, T, H] through decoder layers [begin, end) (absolute layer
  // indices, which must lie in this stage). Positions are 0..T-1.
  at::Tensor ForwardLayers(const at::Tensor& hidden, int64_t begin, int64_t end,
                           const LinearInputHook* hook = nullptr) const;
  // Final norm + lm_head: hidden [B, T, H] -> float32 logits [B, T, V]. Requires head.
  at::Tensor Head(const at::Tensor& hidden) const;
  // Embed + all layers of this stage + Head.
  at::Tensor Logits(const at::Tensor& ids) const;

  int64_t first_layer() const { return weights_.first_layer; }
  int64_t end_layer() const {
    return weights_.first_layer + static_cast<int64_t>(weights_.layers.size());
  }

 private:
  LlamaWeights weights_;
  ComputeOptions compute_;
  at::Device device_;
  at::ScalarType dtype_;
  std::shared_ptr<const LinearSource> linears_;
  at::Tensor rope_cos_, rope_sin_;  // [max_pos, head_dim]
};

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_LLAMA_MODEL_H_
