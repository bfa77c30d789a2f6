// Exporter: writes a plan's model as
//  (a) a quantized checkpoint (docs/quantized-format.md): per unit the packed
//      integer codes (packing.h), FP16 per-row scales/offsets, the INT8 salient
//      values with their positions and per-unit FP16 scale (or FP16 weights for
//      action 16), plus FP16 embeddings/norms/lm_head, config.json, tokenizer.json,
//      plan.json; read back by QuantizedCheckpoint::Read.
//  (b) a fake-quant FP16 checkpoint in Hugging Face layout (config.json with
//      torch_dtype float16, model.safetensors F16, tokenizer files copied) that any
//      LLaMA loader (windquant's Checkpoint, transformers) opens.
// The codes are computed from the weights and the fits' FP16 parameters by the same
// kernel that produces the evaluated weights (fit_kernels.h), so the export is exactly
// what was evaluated (`windquant export` reads it back and compares).
// Memory: (a) holds the packed file in memory (~0.3 bytes per weight at 2 bits);
// (b) streams one layer at a time (4 bytes per weight of one layer as float32 plus its
// FP16 copy). Thread-compatible.
#ifndef WINDQUANT_COMMON_QUANT_EXPORTER_H_
#define WINDQUANT_COMMON_QUANT_EXPORTER_H_

#include <string>

#include "absl/status/status.h"
#include "common/model/llama_weights.h"
#include "common/quant/plan.h"
#include "common/quant/stage_fits.h"
#include "common/quant/unit_table.h"

namespace windquant::quant {

struct ExportInputs {
  const model::LlamaWeights* weights = nullptr;  // full precision, every layer + embeddings
  const UnitTable* table = nullptr;              // the global table (== fits->table())
  const StageFits* fits = nullptr;               // the fits of every layer
  const Plan* plan = nullptr;
  std::string model_dir;  // tokenizer files are copied from here
};

// (a) into `dir` (created; files written atomically).
absl::Status WriteQuantizedCheckpoint(const ExportInputs& in, const std::string& dir);
// (b) into `dir`: the weights with the plan applied, stored as F16.
absl::Status WriteFakeQuantCheckpoint(const ExportInputs& in, const std::string& dir);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_EXPORTER_H_
