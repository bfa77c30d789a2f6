// `windquant eval`: perplexity of a Hugging Face LLaMA directory on a text
// file, with the protocol of common/model/perplexity.h (BOS + chunks of
// context-1 tokens, non-overlapping, last partial chunk dropped), optionally
// with a plan applied (job/text_perplexity.h).

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/command.h"
#include "common/base/location_check.h"
#include "common/base/status_macros.h"
#include "common/config/run_config.h"
#include "common/config/this_machine.h"
#include "common/model/torch_threads.h"
#include "job/text_perplexity.h"

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
    "  --tokens B:E       use only token ids [B, E) of the text (E 0 = the end; default\n"
    "                     0:0, the whole text), as a run config's text roles do\n"
    "  --max-tokens N     then only the first N of those tokens (0 = all)\n"
    "  --batch N          windows per forward pass (8)\n"
    "  --threads N        intra-op threads (0 = library default)\n"
    "  --device D         where the model computes: cpu, cuda or cuda:N (cpu; with --plan\n"
    "                     the config's model.device)\n"
    "  --dtype T          what it computes in: float32 or bfloat16 (bfloat16 on cuda, else\n"
    "                     float32; with --plan the config's model.compute_dtype)\n"
    "  --json             print one JSON object instead of text\n"
    "  --plan PLAN        apply a quantization plan (plan.json / plan.bin) first; needs\n"
    "                     --config FILE, whose unit table (cache or fitted) the plan is\n"
    "                     checked against; --model / --text / --context default to the\n"
    "                     config's model.dir / held-out text (evaluation.heldout: file\n"
    "                     and token range; --tokens alone: another range of that file) /\n"
    "                     evaluation.context\n"
    "  --quantized DIR    the packed quantized checkpoint of `windquant export` (DIR/quantized):\n"
    "                     its codes, scales and INT8 salient values decoded to the weights\n"
    "                     eval --plan applies, one layer at a time inside each forward\n"
    "                     (instead of --model; tokenizer from DIR)\n"
    "  --gguf FILE        a GGUF file (`windquant export --format gguf`'s DIR/gguf/model.gguf):\n"
    "                     every tensor decoded by windquant's own decoder (q/k rows put\n"
    "                     back), the whole model in float32 (instead of --model; tokenizer\n"
    "                     from tokenizer.json beside FILE)\n"
    "  --logits-out F     also write the ids the perplexity reads (int32, no BOS) to F.ids\n"
    "                     and the first window's float32 logits [context, vocab] to F (raw)\n"
    "  --config FILE      run config (YAML), with --plan\n"
    "  --set K=V          config override (repeatable), with --config\n";

void Print(const job::TextPerplexityRequest& q, const job::TextPerplexity& p, bool json) {
  const model::PerplexityResult& r = p.result;
  if (json) {
    nlohmann::json j = {
        {"model", q.model_dir},        {"text", q.text_path},  {"context", r.context},
        {"windows", r.windows},        {"tokens", r.tokens},   {"nll", r.nll},
        {"perplexity", r.perplexity},  {"seconds", r.seconds}, {"tokens_per_s", r.tokens_per_s},
        {"text_tokens", p.text_tokens}};
    if (!p.plan_id.empty()) j["plan_id"] = p.plan_id;
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("model        %s\ntext         %s (%zu tokens)\n", q.model_dir.c_str(),
              q.text_path.c_str(), p.text_tokens);
  std::printf("context      %lld (%lld windows)\n", static_cast<long long>(r.context),
              static_cast<long long>(r.windows));
  std::printf("tokens       %lld predicted\n", static_cast<long long>(r.tokens));
  std::printf("mean NLL     %.7f nats/token\n", r.nll);
  std::printf("perplexity   %.6f\n", r.perplexity);
  std::printf("throughput   %.0f tokens/s (%.2f s)\n", r.tokens_per_s, r.seconds);
}

// --dtype's value, checked before anything is opened (as --device is).
absl::StatusOr<model::ComputeDtype> ParseDtypeFlag(const std::string& value) {
  const std::optional<model::ComputeDtype> dtype = model::ParseComputeDtype(value);
  if (!dtype.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype: ", value, ", must be float32 or bfloat16"));
  }
  return *dtype;
}

// "B:E" -> {B, E}: non-negative, and E > B unless E is 0 (the end).
absl::StatusOr<std::vector<int64_t>> ParseTokenRange(const std::string& v) {
  const std::vector<std::string> parts = absl::StrSplit(v, ':');
  int64_t b = 0, e = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &b) || !absl::SimpleAtoi(parts[1], &e) ||
      b < 0 || e < 0 || (e != 0 && e <= b)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tokens: expected BEGIN:END with 0 <= BEGIN < END (END 0 = the end), got '", v, "'"));
  }
  return std::vector<int64_t>{b, e};
}

// --device and --dtype over `compute` (the config's, or the defaults without one), each
// checked before any work; `default_dtype`: without --dtype, the device's default dtype.
absl::Status ApplyComputeFlags(const std::string& device, const std::string& dtype,
                               bool default_dtype, model::ComputeOptions* compute) {
  if (!device.empty()) {
    WQ_RETURN_IF_ERROR(config::CheckDeviceFlag("--device", device));
    compute->device = device;
  }
  if (default_dtype) compute->dtype = model::DefaultComputeDtype(compute->device);
  if (!dtype.empty()) {
    WQ_ASSIGN_OR_RETURN(compute->dtype, ParseDtypeFlag(dtype));
  }
  return absl::OkStatus();
}

// --quantized DIR / --gguf FILE instead of --model: the folder the tokenizer comes from,
// and the flag that names it in errors.
absl::Status ApplyFileFlags(job::TextPerplexityRequest* r, std::string* model_flag) {
  job::TextPerplexityRequest& q = *r;
  if (!q.quantized_dir.empty()) {
    if (!q.model_dir.empty() || !q.plan_path.empty()) {
      return absl::InvalidArgumentError("--quantized DIR: not with --model or --plan");
    }
    q.model_dir = q.quantized_dir;
    *model_flag = "--quantized";
  }
  if (!q.gguf_path.empty()) {
    if (!q.model_dir.empty() || !q.plan_path.empty() || !q.quantized_dir.empty()) {
      return absl::InvalidArgumentError("--gguf FILE: not with --model, --plan or --quantized");
    }
    q.model_dir = std::filesystem::path(q.gguf_path).parent_path().string();
    if (q.model_dir.empty()) q.model_dir = ".";
    *model_flag = "--gguf's folder";
  }
  return absl::OkStatus();
}

absl::Status RunEval(Args& args) {
  job::TextPerplexityRequest q;
  q.model_dir = args.Get("model");
  std::string model_flag = "--model";  // what names the model folder in errors
  q.text_path = args.Get("text");
  q.plan_path = args.Get("plan");
  q.quantized_dir = args.Get("quantized");
  q.gguf_path = args.Get("gguf");
  q.logits_path = args.Get("logits-out");
  const std::string config_path = args.Get("config");
  const std::vector<std::string> sets = args.GetAll("set");
  const bool context_given = args.Has("context");
  WQ_ASSIGN_OR_RETURN(q.context, args.GetInt("context", q.context));
  WQ_ASSIGN_OR_RETURN(q.max_tokens, args.GetInt("max-tokens", 0));
  const std::string token_range = args.Get("tokens");
  WQ_ASSIGN_OR_RETURN(q.batch, args.GetInt("batch", q.batch));
  WQ_ASSIGN_OR_RETURN(const int64_t threads, args.GetInt("threads", 0));
  const std::string device = args.Get("device");
  const std::string dtype = args.Get("dtype");
  const bool json = args.Has("json");
  WQ_RETURN_IF_ERROR(args.Finish());
  // --plan: the model of the run config, whose flags default to its keys.
  config::RunConfig cfg;
  if (!q.plan_path.empty()) {
    if (config_path.empty()) return absl::InvalidArgumentError("--plan needs --config FILE");
    WQ_ASSIGN_OR_RETURN(cfg, config::LoadRunConfig(config_path, sets));
    if (!q.model_dir.empty()) cfg.model.dir = q.model_dir;
    if (q.model_dir.empty()) model_flag = "model.dir";
    q.model_dir = cfg.model.dir;
    if (q.text_path.empty()) {  // --tokens alone: another range of the held-out file
      q.text_path = cfg.evaluation.heldout.text;
      q.tokens = cfg.evaluation.heldout.tokens;
    }
    if (!context_given) q.context = cfg.evaluation.context;
    WQ_RETURN_IF_ERROR(ApplyComputeFlags(device, dtype, false, &cfg.model.compute));
    WQ_RETURN_IF_ERROR(config::CheckThisMachine(cfg.model));
    q.compute = cfg.model.compute;
    q.config = &cfg;
  } else if (!config_path.empty() || !sets.empty()) {
    return absl::InvalidArgumentError("--config and --set are only used with --plan");
  } else {
    WQ_RETURN_IF_ERROR(ApplyComputeFlags(device, dtype, true, &q.compute));
  }
  WQ_RETURN_IF_ERROR(ApplyFileFlags(&q, &model_flag));
  if (!token_range.empty()) {
    WQ_ASSIGN_OR_RETURN(q.tokens, ParseTokenRange(token_range));
  }
  if (q.model_dir.empty()) return absl::InvalidArgumentError("--model DIR is required");
  if (q.text_path.empty()) return absl::InvalidArgumentError("--text FILE is required");
  if (q.context < 2)
    return absl::InvalidArgumentError(absl::StrCat("--context: must be >= 2, got ", q.context));
  if (q.batch < 1)
    return absl::InvalidArgumentError(absl::StrCat("--batch: must be >= 1, got ", q.batch));
  if (q.max_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-tokens: must be >= 0, got ", q.max_tokens));
  }
  if (threads < 0)
    return absl::InvalidArgumentError(absl::StrCat("--threads: must be >= 0, got ", threads));
  WQ_RETURN_IF_ERROR(config::CheckThreadsFlag("--threads", threads));
  model::SetTorchThreads(static_cast<int>(threads));
  WQ_RETURN_IF_ERROR(base::CheckInputDir(q.model_dir, model_flag));
  q.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  WQ_ASSIGN_OR_RETURN(const job::TextPerplexity p, job::MeasureTextPerplexity(q));
  Print(q, p, json);
  return absl::OkStatus();
}

}  // namespace

WQ_REGISTER_COMMAND(eval, "eval", "perplexity of a model on a text file", kUsage, RunEval);

}  // namespace windquant::cli
