// QuantizedCheckpoint: reader of the quantized checkpoint written by exporter.h
// (layout: docs/quantized-format.md). It rebuilds, from packed codes, FP16 scales and
// offsets and INT8 salient values, exactly (bit for bit) the fake-quant float32
// weights the evaluator applies; embeddings, norms and lm_head come back from the
// model's own dtype (F32, BF16 or F16), so exactly as the evaluator has them.
// Thread-compatible.
#ifndef WINDQUANT_COMMON_QUANT_QUANTIZED_CHECKPOINT_H_
#define WINDQUANT_COMMON_QUANT_QUANTIZED_CHECKPOINT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/llama_weights.h"

namespace windquant::quant {

inline constexpr char kQuantizedFormat[] = "windquant.quantized.v1";
inline constexpr char kQuantizedFileName[] = "quantized.safetensors";
// Version 2: only non-salient entries have codes, salient positions take
// IndexBits(n) bits, ternary codes 27 bits per 17 (docs/quantized-format.md): the
// bytes of a unit's tensors are its counted bits (effective_bits.h) within 0.5 %.
inline constexpr char kQuantizedFormatVersion[] = "2";

// Tensor-name prefix of a unit: "model.layers.3.self_attn.q_proj.chunk.1".
std::string UnitTensorPrefix(int64_t layer, int matrix, int64_t chunk);

struct QuantizedCheckpoint {
  model::LlamaWeights weights;  // float32, every layer + embeddings + head
  std::vector<int> actions;     // action index per unit (global order)
  int64_t chunk_size = 0;
  std::map<std::string, std::string> metadata;

  // Reads <dir>/config.json and <dir>/quantized.safetensors. Errors (one line,
  // naming the file and tensor): missing/short tensors, unknown format version or
  // action, codes out of range, shapes disagreeing with config.json.
  static absl::StatusOr<QuantizedCheckpoint> Read(const std::string& dir);
};

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_QUANTIZED_CHECKPOINT_H_
