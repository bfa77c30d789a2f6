// WordSplitter: the "normalizer" and "pre_tokenizer" of an HF tokenizer.json, which
// turn a segment of text (between added tokens) into the words BPE encodes one at a
// time: normalizer steps (Prepend, Replace), then pre-tokenizer steps (Metaspace,
// ByteLevel, the LLaMA-3 and GPT-2 Split regexes), each nested in Sequence. Immutable
// after loading; thread-safe.
#ifndef WINDQUANT_COMMON_MODEL_TOKENIZER_SPLITTER_H_
#define WINDQUANT_COMMON_MODEL_TOKENIZER_SPLITTER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/model/tokenizer_json.h"
#include "nlohmann/json_fwd.hpp"

namespace windquant::model {

class WordSplitter {
 public:
  // Append the steps of a normalizer / pre-tokenizer `j` (null: none);
  // INVALID_ARGUMENT naming `where` and the unsupported type or field.
  absl::Status LoadNormalizer(const nlohmann::json& j, const std::string& where);
  absl::Status LoadPreTokenizer(const nlohmann::json& j, const std::string& where);

  // Appends the non-empty words of `segment` to *words; `at_start`: the segment
  // begins the text (Metaspace's prepend_scheme "first").
  void Split(std::string segment, bool at_start, std::vector<std::string>* words) const;

 private:
  enum class NormKind { kPrepend, kReplace };
  struct NormStep {
    NormKind kind;
    std::string a, b;
  };
  enum class PreKind { kMetaspace, kByteLevel, kSplitLlama3, kSplitGpt2 };
  struct PreStep {
    PreKind kind;
    std::string replacement;
    tokenizer_json::PrependScheme scheme = tokenizer_json::PrependScheme::kAlways;
    bool split = true;
    bool add_prefix_space = false;
    bool use_regex = true;
  };

  std::vector<NormStep> normalizer_;
  std::vector<PreStep> pre_tokenizer_;
};

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_TOKENIZER_SPLITTER_H_
