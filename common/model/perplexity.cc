#include "common/model/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace windquant::model {

namespace {

// The whole model, a usable context and batch size, and ids inside the vocabulary for the
// first n tokens.
absl::Status CheckInputs(const LlamaModel& model, const std::vector<int32_t>& ids, int64_t n,
                         const PerplexityOptions& options) {
  const LlamaConfig& c = model.config();
  const LlamaWeights& w = model.weights();
  if (model.first_layer() != 0 || model.end_layer() != c.num_hidden_layers ||
      !w.embed_tokens.defined() || !w.final_norm.defined()) {
    return absl::InvalidArgumentError(
        "perplexity needs the whole model (embeddings, all layers, final norm, lm_head)");
  }
  if (options.context < 2) {
    return absl::InvalidArgumentError(absl::StrCat("context: must be >= 2, got ", options.context));
  }
  if (options.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size: must be >= 1, got ", options.batch_size));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= c.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", ids[i], " at position ", i,
                                                     " is outside the vocabulary [0, ",
                                                     c.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

// Summed NLL (double) of every window's chunk tokens, each window BOS + chunk ids.
double SumWindowNll(const LlamaModel& model, const std::vector<int32_t>& ids, int64_t windows,
                    int64_t context, const PerplexityOptions& options) {
  const int64_t chunk = context - 1;
  at::NoGradGuard no_grad;
  // All windows as one [windows, context] tensor: column 0 is BOS.
  at::Tensor all = at::empty({windows, context}, at::kLong);
  {
    int64_t* p = all.data_ptr<int64_t>();
    for (int64_t wi = 0; wi < windows; ++wi) {
      int64_t* row = p + wi * context;
      row[0] = model.config().bos_token_id;
      for (int64_t j = 0; j < chunk; ++j) row[1 + j] = ids[wi * chunk + j];
    }
  }
  double total = 0;
  for (int64_t b0 = 0; b0 < windows; b0 += options.batch_size) {
    const int64_t nb = std::min(options.batch_size, windows - b0);
    const at::Tensor batch = all.narrow(0, b0, nb).to(model.device());
    const at::Tensor logits = model.Logits(batch.narrow(1, 0, chunk));  // [nb, chunk, V]
    const at::Tensor targets = batch.narrow(1, 1, chunk);
    // NLL per position in fp32 (log_softmax), summed in double.
    const at::Tensor logp = at::log_softmax(logits.to(at::kFloat), -1);
    const at::Tensor nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1);
    total += nll.to(at::kDouble).sum().item<double>();
    if (options.progress) options.progress(b0 + nb, windows, (b0 + nb) * chunk);
  }
  return total;
}

}  // namespace

absl::StatusOr<PerplexityResult> ComputePerplexity(const LlamaModel& model,
                                                   const std::vector<int32_t>& ids,
                                                   const PerplexityOptions& options) {
  const LlamaConfig& c = model.config();
  int64_t n = static_cast<int64_t>(ids.size());
  if (options.max_tokens > 0) n = std::min(n, options.max_tokens);
  if (absl::Status s = CheckInputs(model, ids, n, options); !s.ok()) return s;
  const int64_t context = std::min(options.context, c.max_position_embeddings);
  const int64_t chunk = context - 1;
  const int64_t windows = n / chunk;
  if (windows == 0) {
    return absl::InvalidArgumentError(absl::StrCat("only ", n, " tokens: fewer than one window of ",
                                                   chunk, " (context ", context, " - BOS)"));
  }

  PerplexityResult r;
  r.context = context;
  r.windows = windows;
  r.tokens = windows * chunk;
  const auto start = std::chrono::steady_clock::now();
  try {
    r.total_nll = SumWindowNll(model, ids, windows, context, options);
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("perplexity forward failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("perplexity forward failed: ", e.what()));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.nll = r.total_nll / static_cast<double>(r.tokens);
  r.perplexity = std::exp(r.nll);
  // NaN/Inf logits (weights, activations) must not pass as a "null" perplexity.
  if (!std::isfinite(r.perplexity)) {
    return absl::InvalidArgumentError(absl::StrCat("perplexity: not finite (mean NLL ", r.nll,
                                                   " over ", r.tokens,
                                                   " tokens): the model's logits hold NaN or Inf"));
  }
  r.tokens_per_s = r.seconds > 0 ? r.tokens / r.seconds : 0;
  return r;
}

}  // namespace windquant::model
