// The perplexity of a checkpoint on a text (`windquant eval`), with the
// protocol of common/model/perplexity.h (BOS + chunks of context-1 tokens,
// non-overlapping, last partial chunk dropped), optionally with a plan
// applied: the plan file is checked against the run config's unit table
// (cached or fitted: quant::QuantizationSession) and its weights applied.
// With quantized_dir: the packed checkpoint of `windquant export`, decoded; with
// gguf_path: a GGUF file, decoded by windquant's own decoder.
// Memory: the checkpoint's weights in their stored dtype, plus the session's fits when a
// plan is given, plus one layer's float32 linears inside a forward; a quantized checkpoint
// keeps its fixed tensors as float32 and decodes one layer at a time; a GGUF file is
// decoded whole (4 bytes per weight). Until the call returns. Thread-compatible (reports progress
// on stderr).
#ifndef WINDQUANT_JOB_TEXT_PERPLEXITY_H_
#define WINDQUANT_JOB_TEXT_PERPLEXITY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/log.h"
#include "common/config/run_config.h"
#include "common/model/perplexity.h"

namespace windquant::job {

struct TextPerplexityRequest {
  std::string model_dir;   // Hugging Face checkpoint (with tokenizer.json)
  std::string text_path;   // UTF-8 text, encoded without BOS
  int64_t context = 2048;  // window length incl. BOS (clamped to max_position_embeddings)
  int64_t batch = 8;       // windows per forward
  int64_t max_tokens = 0;  // first N ids of the text (0 = all)
  // Ids [begin, end) of the text only (end 0 = the end; base::TextRange),
  // before max_tokens applies.
  std::vector<int64_t> tokens = {0, 0};
  // With a plan (plan.json / plan.bin): the run config whose session applies
  // it; its model.dir must be `model_dir`. Borrowed.
  std::string plan_path;
  const config::RunConfig* config = nullptr;
  // Instead of a checkpoint: a quantized one (exporter::QuantizedCheckpoint),
  // decoded a layer at a time; its tokenizer too (model_dir = this).
  std::string quantized_dir;
  // Instead of a checkpoint: a GGUF file (exporter::gguf::ReadLlamaWeights: every tensor
  // decoded to float32, q/k rows put back); its tokenizer from model_dir (the file's folder,
  // where `export --format gguf` copies tokenizer.json).
  std::string gguf_path;
  // Where the model computes (`eval --device`; with --plan the config's model.device).
  model::ComputeOptions compute;
  base::LogSink log;  // the plan's effective bits
  // When set: the ids the perplexity reads (int32, no BOS) to `logits_path`.ids and the
  // float32 logits [T, vocab] of the first window (BOS + the first context-1 ids) to
  // `logits_path` (raw, little-endian), for comparing with another runtime
  // (scripts/llama-cpp-check.sh).
  std::string logits_path;
};

struct TextPerplexity {
  model::PerplexityResult result;
  size_t text_tokens = 0;  // ids of the text within `tokens`
  std::string plan_id;     // "" without a plan
};

// Errors name the file (text, checkpoint, plan) or the flag.
absl::StatusOr<TextPerplexity> MeasureTextPerplexity(const TextPerplexityRequest& request);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_TEXT_PERPLEXITY_H_
