// Random decoder layers for unit tests of the numerics: hidden 16, intermediate 24, 4 heads
// (2 KV heads), no embeddings or head; seeded, so every test gets the same weights.
#ifndef WINDQUANT_COMMON_TESTING_TINY_WEIGHTS_H_
#define WINDQUANT_COMMON_TESTING_TINY_WEIGHTS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "common/model/llama_weights.h"

namespace windquant::testing {

inline model::LlamaWeights TinyLayerWeights(int64_t layers) {
  model::LlamaConfig c;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 32;
  at::manual_seed(3);
  const std::vector<std::vector<int64_t>> shapes = {{16, 16}, {8, 16},  {8, 16}, {16, 16},
                                                    {24, 16}, {24, 16}, {16, 24}};
  model::LlamaWeights w;
  w.config = c;
  for (int64_t l = 0; l < layers; ++l) {
    model::LayerWeights lw;
    for (int m = 0; m < model::kNumMatrices; ++m) lw.linear[m] = at::randn(shapes[m]) * 0.2;
    lw.input_layernorm = at::ones({16});
    lw.post_attention_layernorm = at::ones({16});
    w.layers.push_back(std::move(lw));
  }
  return w;
}

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_TINY_WEIGHTS_H_
