// `windquant synth`: a random LLaMA checkpoint with the real layer shapes of
// LLaMA-3.2-1B / LLaMA-3-8B / LLaMA-3-70B (common/model/synth_checkpoint.h),
// for measuring speed and memory without downloading a model.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "common/base/location_check.h"
#include "common/base/progress.h"
#include "common/base/status_macros.h"
#include "common/model/synth_checkpoint.h"

namespace windquant::cli {
namespace {

constexpr char kUsage[] =
    "usage: windquant synth --shape SHAPE --out DIR [flags]\n\n"
    "Writes a random LLaMA checkpoint with the real layer shapes of SHAPE to DIR, in\n"
    "Hugging Face layout: BF16, sharded safetensors + model.safetensors.index.json,\n"
    "config.json, and the tokenizer of --tokenizer DIR (the embeddings are sized to its\n"
    "vocabulary; config.json says so under \"windquant_synth\"). Weights are seeded noise\n"
    "with a realistic scale (N(0, 0.02^2), outlier channels): only speed and memory mean\n"
    "anything on the result. Written block by block (a few MB in memory at a time).\n\n"
    "shapes:\n"
    "  llama3.2-1b   hidden 2048, intermediate 8192, 32/8 heads, 16 layers, tied embeddings,\n"
    "                rope llama3 scaling\n"
    "  llama3-8b     hidden 4096, intermediate 14336, 32/8 heads, 32 layers\n"
    "  llama3-70b    hidden 8192, intermediate 28672, 64/8 heads, 80 layers\n\n"
    "flags:\n"
    "  --shape SHAPE      one of the shapes above (required)\n"
    "  --out DIR          output directory (required)\n"
    "  --layers N         write only the first N decoder layers (default: all)\n"
    "  --tokenizer DIR    directory with tokenizer.json (.cache/default-model)\n"
    "  --seed N           seed (0); a tensor depends only on the seed and its name\n"
    "  --shard-mb N       largest shard in MiB (1024)\n";

absl::Status RunSynth(Args& args) {
  model::SynthOptions o;
  o.shape = args.Get("shape");
  o.out_dir = args.Get("out");
  o.tokenizer_dir = args.Get("tokenizer", ".cache/default-model");
  WQ_ASSIGN_OR_RETURN(o.layers, args.GetInt("layers", -1));
  WQ_ASSIGN_OR_RETURN(const int64_t seed, args.GetInt("seed", 0));
  WQ_ASSIGN_OR_RETURN(const int64_t shard_mb, args.GetInt("shard-mb", 1024));
  WQ_RETURN_IF_ERROR(args.Finish());
  if (o.shape.empty()) return absl::InvalidArgumentError("--shape: required (see --help)");
  if (o.out_dir.empty()) return absl::InvalidArgumentError("--out: required (see --help)");
  if (seed < 0) return absl::InvalidArgumentError("--seed: must be >= 0");
  if (shard_mb < 1) return absl::InvalidArgumentError("--shard-mb: must be >= 1");
  WQ_RETURN_IF_ERROR(base::CheckOutputParent(o.out_dir, "--out"));
  WQ_RETURN_IF_ERROR(base::CheckInputDir(o.tokenizer_dir, "--tokenizer"));
  o.seed = static_cast<uint64_t>(seed);
  o.shard_bytes = shard_mb << 20;
  std::unique_ptr<base::Progress> progress;
  o.progress = [&](int64_t done, int64_t total) {
    if (progress == nullptr) {
      progress = std::make_unique<base::Progress>("synth", static_cast<double>(total) / 1e6, "MB");
    }
    progress->Update(static_cast<double>(done) / 1e6);
  };
  WQ_ASSIGN_OR_RETURN(const model::SynthResult r, model::WriteSynthCheckpoint(o));
  if (progress != nullptr) progress->Finish();
  std::printf(
      "wrote %s: %s, %lld layers, vocab %lld, %zu shard(s), %.3f GB BF16, %.1fM decoder "
      "linear weights\n",
      o.out_dir.c_str(), o.shape.c_str(), static_cast<long long>(r.config.num_hidden_layers),
      static_cast<long long>(r.config.vocab_size), r.shards.size(), r.total_bytes / 1e9,
      r.decoder_linear_weights / 1e6);
  return absl::OkStatus();
}

}  // namespace

WQ_REGISTER_COMMAND(synth, "synth", "write a random LLaMA checkpoint with real layer shapes",
                    kUsage, RunSynth);

}  // namespace windquant::cli
