// Exporter: writes a plan's model as
//  (a) a quantized checkpoint (docs/quantized-format.md): per unit the packed
//      integer codes (packing.h), FP16 per-row scales/offsets, the INT8 salient
//      values with their positions and per-unit FP16 scale (or FP16 weights for
//      action 16), plus the embeddings/norms/lm_head in the model's own dtype,
//      config.json, tokenizer.json, plan.json; read back by QuantizedCheckpoint.
//  (b) a fake-quant FP16 checkpoint in Hugging Face layout (config.json with
//      torch_dtype float16, model.safetensors F16, tokenizer files copied) that any
//      LLaMA loader (windquant's Checkpoint, transformers) opens.
// The codes are computed from the weights and the fits' FP16 parameters by the same
// kernel that produces the evaluated weights (fit_kernels.h), so the export is exactly
// what was evaluated (VerifyQuantizedCheckpoint compares, layer by layer).
// Bits = bytes: the tensor bytes of (a) are the plan's whole-model bits / 8
// (UnitTable::WholeModelBits: units within 0.5 %, fixed tensors at the bits of the dtype
// they are stored in).
// Memory: both files are streamed (model::SafetensorsStreamWriter, sizes computed up
// front from the fits): one decoder layer at a time, in its stored dtype when it comes
// from a checkpoint (ExportInputs::checkpoint), plus the float32 copy of one unit for (a)
// or of one layer for (b) and Verify (two layers there); never the whole file.
// Thread-compatible.
#ifndef WINDQUANT_COMMON_EXPORT_EXPORTER_H_
#define WINDQUANT_COMMON_EXPORT_EXPORTER_H_

#include <string>

#include "absl/status/status.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_weights.h"
#include "common/plan/plan.h"
#include "common/plan/unit_table.h"
#include "common/quant/stage_fits.h"

namespace windquant::quant {
class QuantizationSession;
}  // namespace windquant::quant

namespace windquant::exporter {

struct ExportInputs {
  // The full-precision model: either held in memory (every layer + embeddings) ...
  const model::LlamaWeights* weights = nullptr;
  // ... or read from a checkpoint one decoder layer at a time (when `weights` is null).
  const model::Checkpoint* checkpoint = nullptr;
  const plan::UnitTable* table = nullptr;  // the global table (== fits->table())
  const quant::StageFits* fits = nullptr;  // the fits of every layer
  const plan::Plan* plan = nullptr;
  std::string model_dir;  // tokenizer files are copied from here
};

// What the exporter needs to write `plan` of `session` (both must outlive the result).
ExportInputs SessionExportInputs(const quant::QuantizationSession& session, const plan::Plan& plan);

// The model's config (from the weights or the checkpoint).
const model::LlamaConfig& ExportConfig(const ExportInputs& in);
// INVALID_ARGUMENT / FAILED_PRECONDITION unless `in` holds the whole model, the global
// table, its fits and a valid plan for it, with the fixed tensors counted as stored.
absl::Status CheckExportInputs(const ExportInputs& in);
// Decoder layer `l` from memory (shared storage) or the checkpoint (stored dtype).
absl::StatusOr<model::LayerWeights> ExportLayer(const ExportInputs& in, int64_t l);

// (a) into `dir` (created; files written atomically).
absl::Status WriteQuantizedCheckpoint(const ExportInputs& in, const std::string& dir);
// (b) into `dir`: the weights with the plan applied, stored as F16.
absl::Status WriteFakeQuantCheckpoint(const ExportInputs& in, const std::string& dir);
// The quantized checkpoint in `dir` decodes, layer by layer, to exactly the weights the
// plan applies (StageFits::ApplyToLayer) and carries the plan's actions; INTERNAL naming
// `shown` (where the folder will be) and the first differing tensor otherwise.
absl::Status VerifyQuantizedCheckpoint(const ExportInputs& in, const std::string& dir,
                                       const std::string& shown);

}  // namespace windquant::exporter

#endif  // WINDQUANT_COMMON_EXPORT_EXPORTER_H_
