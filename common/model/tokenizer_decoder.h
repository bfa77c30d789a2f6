// TokenDecoder: the "decoder" of an HF tokenizer.json, the steps that turn token
// strings back into text (Replace, ByteFallback, Fuse, Strip, Metaspace, ByteLevel,
// nested in Sequence), run in order as HF tokenizers runs them. Immutable after
// Load; thread-safe.
#ifndef WINDQUANT_COMMON_MODEL_TOKENIZER_DECODER_H_
#define WINDQUANT_COMMON_MODEL_TOKENIZER_DECODER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/model/tokenizer_json.h"
#include "nlohmann/json_fwd.hpp"

namespace windquant::model {

class TokenDecoder {
 public:
  // Reads the decoder `j` (null: none); INVALID_ARGUMENT naming `where` and the
  // unsupported type or malformed field. Call once.
  absl::Status Load(const nlohmann::json& j, const std::string& where);

  // The text of `tokens`: each step rewrites the list, then the pieces are
  // concatenated; without a decoder (none loaded, or null) they are joined with
  // single spaces.
  std::string Decode(std::vector<std::string> tokens) const;

 private:
  enum class Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace, kByteLevel };
  struct Step {
    Kind kind;
    std::string a, b;
    int start = 0, stop = 0;
    tokenizer_json::PrependScheme scheme = tokenizer_json::PrependScheme::kAlways;
  };

  absl::Status LoadSteps(const nlohmann::json& j, const std::string& where);

  std::vector<Step> steps_;
  bool has_decoder_ = false;
};

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_TOKENIZER_DECODER_H_
