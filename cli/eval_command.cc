// `windquant eval`: perplexity of a Hugging Face LLaMA directory on a text
// file, with the protocol of common/model/perplexity.h (BOS + chunks of
// context-1 tokens, non-overlapping, last partial chunk dropped).
#include <ATen/Parallel.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "cli/open_session.h"
#include "common/base/files.h"
#include "common/base/progress.h"
#include "common/base/status_macros.h"
#include "common/config/run_config.h"
#include "common/model/checkpoint.h"
#include "common/model/llama_model.h"
#include "common/model/perplexity.h"
#include "common/model/tokenizer.h"
#include "common/quant/plan_io.h"
#include "common/quant/quantization_session.h"

namespace windquant::cli {
namespace {

constexpr char kUsage[] =
    "usage: windquant eval --model DIR --text FILE [flags]\n\n"
    "Perplexity of the LLaMA model in DIR (config.json, model.safetensors[.index.json],\n"
    "tokenizer.json) on FILE. The text is encoded without BOS and cut into consecutive,\n"
    "non-overlapping chunks of N-1 tokens (last partial chunk dropped); each window is\n"
    "BOS + chunk and all N-1 chunk tokens are predicted. PPL = exp(mean NLL).\n\n"
    "flags:\n"
    "  --model DIR        Hugging Face model directory (required)\n"
    "  --text FILE        text to evaluate (required)\n"
    "  --context N        window length N incl. BOS (2048; clamped to\n"
    "                     max_position_embeddings)\n"
    "  --max-tokens N     use only the first N tokens of the text (0 = all)\n"
    "  --batch N          windows per forward pass (8)\n"
    "  --threads N        intra-op threads (0 = library default)\n"
    "  --json             print one JSON object instead of text\n"
    "  --plan PLAN        apply a quantization plan (plan.json / plan.bin) first; needs\n"
    "                     --config FILE, whose unit table (cache or fitted) the plan is\n"
    "                     checked against; --model / --text / --context default to the\n"
    "                     config's model.dir / evaluation.text / evaluation.context\n"
    "  --config FILE      run config (YAML), with --plan\n";

absl::Status RunEval(Args& args) {
  std::string model_dir = args.Get("model");
  std::string text_path = args.Get("text");
  const std::string plan_path = args.Get("plan");
  const std::string config_path = args.Get("config");
  const bool context_given = args.Has("context");
  WQ_ASSIGN_OR_RETURN(int64_t context, args.GetInt("context", 2048));
  WQ_ASSIGN_OR_RETURN(const int64_t max_tokens, args.GetInt("max-tokens", 0));
  WQ_ASSIGN_OR_RETURN(const int64_t batch, args.GetInt("batch", 8));
  WQ_ASSIGN_OR_RETURN(const int64_t threads, args.GetInt("threads", 0));
  const bool json = args.Has("json");
  WQ_RETURN_IF_ERROR(args.Finish());
  // --plan: the model of the run config with the plan applied (QuantizationSession).
  std::unique_ptr<quant::QuantizationSession> session;
  std::string plan_id;
  if (!plan_path.empty()) {
    if (config_path.empty()) return absl::InvalidArgumentError("--plan needs --config FILE");
    WQ_ASSIGN_OR_RETURN(config::RunConfig cfg, config::LoadRunConfig(config_path));
    if (!model_dir.empty()) cfg.model.dir = model_dir;
    model_dir = cfg.model.dir;
    if (text_path.empty()) text_path = cfg.evaluation.text;
    if (!context_given) context = cfg.evaluation.context;
    WQ_ASSIGN_OR_RETURN(session, OpenSession(cfg, /*use_cache=*/true, /*load_eval_text=*/false));
  } else if (!config_path.empty()) {
    return absl::InvalidArgumentError("--config is only used with --plan");
  }
  if (model_dir.empty()) return absl::InvalidArgumentError("--model DIR is required");
  if (text_path.empty()) return absl::InvalidArgumentError("--text FILE is required");
  if (context < 2)
    return absl::InvalidArgumentError(absl::StrCat("--context: must be >= 2, got ", context));
  if (batch < 1)
    return absl::InvalidArgumentError(absl::StrCat("--batch: must be >= 1, got ", batch));
  if (max_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--max-tokens: must be >= 0, got ", max_tokens));
  }
  if (threads < 0)
    return absl::InvalidArgumentError(absl::StrCat("--threads: must be >= 0, got ", threads));
  if (threads > 0) at::set_num_threads(static_cast<int>(threads));

  WQ_ASSIGN_OR_RETURN(const std::string text, base::ReadFile(text_path));
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<model::Tokenizer> tokenizer,
                      model::Tokenizer::FromFile(model_dir + "/tokenizer.json"));
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<model::Checkpoint> checkpoint,
                      model::Checkpoint::Open(model_dir));
  const std::vector<int32_t> ids = tokenizer->Encode(text, /*add_bos=*/false);
  std::shared_ptr<const model::LlamaModel> llama;
  if (session != nullptr) {
    WQ_ASSIGN_OR_RETURN(const quant::Plan plan, quant::ReadPlanFile(plan_path, session->table()));
    plan_id = plan.plan_id;
    // The session's weights with the plan applied a layer at a time (no float copy).
    WQ_ASSIGN_OR_RETURN(llama, session->PlanModel(plan.actions));
    std::fprintf(stderr, "plan %s: effective bits %.4f\n", plan_id.c_str(),
                 plan.Totals(session->table()).effective_bits);
  } else {
    WQ_ASSIGN_OR_RETURN(model::LlamaWeights weights, checkpoint->LoadWeights(model::LoadRequest{}));
    try {
      llama = std::make_shared<const model::LlamaModel>(
          std::move(weights), at::hasCUDA() ? at::Device(at::kCUDA) : at::kCPU);
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(model_dir, ": cannot build the model: ", e.what()));
    }
  }
  model::PerplexityOptions options;
  options.context = context;
  options.batch_size = batch;
  options.max_tokens = max_tokens;
  const int64_t used = max_tokens > 0 ? std::min<int64_t>(max_tokens, ids.size()) : ids.size();
  const int64_t effective_context = std::min(context, llama->config().max_position_embeddings);
  base::Progress progress(
      "eval", static_cast<double>(used / (effective_context - 1) * (effective_context - 1)),
      "tokens");
  options.progress = [&](int64_t, int64_t, int64_t tokens) { progress.Update(tokens); };
  absl::StatusOr<model::PerplexityResult> r = model::ComputePerplexity(*llama, ids, options);
  if (!r.ok())
    return absl::Status(r.status().code(), absl::StrCat(text_path, ": ", r.status().message()));
  progress.Finish(absl::StrFormat("ppl %.6f", r->perplexity));

  if (json) {
    nlohmann::json j = {
        {"model", model_dir},          {"text", text_path},     {"context", r->context},
        {"windows", r->windows},       {"tokens", r->tokens},   {"nll", r->nll},
        {"perplexity", r->perplexity}, {"seconds", r->seconds}, {"tokens_per_s", r->tokens_per_s},
        {"text_tokens", ids.size()}};
    if (!plan_id.empty()) j["plan_id"] = plan_id;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("model        %s\ntext         %s (%zu tokens)\n", model_dir.c_str(),
                text_path.c_str(), ids.size());
    std::printf("context      %lld (%lld windows)\n", static_cast<long long>(r->context),
                static_cast<long long>(r->windows));
    std::printf("tokens       %lld predicted\n", static_cast<long long>(r->tokens));
    std::printf("mean NLL     %.7f nats/token\n", r->nll);
    std::printf("perplexity   %.6f\n", r->perplexity);
    std::printf("throughput   %.0f tokens/s (%.2f s)\n", r->tokens_per_s, r->seconds);
  }
  return absl::OkStatus();
}

}  // namespace

WQ_REGISTER_COMMAND(eval, "eval", "perplexity of a model on a text file", kUsage, RunEval);

}  // namespace windquant::cli
