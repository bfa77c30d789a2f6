// QuantizedCheckpoint: reader of the quantized checkpoint written by exporter.h
// (layout: docs/quantized-format.md). It rebuilds, from packed codes, FP16 scales and
// offsets and INT8 salient values, exactly (bit for bit) the fake-quant float32
// weights the evaluator applies; embeddings, norms and lm_head come back from the
// model's own dtype (F32, BF16 or F16), so exactly as the evaluator has them.
//
// The file is memory-mapped and decoded one decoder layer at a time (DecodeLayer), so
// `eval --quantized` holds the fixed tensors plus one layer's float32 linears inside a
// forward (Model), never the whole model in float32; the pages of a decoded unit are
// released again. ReadAll decodes everything at once (tests, small models).
// Memory: the header and the actions for the object's life; 4 bytes per weight of one
// layer per DecodeLayer call, owned by the caller. Thread-safe (const methods).
#ifndef WINDQUANT_COMMON_EXPORT_QUANTIZED_CHECKPOINT_H_
#define WINDQUANT_COMMON_EXPORT_QUANTIZED_CHECKPOINT_H_

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/llama_model.h"
#include "common/model/llama_weights.h"

namespace windquant::model {
class SafetensorsFile;
}

namespace windquant::exporter {

inline constexpr char kQuantizedFormat[] = "windquant.quantized.v1";
inline constexpr char kQuantizedFileName[] = "quantized.safetensors";
// Version 2: only non-salient entries have codes, salient positions take
// IndexBits(n) bits, ternary codes 27 bits per 17 (docs/quantized-format.md): the
// bytes of a unit's tensors are its counted bits (effective_bits.h) within 0.5 %.
inline constexpr char kQuantizedFormatVersion[] = "2";

// Tensor-name prefix of a unit: "model.layers.3.self_attn.q_proj.chunk.1".
std::string UnitTensorPrefix(int64_t layer, int matrix, int64_t chunk);

class QuantizedCheckpoint {
 public:
  // Opens <dir>/config.json and maps <dir>/quantized.safetensors; checks the metadata
  // and that every tensor of every unit and the fixed tensors are present with the
  // dtype and size their action implies (no code is decoded yet). Errors (one line,
  // naming the file and tensor): missing/short tensors, unknown format version or
  // action, more or fewer actions than units.
  static absl::StatusOr<std::unique_ptr<QuantizedCheckpoint>> Open(const std::string& dir);
  ~QuantizedCheckpoint();

  const model::LlamaConfig& config() const { return config_; }
  const std::vector<int>& actions() const { return actions_; }  // per unit, global order
  int64_t chunk_size() const { return chunk_size_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::string plan_id() const;

  // The seven float32 linears of decoder `layer`, decoded. DATA_LOSS naming the tensor
  // for codes out of range or salient positions out of order.
  absl::StatusOr<std::array<at::Tensor, model::kNumMatrices>> DecodeLayer(int64_t layer) const;
  // Embeddings, final norm, lm_head and every layer's norms as float32; the layers'
  // linears are left undefined.
  absl::StatusOr<model::LlamaWeights> FixedWeights() const;
  // Everything as float32 (4 bytes per weight of the whole model).
  absl::StatusOr<model::LlamaWeights> ReadAll() const;

  // The model on `compute`'s device whose forward decodes each layer from `checkpoint` when it
  // reaches it: the fixed tensors resident, one layer's linears at a time. A decoding
  // failure inside a forward is thrown as std::runtime_error with the message above
  // (ComputePerplexity returns it as a status).
  static absl::StatusOr<std::shared_ptr<const model::LlamaModel>> Model(
      std::shared_ptr<const QuantizedCheckpoint> checkpoint,
      const model::ComputeOptions& compute = {});

 private:
  QuantizedCheckpoint() = default;
  absl::Status CheckTensors() const;

  std::string path_;
  model::LlamaConfig config_;
  std::unique_ptr<model::SafetensorsFile> file_;
  std::vector<int> actions_;
  std::vector<int64_t> layer_first_unit_;  // index of each layer's first unit
  int64_t chunk_size_ = 0;
  std::map<std::string, std::string> metadata_;
};

}  // namespace windquant::exporter

#endif  // WINDQUANT_COMMON_EXPORT_QUANTIZED_CHECKPOINT_H_
