// LlamaConfig: the fields of a Hugging Face LlamaForCausalLM `config.json`
// that windquant needs. Parsing and validation live in llama_config.cc.
#ifndef WINDQUANT_COMMON_MODEL_LLAMA_CONFIG_H_
#define WINDQUANT_COMMON_MODEL_LLAMA_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace windquant::model {

// rope_scaling with rope_type "llama3" (LLaMA-3.1/3.2). Absent = no scaling.
struct RopeScaling {
  std::string rope_type;  // "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // hidden_size / num_attention_heads when absent
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  bool tie_word_embeddings = false;
  int64_t vocab_size = 0;
  int64_t bos_token_id = 1;
  std::vector<int64_t> eos_token_ids;  // config may give one id or a list
  int64_t max_position_embeddings = 2048;
  std::string torch_dtype;  // informational ("float32", "bfloat16", ...)

  // Parses config.json text. Errors name `source` (the file path) and the key.
  static absl::StatusOr<LlamaConfig> FromJson(const std::string& json_text,
                                              const std::string& source);
  // Reads `<dir>/config.json`.
  static absl::StatusOr<LlamaConfig> FromDirectory(const std::string& dir);
  // Serialises back to a config.json (used by pretrain/export).
  std::string ToJson() const;
};

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_LLAMA_CONFIG_H_
