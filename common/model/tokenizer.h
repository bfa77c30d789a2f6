// Tokenizer: a Hugging Face tokenizer.json with model.type "BPE", in C++ and
// without torch. Two families are supported:
//  * LLaMA-2 / SentencePiece style: "▁" metaspace normalization (normalizer
//    Sequence[Prepend, Replace] or a Metaspace pre-tokenizer), BPE with
//    byte_fallback (<0xNN> pieces) and fuse_unk, decoder Replace/ByteFallback/
//    Fuse/Strip.
//  * LLaMA-3 / GPT-2 style: byte-level BPE (bytes_to_unicode), the pre-tokenizer
//    Split regex of LLaMA-3 (or GPT-2's ByteLevel regex), ignore_merges.
// added_tokens are matched in the raw text before normalization, as HF does.
// Immutable after construction; Encode/Decode are thread-safe (the per-word
// cache is guarded by a mutex).
#ifndef WINDQUANT_COMMON_MODEL_TOKENIZER_H_
#define WINDQUANT_COMMON_MODEL_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace windquant::model {

class TokenizerImpl;

class Tokenizer {
 public:
  // Reads and parses a tokenizer.json. NOT_FOUND when the file is missing,
  // INVALID_ARGUMENT (naming the file and field) for bad JSON or an
  // unsupported model/normalizer/pre-tokenizer/decoder.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(
      const std::string& tokenizer_json_path);
  // Same from the JSON text; `source` names it in error messages.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(
      std::string_view json_text, const std::string& source = "tokenizer.json");

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `text` (any bytes; invalid UTF-8 is handled by byte
  // fallback / byte-level mapping). add_bos / add_eos prepend / append
  // bos_id() / eos_id() when those exist (>= 0). The post_processor of the
  // file is NOT applied implicitly: the caller decides with the flags.
  std::vector<int32_t> Encode(std::string_view text, bool add_bos = false,
                              bool add_eos = false) const;

  // Text of `ids`. skip_special drops special added tokens (BOS/EOS/...).
  // Ids out of range are skipped.
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special = true) const;

  // -1 when the tokenizer has no such token.
  int32_t bos_id() const;
  int32_t eos_id() const;
  // Number of ids: max id + 1 over the vocab and added tokens.
  int32_t vocab_size() const;

  // The token string of `id` (as stored in the vocab, e.g. "▁the" or
  // "Ġthe"); empty when out of range.
  std::string IdToToken(int32_t id) const;
  // -1 when absent.
  int32_t TokenToId(std::string_view token) const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl_;
};

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_TOKENIZER_H_
