// Exporter: writes a plan's model as
//  (a) a quantized checkpoint (docs/quantized-format.md): per unit the packed
//      integer codes (packing.h), FP16 per-row scales/offsets, the INT8 salient
//      values with their positions and per-unit FP16 scale (or FP16 weights for
//      action 16), plus FP16 embeddings/norms/lm_head, config.json, tokenizer.json,
//      plan.json; read back by QuantizedCheckpoint::Read.
//  (b) a fake-quant FP16 checkpoint in Hugging Face layout (config.json with
//      torch_dtype float16, model.safetensors F16, tokenizer files copied) that any
//      LLaMA loader (windquant's Checkpoint, transformers) opens.
// Codes are not cached by the unit table, so each unit is re-fitted with the same
// deterministic FitUnit, and its dequantized values are checked to equal the cached
// fit (INTERNAL otherwise): the export is exactly what was evaluated.
// Thread-compatible.
#ifndef WINDQUANT_COMMON_QUANT_EXPORTER_H_
#define WINDQUANT_COMMON_QUANT_EXPORTER_H_

#include <string>

#include "absl/status/status.h"
#include "common/model/llama_weights.h"
#include "common/quant/calibration.h"
#include "common/quant/plan.h"
#include "common/quant/quantized_weights.h"
#include "common/quant/quantizer.h"
#include "common/quant/unit_table.h"

namespace windquant::quant {

struct ExportInputs {
  const model::LlamaWeights* weights = nullptr;  // full precision, every layer + embeddings
  const ActivationStats* stats = nullptr;        // mean_abs per linear (the fits' s_j)
  const UnitTable* table = nullptr;
  const QuantizedWeights* fits = nullptr;  // cached fits, for the equality check
  const Plan* plan = nullptr;
  QuantizerOptions quantizer;  // as used to build the table
  std::string model_dir;       // tokenizer files are copied from here
};

// (a) into `dir` (created; files written atomically).
absl::Status WriteQuantizedCheckpoint(const ExportInputs& in, const std::string& dir);
// (b) into `dir`: the weights with the plan applied, stored as F16.
absl::Status WriteFakeQuantCheckpoint(const ExportInputs& in, const std::string& dir);

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_EXPORTER_H_
