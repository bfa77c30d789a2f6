#include "common/model/perplexity.h"

#include <c10/core/GradMode.h>
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
  c10::NoGradGuard no_grad;
  // All windows as one [windows, context] tensor: column 0 is BOS.
  const at::Tensor all = WindowRows(ids, 0, windows, context, model.config().bos_token_id);
  double total = 0;
  for (int64_t b0 = 0; b0 < windows; b0 += options.batch_size) {
    const int64_t nb = std::min(options.batch_size, windows - b0);
    const at::Tensor batch = all.narrow(0, b0, nb).to(model.device());
    const at::Tensor logits = model.Logits(batch.narrow(1, 0, chunk));  // [nb, chunk, V]
    total += SumTargetNll(logits, batch.narrow(1, 1, chunk));
    if (options.progress) options.progress(b0 + nb, windows, (b0 + nb) * chunk);
  }
  return total;
}

}  // namespace

absl::StatusOr<PerplexityResult> PerplexityWindows(int64_t n, int64_t context,
                                                   int64_t max_position_embeddings) {
  PerplexityResult r;
  r.context = std::min(context, max_position_embeddings);
  const int64_t chunk = r.context - 1;
  r.windows = n / chunk;
  if (r.windows == 0) {
    return absl::InvalidArgumentError(absl::StrCat("only ", n, " tokens: fewer than one window of ",
                                                   chunk, " (context ", r.context, " - BOS)"));
  }
  r.tokens = r.windows * chunk;
  return r;
}

at::Tensor WindowRows(const std::vector<int32_t>& ids, int64_t first, int64_t count,
                      int64_t context, int64_t bos) {
  const int64_t chunk = context - 1;
  at::Tensor rows = at::empty({count, context}, at::kLong);
  int64_t* p = rows.data_ptr<int64_t>();
  for (int64_t wi = 0; wi < count; ++wi) {
    int64_t* row = p + wi * context;
    row[0] = bos;
    for (int64_t j = 0; j < chunk; ++j) row[1 + j] = ids[(first + wi) * chunk + j];
  }
  return rows;
}

double SumTargetNll(const at::Tensor& logits, const at::Tensor& targets) {
  // NLL per position in fp32 (log_softmax), summed in double.
  const at::Tensor logp = at::log_softmax(logits.to(at::kFloat), -1);
  const at::Tensor nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1);
  return nll.to(at::kDouble).sum().item<double>();
}

absl::Status FinishPerplexity(double total_nll, double seconds, PerplexityResult* r) {
  r->seconds = seconds;
  r->total_nll = total_nll;
  r->nll = total_nll / static_cast<double>(r->tokens);
  r->perplexity = std::exp(r->nll);
  // NaN/Inf logits (weights, activations) must not pass as a "null" perplexity.
  if (!std::isfinite(r->perplexity)) {
    return absl::InvalidArgumentError(absl::StrCat("perplexity: not finite (mean NLL ", r->nll,
                                                   " over ", r->tokens,
                                                   " tokens): the model's logits hold NaN or Inf"));
  }
  r->tokens_per_s = r->seconds > 0 ? r->tokens / r->seconds : 0;
  return absl::OkStatus();
}

absl::StatusOr<PerplexityResult> ComputePerplexity(const LlamaModel& model,
                                                   const std::vector<int32_t>& ids,
                                                   const PerplexityOptions& options) {
  const LlamaConfig& c = model.config();
  int64_t n = static_cast<int64_t>(ids.size());
  if (options.max_tokens > 0) n = std::min(n, options.max_tokens);
  if (absl::Status s = CheckInputs(model, ids, n, options); !s.ok()) return s;
  absl::StatusOr<PerplexityResult> r =
      PerplexityWindows(n, options.context, c.max_position_embeddings);
  if (!r.ok()) return r.status();
  double total = 0;
  const auto start = std::chrono::steady_clock::now();
  try {
    total = SumWindowNll(model, ids, r->windows, r->context, options);
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("perplexity forward failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("perplexity forward failed: ", e.what()));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (absl::Status s = FinishPerplexity(total, seconds, &*r); !s.ok()) return s;
  return r;
}

}  // namespace windquant::model
