#include "common/export/llama_quantize_types.h"

#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"
#include "common/export/gguf_llama.h"

namespace windquant::exporter {

std::string LlamaCppTypeName(gguf::TensorType t) {
  // windquant's names are ggml's in upper case (gguf_format.cc); ggml's own are lower case.
  return absl::AsciiStrToLower(gguf::TensorTypeName(t));
}

std::string TensorNamePattern(const std::string& name) {
  std::string out = "^";
  for (const char c : name) {
    if (std::strchr(".^$|()[]{}*+?\\", c) != nullptr) out += '\\';
    out += c;
  }
  return out + "$";
}

std::string LlamaQuantizeTensorTypes(const GgufExportReport& report, const plan::Plan& plan) {
  std::string out = absl::StrFormat(
      "# windquant plan %s (%s, target %.4g bits, %.4f effective bits): each decoder linear's "
      "GGUF type in windquant's exact export (gguf_export.json), as llama-quantize overrides\n",
      plan.plan_id.empty() ? "(unnamed)" : plan.plan_id, plan.source.empty() ? "?" : plan.source,
      plan.target_bits, report.PlanBits());
  absl::StrAppend(
      &out, "# use: llama-quantize $(grep -v '^#' ", kLlamaQuantizeTypesFileName,
      ") MODEL-F16.gguf OUT.gguf Q8_0\n",
      "# (a quantized TYPE such as Q8_0 is needed for the overrides to apply; norms stay F32; "
      "llama.cpp fits its own blocks to the FP16 weights, so the types and bytes are the "
      "export's, the values are not the plan's; not for --tensor-type-file, which takes no "
      "comments or flags)\n");
  for (const GgufTensorReport& t : report.tensors) {
    if (t.name == gguf::kEmbeddingName) {
      absl::StrAppend(&out, "--token-embedding-type ", LlamaCppTypeName(t.type), "\n");
    } else if (t.name == gguf::kHeadName) {  // absent with tied embeddings
      absl::StrAppend(&out, "--output-tensor-type ", LlamaCppTypeName(t.type), "\n");
    }
  }
  for (const GgufTensorReport& t : report.tensors) {
    if (!t.linear) continue;
    absl::StrAppend(&out, "--tensor-type ", TensorNamePattern(t.name), "=",
                    LlamaCppTypeName(t.type), "\n");
  }
  return out;
}

absl::Status WriteLlamaQuantizeTensorTypes(const GgufExportReport& report, const plan::Plan& plan,
                                           const std::string& dir) {
  return base::WriteFileAtomic(dir + "/" + kLlamaQuantizeTypesFileName,
                               LlamaQuantizeTensorTypes(report, plan));
}

}  // namespace windquant::exporter
