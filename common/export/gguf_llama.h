// The LLaMA architecture in GGUF (docs/gguf.md), both ways: llama.cpp's tensor names,
// its q/k row order, the llama.* metadata from a LlamaConfig and back, and a GGUF file
// decoded to windquant's weights (eval --gguf).
//
// Row order: llama.cpp's rotary embedding pairs dimensions (2i, 2i+1) of a head where
// Hugging Face pairs (i, i + head_dim/2), so the converter permutes the rows of q_proj
// (per attention head) and k_proj (per key/value head): GGUF row h*hd + 2i + p holds
// Hugging Face row h*hd + p*hd/2 + i (p in {0, 1}). Rows move whole, so a row's
// quantization (a unit's row scale) moves with it.
// Stateless; thread-safe.
#ifndef WINDQUANT_COMMON_EXPORT_GGUF_LLAMA_H_
#define WINDQUANT_COMMON_EXPORT_GGUF_LLAMA_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/export/gguf_file.h"
#include "common/model/llama_config.h"
#include "common/model/llama_weights.h"

namespace windquant::exporter::gguf {

// "blk.3.attn_q.weight", ... for the decoder linears (model::Matrix order).
std::string LinearName(int64_t layer, int matrix);
std::string NormName(int64_t layer, bool post_attention);  // attn_norm / ffn_norm
inline constexpr char kEmbeddingName[] = "token_embd.weight";
inline constexpr char kFinalNormName[] = "output_norm.weight";
inline constexpr char kHeadName[] = "output.weight";

// The number of heads whose rows llama.cpp permutes for `matrix` (q: attention heads,
// k: key/value heads), 0 for the other matrices.
int64_t PermutedHeads(const model::LlamaConfig& config, int matrix);
// The Hugging Face row that GGUF row `row` of a matrix with `heads` permuted heads and
// `rows` rows holds (the identity for heads 0).
int64_t HfRowOf(int64_t row, int64_t rows, int64_t heads);

// general.architecture "llama" and the llama.* keys of `config`. UNIMPLEMENTED for a
// config GGUF export does not carry yet (rope_scaling).
absl::Status AddLlamaMetadata(const model::LlamaConfig& config, const std::string& name,
                              Metadata* md);
// The config back from a file's keys and tensors. INVALID_ARGUMENT naming the file for
// another architecture; NOT_FOUND naming a missing key or tensor.
absl::StatusOr<model::LlamaConfig> LlamaConfigOf(const GgufFile& file);

// Every tensor decoded to float32 in Hugging Face layout (q/k rows put back): the model
// eval --gguf runs. Memory: 4 bytes per weight of the whole model. Errors: LlamaConfigOf's,
// a tensor missing or of another shape (DATA_LOSS naming it), a type without a decoder
// (UNIMPLEMENTED naming it).
absl::StatusOr<model::LlamaWeights> ReadLlamaWeights(const GgufFile& file);

}  // namespace windquant::exporter::gguf

#endif  // WINDQUANT_COMMON_EXPORT_GGUF_LLAMA_H_
