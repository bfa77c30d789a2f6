// Pretrainer: trains a small LLaMA from scratch on a token stream, so that
// windquant has a default model on a fresh clone (`windquant pretrain`,
// scripts/default-model.sh). The model is the LlamaModel forward pass with
// weights that require grad; AdamW with linear warmup and a cosine decay to
// `min_lr_ratio` of the peak; loss = next-token cross-entropy on random
// (seeded) windows of the training ids. The last `held_out_fraction` of the ids
// is never trained on; its perplexity is measured for the untrained init and
// for the trained model.
// Thread-compatible. Train() sets the global ATen thread count when
// `threads > 0`.
#ifndef WINDQUANT_COMMON_MODEL_PRETRAINER_H_
#define WINDQUANT_COMMON_MODEL_PRETRAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/llama_config.h"
#include "common/model/llama_model.h"
#include "common/model/llama_weights.h"

namespace windquant::model {

struct PretrainConfig {
  // --- Model (tied embeddings, SwiGLU, GQA) ---
  int64_t layers = 4;
  int64_t hidden = 128;
  int64_t intermediate = 0;  // 0 = DefaultIntermediateSize(hidden)
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t vocab = 0;  // from the tokenizer; must be > every training id
  int64_t seq_len = 128;
  double rope_theta = 10000.0;
  int64_t bos_id = -1;  // written to config.json when >= 0
  int64_t eos_id = -1;
  // --- Training ---
  int64_t batch = 16;
  int64_t steps = 300;
  double lr = 3e-3;  // peak learning rate
  int64_t warmup_steps = 20;
  double min_lr_ratio = 0.1;  // cosine decays to lr * min_lr_ratio
  double weight_decay = 0.1;  // on matrices and embeddings, not on norms
  double grad_clip = 1.0;     // max global gradient norm; <= 0 disables
  double held_out_fraction = 0.05;
  int64_t eval_max_windows = 0;  // held-out windows evaluated; 0 = all
  uint64_t seed = 1234;
  int threads = 0;  // at::set_num_threads; 0 = leave as is
  double log_interval_s = 10.0;

  // INVALID_ARGUMENT naming the field (e.g. "pretrain.heads: ...").
  absl::Status Validate() const;
  // The config.json of the model (tied, float32, LlamaForCausalLM).
  LlamaConfig ToLlamaConfig() const;
};

// ~2.7 x hidden, rounded to a multiple of 32 (at least 32).
int64_t DefaultIntermediateSize(int64_t hidden);

// Learning rate at `step` (0-based): linear warmup to `lr` over warmup_steps,
// then cosine from lr down to lr * min_lr_ratio at the last step.
double LearningRateAt(const PretrainConfig& config, int64_t step);

// Fresh weights for `config`: every matrix and the embeddings ~ N(0, 0.02),
// norms = 1, lm_head tied to (the same tensor as) embed_tokens when
// config.tie_word_embeddings. Deterministic in `seed`.
LlamaWeights InitLlamaWeights(const LlamaConfig& config, uint64_t seed, bool requires_grad);

// Perplexity exp(mean next-token cross-entropy) of `model` over the
// non-overlapping windows of seq_len + 1 ids of `ids` (every id predicted once
// except each window's first). Evaluates at most `max_windows` windows
// (0 = all), `batch` windows at a time. INVALID_ARGUMENT when `ids` holds
// fewer than seq_len + 1 ids; INTERNAL for a torch error.
absl::StatusOr<double> HeldOutPerplexity(const LlamaModel& model, const std::vector<int32_t>& ids,
                                         int64_t seq_len, int64_t batch = 16,
                                         int64_t max_windows = 0);

struct PretrainResult {
  LlamaWeights weights;  // trained; detached (no grad)
  LlamaConfig config;
  double untrained_held_out_ppl = 0;
  double held_out_ppl = 0;
  double first_loss = 0;      // train loss of step 0
  double final_loss = 0;      // mean train loss of the last min(10, steps) steps
  std::vector<float> losses;  // train loss per step
  int64_t train_ids = 0;
  int64_t held_out_ids = 0;
  int64_t tokens_trained = 0;  // steps * batch * seq_len
  double train_seconds = 0;
};

class Pretrainer {
 public:
  // `config` is validated by Train().
  explicit Pretrainer(PretrainConfig config);

  // Trains on `ids` (the first 1 - held_out_fraction of them; the rest is the
  // held-out split). INVALID_ARGUMENT for a bad config, ids out of
  // [0, vocab), or too few ids for a window in either split; INTERNAL for a
  // torch error. Prints a progress line (loss, tokens/s, ETA) to stderr.
  absl::StatusOr<PretrainResult> Train(const std::vector<int32_t>& ids) const;

  const PretrainConfig& config() const { return config_; }

 private:
  PretrainConfig config_;
};

// What is written next to the weights (README.md and pretrain.json).
struct PretrainedModelInfo {
  std::string data_source;     // e.g. "debian:bible-kjv train.txt"
  std::string tokenizer_json;  // written as tokenizer.json when non-empty
  std::string settings_stamp;  // opaque; lets scripts tell if a rebuild is due
};

// Writes a Hugging Face model directory: config.json (LlamaForCausalLM),
// model.safetensors (F32; tied -> no lm_head.weight), tokenizer.json,
// pretrain.json (config, data source, steps, both perplexities) and README.md.
// Atomic for the directory: everything goes to `dir`.tmp, which then replaces
// `dir`. Errors name the path.
absl::Status WritePretrainedModel(const std::string& dir, const PretrainConfig& config,
                                  const PretrainResult& result, const PretrainedModelInfo& info);

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_PRETRAINER_H_
