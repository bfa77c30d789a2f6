#include "job/text_perplexity.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"
#include "common/base/progress.h"
#include "common/base/status_macros.h"
#include "common/base/text_range.h"
#include "common/export/gguf_file.h"
#include "common/export/gguf_llama.h"
#include "common/export/quantized_checkpoint.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_model.h"
#include "common/model/tokenizer.h"
#include "common/plan/plan_io.h"
#include "job/open_session.h"

namespace windquant::job {
namespace {

// The checkpoint's model, or with a plan the session's model with it applied: the
// session's weights shared, a layer dequantized when the forward reaches it (no float32
// copy of the model).
absl::StatusOr<std::shared_ptr<const model::LlamaModel>> LoadModel(const TextPerplexityRequest& r,
                                                                   std::string* plan_id) {
  if (!r.quantized_dir.empty()) {
    // Decoded one layer at a time inside each forward (no float32 copy of the model).
    WQ_ASSIGN_OR_RETURN(std::shared_ptr<const exporter::QuantizedCheckpoint> q,
                        exporter::QuantizedCheckpoint::Open(r.quantized_dir));
    *plan_id = q->plan_id();
    return exporter::QuantizedCheckpoint::Model(std::move(q), r.compute);
  }
  if (!r.gguf_path.empty()) {
    WQ_ASSIGN_OR_RETURN(const std::unique_ptr<exporter::gguf::GgufFile> file,
                        exporter::gguf::GgufFile::Open(r.gguf_path));
    WQ_ASSIGN_OR_RETURN(model::LlamaWeights weights, exporter::gguf::ReadLlamaWeights(*file));
    if (auto id = file->Text("windquant.plan_id"); id.ok()) *plan_id = *id;
    try {
      return std::make_shared<const model::LlamaModel>(std::move(weights), r.compute);
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.gguf_path, ": cannot build the model: ", e.what()));
    }
  }
  if (r.plan_path.empty()) {
    model::LlamaWeights weights;
    {
      WQ_ASSIGN_OR_RETURN(std::unique_ptr<model::Checkpoint> checkpoint,
                          model::Checkpoint::Open(r.model_dir));
      WQ_ASSIGN_OR_RETURN(weights, checkpoint->LoadWeights(model::LoadRequest{}));
    }
    try {
      return std::make_shared<const model::LlamaModel>(std::move(weights), r.compute);
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.model_dir, ": cannot build the model: ", e.what()));
    }
  }
  if (r.config == nullptr) return absl::InvalidArgumentError("--plan needs --config FILE");
  WQ_ASSIGN_OR_RETURN(auto session, OpenSession(*r.config, /*use_cache=*/true,
                                                /*load_eval_text=*/false));
  WQ_ASSIGN_OR_RETURN(const plan::Plan plan, plan::ReadPlanFile(r.plan_path, session->table()));
  *plan_id = plan.plan_id;
  WQ_ASSIGN_OR_RETURN(std::shared_ptr<const model::LlamaModel> planned,
                      session->PlanModel(plan.actions));
  if (r.log) {
    r.log(absl::StrFormat("plan %s: effective bits %.4f", plan.plan_id,
                          plan.Totals(session->table()).effective_bits));
  }
  return planned;  // keeps the weights and fits alive after the session goes
}

// The ids the perplexity reads (int32, raw, no BOS) to path.ids and the float32 logits of
// the first window (BOS + the first context-1 of them) to path.
absl::Status WriteFirstWindowLogits(const model::LlamaModel& llama, const std::vector<int32_t>& ids,
                                    int64_t context, int64_t max_tokens, const std::string& path) {
  const int64_t used = max_tokens > 0 ? std::min<int64_t>(max_tokens, ids.size()) : ids.size();
  const int64_t n =
      std::min<int64_t>(std::min(context, llama.config().max_position_embeddings) - 1, used);
  std::vector<int64_t> window = {llama.config().bos_token_id};
  window.insert(window.end(), ids.begin(), ids.begin() + n);
  try {
    c10::NoGradGuard no_grad;
    const at::Tensor logits = llama.Logits(at::tensor(window, at::kLong).unsqueeze(0))
                                  .to(at::kCPU, at::kFloat)
                                  .contiguous();
    WQ_RETURN_IF_ERROR(base::WriteFileAtomic(
        path, std::string(static_cast<const char*>(logits.data_ptr()), logits.numel() * 4)));
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(path, ": ", e.what_without_backtrace()));
  }
  return base::WriteFileAtomic(path + ".ids",
                               std::string(reinterpret_cast<const char*>(ids.data()), used * 4));
}

}  // namespace

absl::StatusOr<TextPerplexity> MeasureTextPerplexity(const TextPerplexityRequest& r) {
  TextPerplexity out;
  std::shared_ptr<const model::LlamaModel> llama;
  // A GGUF file is checked first: a file that is not one is the likelier mistake.
  if (!r.gguf_path.empty()) {
    WQ_ASSIGN_OR_RETURN(llama, LoadModel(r, &out.plan_id));
  }
  WQ_ASSIGN_OR_RETURN(const std::string text, base::ReadFile(r.text_path));
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<model::Tokenizer> tokenizer,
                      model::Tokenizer::FromFile(r.model_dir + "/tokenizer.json"));
  if (llama == nullptr) {
    WQ_ASSIGN_OR_RETURN(llama, LoadModel(r, &out.plan_id));
  }
  WQ_ASSIGN_OR_RETURN(
      const std::vector<int32_t> ids,
      base::CutTokenRange(tokenizer->Encode(text, /*add_bos=*/false), r.tokens, "tokens"));
  out.text_tokens = ids.size();
  if (!r.logits_path.empty()) {
    WQ_RETURN_IF_ERROR(WriteFirstWindowLogits(*llama, ids, r.context, r.max_tokens, r.logits_path));
  }
  model::PerplexityOptions options;
  options.context = r.context;
  options.batch_size = r.batch;
  options.max_tokens = r.max_tokens;
  const int64_t used = r.max_tokens > 0 ? std::min<int64_t>(r.max_tokens, ids.size()) : ids.size();
  const int64_t effective_context = std::min(r.context, llama->config().max_position_embeddings);
  base::Progress progress(
      "eval", static_cast<double>(used / (effective_context - 1) * (effective_context - 1)),
      "tokens");
  options.progress = [&](int64_t, int64_t, int64_t tokens) { progress.Update(tokens); };
  absl::StatusOr<model::PerplexityResult> result = model::ComputePerplexity(*llama, ids, options);
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat(r.text_path, ": ", result.status().message()));
  }
  progress.Finish(absl::StrFormat("ppl %.6f", result->perplexity));
  out.result = *std::move(result);
  return out;
}

}  // namespace windquant::job
