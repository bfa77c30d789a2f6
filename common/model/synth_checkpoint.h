// Synthetic LLaMA checkpoints with the real layer shapes of LLaMA-3.2-1B,
// LLaMA-3-8B and LLaMA-3-70B (random weights), so that scale tests and
// benchmarks of speed and memory never need a download. Only speed and memory
// mean anything on them: the weights are noise.
//
// Layout: Hugging Face, BF16, sharded (model-0000i-of-0000n.safetensors +
// model.safetensors.index.json), config.json, and the tokenizer files of
// another model directory (by default windquant's default model, vocab 2048):
// the embeddings are sized to that tokenizer, and config.json says so under
// "windquant_synth" (with the shape, seed and weight distribution).
//
// Weights: every linear is N(0, 0.02^2), with outlier input channels (0.5% of
// the columns of each matrix scaled by 4..8, as LLaMA's weights have a few
// columns of much larger norm) and 0.1% of the entries scaled by 4 (heavy
// tails); embeddings N(0, 0.02^2); RMSNorm weights 1 + N(0, 0.05^2).
// Deterministic in (seed, tensor name): a cut to N layers holds exactly the
// first N layers of the full model.
//
// Memory: generated and written in blocks of ~1M values, so the writer holds
// one block (a few MB), never a whole tensor. Thread-compatible.
#ifndef WINDQUANT_COMMON_MODEL_SYNTH_CHECKPOINT_H_
#define WINDQUANT_COMMON_MODEL_SYNTH_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/llama_config.h"

namespace windquant::model {

// The shapes `windquant synth --shape` knows.
inline constexpr const char* kSynthShapes[] = {"llama3.2-1b", "llama3-8b", "llama3-70b"};

// The config of `shape` with its real layer count and the real vocabulary
// size (128256); INVALID_ARGUMENT naming the shape when unknown.
absl::StatusOr<LlamaConfig> SynthShapeConfig(const std::string& shape);

struct SynthOptions {
  std::string shape = "llama3.2-1b";
  int64_t layers = -1;        // decoder layers to write (-1 = the shape's count)
  std::string tokenizer_dir;  // directory holding tokenizer.json
  std::string out_dir;        // created; existing files of the same names are replaced
  uint64_t seed = 0;
  int64_t shard_bytes = 1LL << 30;  // a shard is closed before it would exceed this
  // Called after each written block with (bytes written, bytes total).
  std::function<void(int64_t, int64_t)> progress;
};

struct SynthResult {
  LlamaConfig config;
  std::vector<std::string> shards;  // file names, in order
  int64_t total_bytes = 0;          // tensor data bytes over all shards
  int64_t decoder_linear_weights = 0;
};

// Writes the checkpoint. Errors: unknown shape, layers < 1 or above the
// shape's count, a missing / unparsable tokenizer.json (naming the file), I/O.
absl::StatusOr<SynthResult> WriteSynthCheckpoint(const SynthOptions& options);

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_SYNTH_CHECKPOINT_H_
