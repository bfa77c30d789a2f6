// BpeTrainer: learns a small byte-level BPE tokenizer (LLaMA-3 style: the
// LLaMA-3 Split regex, then GPT-2's ByteLevel alphabet) from text, and writes
// it as a Hugging Face tokenizer.json that Tokenizer (and HF tokenizers)
// load. Ids: 0..255 are the single bytes (in byte order), then one id per
// merge, then the special tokens (first = BOS, second = EOS by default).
// Deterministic: ties between equally frequent pairs go to the smaller
// (left id, right id). Not thread-safe; use one trainer per thread.
#ifndef WINDQUANT_COMMON_MODEL_BPE_TRAINER_H_
#define WINDQUANT_COMMON_MODEL_BPE_TRAINER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace windquant::model {

struct BpeTrainerOptions {
  // Total ids, including the 256 byte tokens and the special tokens.
  int32_t vocab_size = 4096;
  // Pairs seen fewer times than this are never merged (training may then
  // stop below vocab_size).
  int64_t min_frequency = 2;
  // Appended after the merges; the post_processor adds special_tokens[0]
  // (BOS) in front of every sequence.
  std::vector<std::string> special_tokens = {"<|begin_of_text|>", "<|end_of_text|>"};
};

class BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainerOptions options);

  // Adds `text` to the corpus (pre-tokenized into words and counted).
  void AddText(std::string_view text);

  // Learns merges from the words added so far and returns the tokenizer.json
  // text. INVALID_ARGUMENT when vocab_size cannot hold the 256 bytes plus the
  // special tokens, or special_tokens is empty.
  absl::StatusOr<std::string> Train();

  // Number of merges learned by the last Train().
  int32_t num_merges() const { return num_merges_; }

 private:
  BpeTrainerOptions options_;
  absl::flat_hash_map<std::string, int64_t> word_counts_;
  int32_t num_merges_ = 0;
};

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_BPE_TRAINER_H_
