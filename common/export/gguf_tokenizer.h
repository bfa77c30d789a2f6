// The tokenizer of a GGUF export (tokenizer.ggml.* keys, as llama.cpp's loader reads them)
// from the model folder's tokenizer files, for both tokenizer kinds windquant reads
// (common/model/tokenizer.h):
//   LLaMA-2 SentencePiece style (tokenizer.json BPE with byte_fallback): model "llama",
//     pieces, scores and piece types from tokenizer.model (the SentencePiece ModelProto:
//     the scores decide llama.cpp's merge order and tokenizer.json has none);
//   LLaMA-3 byte-level BPE (tokenizer.json with a ByteLevel pre-tokenizer): model "gpt2",
//     pre "llama-bpe" (the Split regex must be LLaMA-3's), tokens, merges, token types
//     (added special tokens CONTROL).
// Ids beyond the tokenizer's up to the config's vocab_size are "[PAD<id>]" UNUSED (as
// llama.cpp's converter pads). BOS / EOS ids are the config's. Stateless; thread-safe.
#ifndef WINDQUANT_COMMON_EXPORT_GGUF_TOKENIZER_H_
#define WINDQUANT_COMMON_EXPORT_GGUF_TOKENIZER_H_

#include <string>

#include "absl/status/status.h"
#include "common/export/gguf_file.h"
#include "common/model/llama_config.h"

namespace windquant::exporter::gguf {

// Adds the tokenizer.ggml.* keys for `model_dir`'s tokenizer to `md`. Errors name the
// file: NOT_FOUND (tokenizer.json, or tokenizer.model for the SentencePiece kind),
// DATA_LOSS (unparsable), FAILED_PRECONDITION for a tokenizer llama.cpp has no name for
// (another pre-tokenizer regex, another model type) or more tokens than vocab_size.
absl::Status AddTokenizerMetadata(const std::string& model_dir, const model::LlamaConfig& config,
                                  Metadata* md);

}  // namespace windquant::exporter::gguf

#endif  // WINDQUANT_COMMON_EXPORT_GGUF_TOKENIZER_H_
