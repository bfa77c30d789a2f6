// Perplexity of a LlamaModel over a token stream, with the protocol of
// shared/models/stories260k/README.md:
//   1. ids are the whole text encoded WITHOUT BOS;
//   2. they are cut into consecutive, non-overlapping chunks of N-1 tokens
//      (N = context) and the last, partial chunk is dropped;
//   3. each window is [BOS] + chunk (N tokens);
//   4. every chunk token is predicted (the first from BOS alone): N-1
//      predictions per window;
//   5. PPL = exp(mean NLL over all predictions), NLL accumulated in double.
#ifndef WINDQUANT_COMMON_MODEL_PERPLEXITY_H_
#define WINDQUANT_COMMON_MODEL_PERPLEXITY_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/llama_model.h"

namespace windquant::model {

struct PerplexityOptions {
  // Window length N including BOS; clamped to max_position_embeddings.
  int64_t context = 2048;
  // Windows per forward pass.
  int64_t batch_size = 8;
  // Use only the first max_tokens ids (<= 0: all).
  int64_t max_tokens = 0;
  // Called after each batch with (windows done, windows total, tokens predicted so far).
  std::function<void(int64_t, int64_t, int64_t)> progress;
};

struct PerplexityResult {
  int64_t context = 0;  // N actually used (after clamping)
  int64_t windows = 0;
  int64_t tokens = 0;       // predicted tokens = windows * (N - 1)
  double total_nll = 0;     // sum of NLL over predicted tokens (nats)
  double nll = 0;           // mean NLL per predicted token
  double perplexity = 0;    // exp(nll)
  double seconds = 0;       // wall time of the forward passes
  double tokens_per_s = 0;  // predicted tokens / seconds
};

// The windows of the protocol for the first `n` ids: the context clamped to
// `max_position_embeddings`, windows = n / (context - 1), tokens = windows *
// (context - 1) filled in; INVALID_ARGUMENT when the ids do not fill one
// window. Every perplexity (in one process or through a pipeline of stages)
// starts here.
absl::StatusOr<PerplexityResult> PerplexityWindows(int64_t n, int64_t context,
                                                   int64_t max_position_embeddings);

// Windows [first, first + count) as a [count, context] int64 tensor: column 0
// is `bos`, then window w's chunk ids[w * (context - 1), (w + 1) * (context - 1)).
at::Tensor WindowRows(const std::vector<int32_t>& ids, int64_t first, int64_t count,
                      int64_t context, int64_t bos);

// Summed NLL (nats, accumulated in double) of `targets` [b, t] under `logits`
// [b, t, V]: log_softmax in float32, one gather, summed in double.
double SumTargetNll(const at::Tensor& logits, const at::Tensor& targets);

// Ends a perplexity started by PerplexityWindows: total_nll, nll, perplexity,
// seconds and tokens_per_s. INVALID_ARGUMENT when the perplexity is not
// finite (the model's logits hold NaN or Inf), so it never passes as a number.
absl::Status FinishPerplexity(double total_nll, double seconds, PerplexityResult* result);

// Runs the protocol above with `model` (which must hold embeddings, every
// decoder layer and the head). Gradients are not recorded.
// Errors: INVALID_ARGUMENT when the model is a partial stage, the options
// are out of range, an id is outside [0, vocab_size), or the ids do not fill a
// single window; INTERNAL for a torch error.
absl::StatusOr<PerplexityResult> ComputePerplexity(const LlamaModel& model,
                                                   const std::vector<int32_t>& ids,
                                                   const PerplexityOptions& options);

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_PERPLEXITY_H_
