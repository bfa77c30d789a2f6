// `windquant pretrain`: trains a byte-level BPE tokenizer and then a small
// LLaMA from scratch on a text file, and writes a Hugging Face model directory
// (config.json, model.safetensors, tokenizer.json, README.md, pretrain.json).
// scripts/default-model.sh uses it to build the default model on a fresh clone.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "common/base/files.h"
#include "common/base/location_check.h"
#include "common/base/status_macros.h"
#include "common/config/this_machine.h"
#include "common/model/bpe_trainer.h"
#include "common/model/pretrainer.h"
#include "common/model/tokenizer.h"

namespace windquant::cli {
namespace {

constexpr char kUsage[] =
    "usage: windquant pretrain --text FILE --out DIR [flags]\n\n"
    "Trains a byte-level BPE tokenizer and a small LLaMA (tied embeddings, GQA, SwiGLU)\n"
    "from scratch on FILE (UTF-8 text) and writes a Hugging Face model directory DIR\n"
    "(config.json, model.safetensors, tokenizer.json, README.md, pretrain.json).\n"
    "DIR is replaced atomically (written to DIR.tmp, then renamed). The last 5% of the\n"
    "token ids are held out; their perplexity is reported before and after training.\n\n"
    "flags:\n"
    "  --text FILE        training text (required)\n"
    "  --out DIR          output directory (required)\n"
    "  --vocab N          tokenizer vocabulary incl. 256 bytes + 2 specials (2048)\n"
    "  --tokenizer-bytes N  learn the tokenizer's merges from the first N bytes of\n"
    "                     FILE only (0 = all of it; the model trains on all of it)\n"
    "  --layers N         decoder layers (4)\n"
    "  --hidden N         hidden size (128)\n"
    "  --intermediate N   MLP size (0 = ~2.7 x hidden, rounded to 32)\n"
    "  --heads N          attention heads (4)\n"
    "  --kv-heads N       key/value heads, divides --heads (2)\n"
    "  --seq N            training window length in tokens (128)\n"
    "  --batch N          windows per step (8)\n"
    "  --steps N          optimizer steps (180)\n"
    "  --lr X             peak AdamW learning rate (3e-3); cosine to 10% after warmup\n"
    "  --warmup N         warmup steps (15)\n"
    "  --weight-decay X   AdamW weight decay on matrices/embeddings (0.1)\n"
    "  --seed N           seed of the init and of the window sampling (1234)\n"
    "  --threads N        intra-op threads (0 = library default)\n"
    "  --eval-windows N   held-out windows evaluated (0 = all)\n"
    "  --data-source S    recorded in README.md / pretrain.json\n"
    "  --stamp S          opaque settings stamp recorded in pretrain.json\n";

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

absl::Status RunPretrain(Args& args) {
  const std::string text_path = args.Get("text");
  const std::string out = args.Get("out");
  model::PretrainConfig c;
  WQ_ASSIGN_OR_RETURN(const int64_t vocab, args.GetInt("vocab", 2048));
  WQ_ASSIGN_OR_RETURN(const int64_t tokenizer_bytes, args.GetInt("tokenizer-bytes", 0));
  WQ_ASSIGN_OR_RETURN(c.layers, args.GetInt("layers", 4));
  WQ_ASSIGN_OR_RETURN(c.hidden, args.GetInt("hidden", 128));
  WQ_ASSIGN_OR_RETURN(c.intermediate, args.GetInt("intermediate", 0));
  WQ_ASSIGN_OR_RETURN(c.heads, args.GetInt("heads", 4));
  WQ_ASSIGN_OR_RETURN(c.kv_heads, args.GetInt("kv-heads", 2));
  WQ_ASSIGN_OR_RETURN(c.seq_len, args.GetInt("seq", 128));
  WQ_ASSIGN_OR_RETURN(c.batch, args.GetInt("batch", 8));
  WQ_ASSIGN_OR_RETURN(c.steps, args.GetInt("steps", 180));
  WQ_ASSIGN_OR_RETURN(c.lr, args.GetDouble("lr", 3e-3));
  WQ_ASSIGN_OR_RETURN(c.warmup_steps, args.GetInt("warmup", 15));
  WQ_ASSIGN_OR_RETURN(c.weight_decay, args.GetDouble("weight-decay", 0.1));
  WQ_ASSIGN_OR_RETURN(const int64_t seed, args.GetInt("seed", 1234));
  WQ_ASSIGN_OR_RETURN(const int64_t threads, args.GetInt("threads", 0));
  WQ_ASSIGN_OR_RETURN(c.eval_max_windows, args.GetInt("eval-windows", 0));
  model::PretrainedModelInfo info;
  info.data_source = args.Get("data-source", text_path);
  info.settings_stamp = args.Get("stamp");
  WQ_RETURN_IF_ERROR(args.Finish());
  if (text_path.empty()) return absl::InvalidArgumentError("--text: required (a UTF-8 text file)");
  if (out.empty()) return absl::InvalidArgumentError("--out: required (the model directory)");
  if (vocab < 258 || vocab > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocab: must be in [258, 1048576] (256 bytes + 2 specials), got ", vocab));
  }
  if (seed < 0) return absl::InvalidArgumentError("--seed: must be >= 0");
  if (tokenizer_bytes < 0) return absl::InvalidArgumentError("--tokenizer-bytes: must be >= 0");
  if (threads < 0 || threads > 1024)
    return absl::InvalidArgumentError("--threads: must be in [0, 1024]");
  WQ_RETURN_IF_ERROR(config::CheckThreadsFlag("--threads", threads));
  WQ_RETURN_IF_ERROR(base::CheckOutputParent(out, "--out"));
  c.seed = static_cast<uint64_t>(seed);
  c.threads = static_cast<int>(threads);
  c.vocab = vocab;  // provisional, for validating the flags before the slow part
  WQ_RETURN_IF_ERROR(c.Validate());

  WQ_ASSIGN_OR_RETURN(const std::string text, base::ReadFile(text_path));
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat(text_path, ": empty file"));

  // 1. Tokenizer.
  auto t0 = std::chrono::steady_clock::now();
  model::BpeTrainerOptions bpe_options;
  bpe_options.vocab_size = static_cast<int32_t>(vocab);
  model::BpeTrainer bpe(bpe_options);
  // A prefix is enough for the merges of a small vocabulary and much faster.
  bpe.AddText(tokenizer_bytes > 0 && static_cast<size_t>(tokenizer_bytes) < text.size()
                  ? std::string_view(text).substr(0, static_cast<size_t>(tokenizer_bytes))
                  : std::string_view(text));
  WQ_ASSIGN_OR_RETURN(info.tokenizer_json, bpe.Train());
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<model::Tokenizer> tokenizer,
                      model::Tokenizer::FromJson(info.tokenizer_json, "trained tokenizer.json"));
  const std::vector<int32_t> ids = tokenizer->Encode(text);
  std::fprintf(stderr,
               "pretrain: tokenizer: %d merges, vocab %d; %s: %zu bytes -> %zu tokens "
               "(%.2f bytes/token) in %.1f s\n",
               bpe.num_merges(), tokenizer->vocab_size(), text_path.c_str(), text.size(),
               ids.size(), static_cast<double>(text.size()) / std::max<size_t>(ids.size(), 1),
               SecondsSince(t0));

  // 2. Model.
  c.vocab = tokenizer->vocab_size();
  c.bos_id = tokenizer->bos_id();
  c.eos_id = tokenizer->eos_id();
  t0 = std::chrono::steady_clock::now();
  WQ_ASSIGN_OR_RETURN(model::PretrainResult result, model::Pretrainer(c).Train(ids));
  WQ_RETURN_IF_ERROR(model::WritePretrainedModel(out, c, result, info));
  std::printf(
      "pretrain: wrote %s: %d steps, %lld tokens in %.0f s; train loss %.3f -> %.3f; held-out "
      "perplexity untrained %.1f -> trained %.1f\n",
      out.c_str(), static_cast<int>(c.steps), static_cast<long long>(result.tokens_trained),
      SecondsSince(t0), result.first_loss, result.final_loss, result.untrained_held_out_ppl,
      result.held_out_ppl);
  return absl::OkStatus();
}

}  // namespace

WQ_REGISTER_COMMAND(pretrain, "pretrain",
                    "train a small LLaMA + BPE tokenizer from scratch on a text file", kUsage,
                    RunPretrain);

}  // namespace windquant::cli
