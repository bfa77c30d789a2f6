// The plan's GGUF types as llama-quantize arguments (issue 37): for users who quantize the
// FP16 GGUF with llama.cpp's own fitting, one `--tensor-type PATTERN=TYPE` per decoder
// linear with the type GgufExporter chose for it (gguf_export.json), plus the embeddings'
// and lm_head's types. llama-quantize fits its own blocks to the FP16 weights: the
// result has the exact export's types and bytes, not the plan's values (docs/gguf.md).
//
// llama-quantize (tools/quantize/quantize.cpp) lowercases PATTERN, matches it with
// std::regex_search against each tensor name, and takes TYPE case-insensitively among
// ggml's type names; its overrides apply only when its positional TYPE is a quantized one.
// Its --tensor-type-file reads bare PATTERN=TYPE words (no comments, no flags), so this
// file is meant for `llama-quantize $(grep -v '^#' FILE) IN.gguf OUT.gguf Q8_0`.
#ifndef WINDQUANT_COMMON_EXPORT_LLAMA_QUANTIZE_TYPES_H_
#define WINDQUANT_COMMON_EXPORT_LLAMA_QUANTIZE_TYPES_H_

#include <string>

#include "absl/status/status.h"
#include "common/export/gguf_exporter.h"
#include "common/export/gguf_format.h"
#include "common/plan/plan.h"

namespace windquant::exporter {

inline constexpr char kLlamaQuantizeTypesFileName[] = "llama-quantize-tensor-types.txt";

// ggml's name of `t` as llama-quantize takes it: "q4_0", "f16", "bf16", ...
std::string LlamaCppTypeName(gguf::TensorType t);
// The regex that matches the tensor name `name` alone: "^blk\.0\.attn_q\.weight$".
std::string TensorNamePattern(const std::string& name);

// The file's text: comment lines ('#': the plan, the command), then
// `--token-embedding-type T`, `--output-tensor-type T` (when the file has output.weight)
// and one `--tensor-type PATTERN=TYPE` line per decoder linear of `report`, in its order.
std::string LlamaQuantizeTensorTypes(const GgufExportReport& report, const plan::Plan& plan);
// Writes it to `dir`/kLlamaQuantizeTypesFileName (atomically); I/O errors.
absl::Status WriteLlamaQuantizeTensorTypes(const GgufExportReport& report, const plan::Plan& plan,
                                           const std::string& dir);

}  // namespace windquant::exporter

#endif  // WINDQUANT_COMMON_EXPORT_LLAMA_QUANTIZE_TYPES_H_
