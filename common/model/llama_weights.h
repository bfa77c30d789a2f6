// LlamaWeights: the tensors of a LLaMA model, or of a stage of it (layers
// [first_layer, first_layer + layers.size())), in the checkpoint's stored dtype
// (F32, F16 or BF16) unless the loader was asked to widen them to float32.
// Produced by Checkpoint::LoadWeights, consumed by LlamaModel (which widens a layer
// at a time when it computes). Tensors follow the Hugging Face layout: Linear
// weights are [out_features, in_features].
#ifndef WINDQUANT_COMMON_MODEL_LLAMA_WEIGHTS_H_
#define WINDQUANT_COMMON_MODEL_LLAMA_WEIGHTS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "common/model/llama_config.h"

namespace windquant::model {

// The seven decoder linear matrices, in the global unit order.
enum class Matrix : int { kQ = 0, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kNumMatrices = 7;
inline constexpr std::array<const char*, kNumMatrices> kMatrixNames = {
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

struct LayerWeights {
  // Indexed by Matrix: q,k,v,o [out,in]; gate,up [I,H]; down [H,I].
  std::array<at::Tensor, kNumMatrices> linear;
  at::Tensor input_layernorm;           // [H]
  at::Tensor post_attention_layernorm;  // [H]
  at::Tensor& at(Matrix m) { return linear[static_cast<int>(m)]; }
  const at::Tensor& at(Matrix m) const { return linear[static_cast<int>(m)]; }
};

struct LlamaWeights {
  LlamaConfig config;
  int64_t first_layer = 0;
  std::vector<LayerWeights> layers;  // layers[i] is decoder layer first_layer + i
  // Present only when requested (the evaluator / single process owns them).
  at::Tensor embed_tokens;  // [V, H] or undefined
  at::Tensor final_norm;    // [H] or undefined
  at::Tensor lm_head;       // [V, H]; aliases embed_tokens when tied; or undefined
};

// Hugging Face tensor name of a decoder linear, e.g.
// "model.layers.3.self_attn.q_proj.weight".
std::string LinearTensorName(int64_t layer, Matrix m);

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_LLAMA_WEIGHTS_H_
