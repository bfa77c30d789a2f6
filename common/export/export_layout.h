// ExportLayout: the exported files (exporter.h, docs/quantized-format.md) cut into
// parts that the process owning the weights produces, so that one file can be written
// by one process (`windquant export`) or assembled from the stages of a distributed job
// (learner/export_assembler.h pulls each part from the actor of its stage,
// actor/stage_exporter.h produces it) with the same bytes either way.
//
// A share is what one producer owns: decoder layers [first_layer, end_layer), plus the
// embeddings (the first stage) and the final norm / lm_head (the last stage). Each
// share has two parts:
//   kLayers  quantized file: the units of its layers; fake-quant: its layers' linears
//   kFixed   its embeddings (first), its layers' two norms, final norm + lm_head (last)
// and a file is the parts in this order (so that one share covering the whole model
// gives exactly the single-process order, and n shares concatenate to it):
//   quantized   kLayers of share 0..n-1, then kFixed of share 0..n-1
//   fake-quant  kFixed of share 0..n-1, then kLayers of share 0..n-1
// Every tensor's name, dtype and shape follow from the model config, the unit table
// (salient counts) and the plan alone, so whoever writes the header (the learner) needs
// neither weights nor fits.
//
// Memory: StreamPart holds one decoder layer of the source in its stored dtype plus its
// float32 copy (fake-quant) or one unit's float32 columns (quantized), and one embedding
// tensor in its stored dtype for kFixed of the first/last share. Thread-compatible.
#ifndef WINDQUANT_COMMON_EXPORT_EXPORT_LAYOUT_H_
#define WINDQUANT_COMMON_EXPORT_EXPORT_LAYOUT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_weights.h"
#include "common/model/safetensors_stream_writer.h"
#include "common/plan/plan.h"
#include "common/plan/unit_table.h"
#include "common/quant/stage_fits.h"

namespace windquant::exporter {

enum class ExportFile { kQuantized, kFakeQuant };
enum class ExportPart { kLayers, kFixed };
const char* ExportFileName(ExportFile file);  // "quantized", "fake_quant"
const char* ExportPartName(ExportPart part);  // "layers", "fixed"

struct ExportShare {
  int64_t first_layer = 0, end_layer = 0;  // decoder layers [first, end)
  bool embeddings = false;                 // model.embed_tokens (first share)
  bool head = false;                       // model.norm and lm_head when untied (last share)
};

// The whole model as one share.
ExportShare WholeModelShare(const model::LlamaConfig& config);
// (share index, part) in file order for `num_shares` shares (above).
std::vector<std::pair<size_t, ExportPart>> PartOrder(ExportFile file, size_t num_shares);

// The dtype of the fixed tensors in the quantized file: the model's own (float32,
// bfloat16; F16 for float16 or nothing), counted by the table at FixedParamBits.
model::Dtype FixedDtype(const model::LlamaConfig& config);

// The tensors of one part in file order. `table` holds at least the share's units (the
// global table or a stage's), `actions` one action index per global unit.
// INVALID_ARGUMENT for a share outside the model or an action out of range.
absl::StatusOr<std::vector<model::StreamTensor>> DeclarePart(ExportFile file, ExportPart part,
                                                             const ExportShare& share,
                                                             const model::LlamaConfig& config,
                                                             const plan::UnitTable& table,
                                                             const std::vector<int>& actions);
// Every tensor of the file for `shares` (which must tile the layers, in order).
absl::StatusOr<std::vector<model::StreamTensor>> DeclareFile(ExportFile file,
                                                             const std::vector<ExportShare>& shares,
                                                             const model::LlamaConfig& config,
                                                             const plan::UnitTable& table,
                                                             const std::vector<int>& actions);
// The __metadata__ of the file (`table` global).
std::map<std::string, std::string> FileMetadata(ExportFile file, const plan::UnitTable& table,
                                                const plan::Plan& plan);
// The config.json written beside the file.
std::string ExportConfigJson(ExportFile file, const model::LlamaConfig& config);
// The path of the safetensors file inside the file's folder.
std::string ExportTensorFile(ExportFile file);  // "quantized.safetensors", "model.safetensors"
// Copies tokenizer.json (required; NOT_FOUND naming model_dir) and the other tokenizer
// files present from `model_dir` into `dir`.
absl::Status CopyTokenizerFiles(const std::string& model_dir, const std::string& dir);

// PartSink: takes the bytes of one part, checks each tensor against the declaration
// (name, size: INTERNAL naming both) and hands them to `out` in pieces of at most
// `piece_bytes` (0 = as they come).
class PartSink {
 public:
  using Out = std::function<absl::Status(std::string_view)>;
  PartSink(std::vector<model::StreamTensor> declared, Out out, size_t piece_bytes = 0);

  // The next declared tensor must be `name` with `bytes` bytes (no-op for 0 bytes).
  absl::Status Expect(const std::string& name, uint64_t bytes) const;
  absl::Status Append(std::string_view bytes);
  // Flushes the buffer; FAILED_PRECONDITION when declared bytes are missing.
  absl::Status Finish();
  uint64_t bytes_declared() const { return ends_.empty() ? 0 : ends_.back(); }

 private:
  std::vector<model::StreamTensor> declared_;
  std::vector<uint64_t> ends_;
  Out out_;
  size_t piece_bytes_;
  std::string buffer_;
  uint64_t written_ = 0;
  size_t cursor_ = 0;
};

// Where a part's weights come from: `weights` (any decoder layers from
// weights->first_layer, embeddings / head when defined) and, for anything `weights`
// lacks, `checkpoint` (read one tensor or layer at a time, in its stored dtype).
struct PartSource {
  const model::LlamaConfig* config = nullptr;
  const model::LlamaWeights* weights = nullptr;
  const model::Checkpoint* checkpoint = nullptr;
  const quant::StageFits* fits = nullptr;     // covers the share's layers (kLayers)
  const std::vector<int>* actions = nullptr;  // one per global unit
};

// Streams the bytes of (file, part, share) into `sink` (declared by DeclarePart):
// codes by the kernel that produced the evaluated weights (StageFits::UnitCodes), the
// fake-quant linears as StageFits::ApplyToLayer gives them. Errors of the source and
// the sink; INTERNAL for torch.
absl::Status StreamPart(ExportFile file, ExportPart part, const ExportShare& share,
                        const PartSource& source, PartSink* sink);

}  // namespace windquant::exporter

#endif  // WINDQUANT_COMMON_EXPORT_EXPORT_LAYOUT_H_
