#include "common/model/synth_checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"
#include "common/base/split_mix64.h"
#include "common/base/status_macros.h"
#include "common/model/llama_weights.h"
#include "common/model/safetensors_stream_writer.h"
#include "common/model/tokenizer.h"

namespace windquant::model {
namespace {

constexpr double kWeightStd = 0.02;
constexpr double kOutlierChannelFraction = 0.005;
constexpr double kOutlierEntryFraction = 0.001;
constexpr double kOutlierEntryScale = 4.0;
constexpr double kNormStd = 0.05;
constexpr int64_t kBlockValues = 1 << 20;
constexpr int64_t kRealVocab = 128256;

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

enum class Kind { kLinear, kEmbedding, kNorm };

struct PlannedTensor {
  StreamTensor info;
  Kind kind;
};

// Writes one tensor block by block (rows at a time) as BF16.
absl::Status WriteTensor(const PlannedTensor& t, uint64_t seed, SafetensorsStreamWriter* w,
                         const std::function<void(int64_t)>& wrote) {
  const uint64_t base = base::SplitMix64(seed ^ Fnv1a(t.info.name));
  const int64_t rows = t.info.shape[0];
  const int64_t cols = t.info.shape.size() > 1 ? t.info.shape[1] : 1;
  at::Tensor col_scale;
  if (t.kind == Kind::kLinear) {
    // Outlier input channels: a few columns of larger norm.
    std::mt19937_64 rng(base::SplitMix64(base ^ 0x5eedull));
    std::uniform_real_distribution<double> u(0.0, 1.0);
    col_scale = at::ones({1, cols}, at::kFloat);
    float* cs = col_scale.data_ptr<float>();
    for (int64_t j = 0; j < cols; ++j) {
      if (u(rng) < kOutlierChannelFraction) cs[j] = static_cast<float>(4.0 + 4.0 * u(rng));
    }
  }
  const int64_t block_rows = std::max<int64_t>(1, kBlockValues / cols);
  for (int64_t r0 = 0, b = 0; r0 < rows; r0 += block_rows, ++b) {
    const int64_t r = std::min(block_rows, rows - r0);
    at::Generator gen =
        at::make_generator<at::CPUGeneratorImpl>(base::SplitMix64(base + static_cast<uint64_t>(b)));
    at::Tensor x;
    switch (t.kind) {
      case Kind::kLinear: {
        x = at::randn({r, cols}, gen, at::kFloat) * kWeightStd;
        const at::Tensor spikes = at::rand({r, cols}, gen, at::kFloat) < kOutlierEntryFraction;
        x = at::where(spikes, x * kOutlierEntryScale, x) * col_scale;
        break;
      }
      case Kind::kEmbedding:
        x = at::randn({r, cols}, gen, at::kFloat) * kWeightStd;
        break;
      case Kind::kNorm:
        x = 1.0 + at::randn({r}, gen, at::kFloat) * kNormStd;
        break;
    }
    const at::Tensor h = x.to(at::kBFloat16).contiguous();
    WQ_RETURN_IF_ERROR(w->Append(
        std::string_view(static_cast<const char*>(h.data_ptr()), h.numel() * h.element_size())));
    wrote(h.numel() * h.element_size());
  }
  return absl::OkStatus();
}

std::vector<PlannedTensor> PlanTensors(const LlamaConfig& c) {
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim, in = c.intermediate_size;
  const std::array<std::vector<int64_t>, kNumMatrices> shapes = {
      std::vector<int64_t>{q, h}, {kv, h}, {kv, h}, {h, q}, {in, h}, {in, h}, {h, in}};
  std::vector<PlannedTensor> out;
  out.push_back({{"model.embed_tokens.weight", Dtype::kBF16, {c.vocab_size, h}}, Kind::kEmbedding});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    for (int m = 0; m < kNumMatrices; ++m) {
      out.push_back(
          {{LinearTensorName(l, static_cast<Matrix>(m)), Dtype::kBF16, shapes[m]}, Kind::kLinear});
    }
    const std::string p = absl::StrCat("model.layers.", l, ".");
    out.push_back({{p + "input_layernorm.weight", Dtype::kBF16, {h}}, Kind::kNorm});
    out.push_back({{p + "post_attention_layernorm.weight", Dtype::kBF16, {h}}, Kind::kNorm});
  }
  out.push_back({{"model.norm.weight", Dtype::kBF16, {h}}, Kind::kNorm});
  if (!c.tie_word_embeddings) {
    out.push_back({{"lm_head.weight", Dtype::kBF16, {c.vocab_size, h}}, Kind::kEmbedding});
  }
  return out;
}

}  // namespace

absl::StatusOr<LlamaConfig> SynthShapeConfig(const std::string& shape) {
  LlamaConfig c;
  c.vocab_size = kRealVocab;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.torch_dtype = "bfloat16";
  c.bos_token_id = 128000;
  c.eos_token_ids = {128001};
  if (shape == "llama3.2-1b") {
    c.hidden_size = 2048;
    c.intermediate_size = 8192;
    c.num_hidden_layers = 16;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 8;
    c.tie_word_embeddings = true;
    c.max_position_embeddings = 131072;
    c.rope_scaling = RopeScaling{"llama3", 32.0, 1.0, 4.0, 8192};
  } else if (shape == "llama3-8b") {
    c.hidden_size = 4096;
    c.intermediate_size = 14336;
    c.num_hidden_layers = 32;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 8;
    c.max_position_embeddings = 8192;
  } else if (shape == "llama3-70b") {
    c.hidden_size = 8192;
    c.intermediate_size = 28672;
    c.num_hidden_layers = 80;
    c.num_attention_heads = 64;
    c.num_key_value_heads = 8;
    c.max_position_embeddings = 8192;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--shape: unknown shape \"", shape,
                                                   "\" (llama3.2-1b, llama3-8b or llama3-70b)"));
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  return c;
}

namespace {

using Shards = std::vector<std::vector<const PlannedTensor*>>;

// Tensors in order, a new shard before one would exceed shard_bytes; *total = all bytes.
Shards ShardTensors(const std::vector<PlannedTensor>& tensors, int64_t shard_bytes,
                    uint64_t* total) {
  Shards shards(1);
  uint64_t in_shard = 0;
  *total = 0;
  for (const PlannedTensor& t : tensors) {
    const uint64_t n = t.info.num_bytes();
    if (!shards.back().empty() && in_shard + n > static_cast<uint64_t>(shard_bytes)) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&t);
    in_shard += n;
    *total += n;
  }
  return shards;
}

// Writes the shards as model-0000i-of-0000n.safetensors under `out` (names appended to
// result->shards); returns the index's weight_map (tensor name -> shard file).
absl::StatusOr<nlohmann::json> WriteShards(const Shards& shards, const std::filesystem::path& out,
                                           uint64_t total, const SynthOptions& o,
                                           SynthResult* result) {
  nlohmann::json weight_map = nlohmann::json::object();
  int64_t written = 0;
  auto wrote = [&](int64_t n) {
    written += n;
    if (o.progress) o.progress(written, static_cast<int64_t>(total));
  };
  try {
    c10::NoGradGuard no_grad;
    for (size_t s = 0; s < shards.size(); ++s) {
      const std::string name =
          absl::StrFormat("model-%05d-of-%05d.safetensors", s + 1, shards.size());
      std::vector<StreamTensor> infos;
      for (const PlannedTensor* t : shards[s]) {
        infos.push_back(t->info);
        weight_map[t->info.name] = name;
      }
      WQ_ASSIGN_OR_RETURN(auto writer,
                          SafetensorsStreamWriter::Open((out / name).string(), std::move(infos)));
      for (const PlannedTensor* t : shards[s]) {
        WQ_RETURN_IF_ERROR(WriteTensor(*t, o.seed, writer.get(), wrote));
      }
      WQ_RETURN_IF_ERROR(writer->Finish());
      result->shards.push_back(name);
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("synth: ", e.what_without_backtrace()));
  }
  return weight_map;
}

// config.json: the model's config plus a "windquant_synth" note on what the weights are.
nlohmann::json SynthConfigJson(const LlamaConfig& c, const SynthOptions& o, int64_t full_layers,
                               const std::string& tok_path) {
  nlohmann::json config = nlohmann::json::parse(c.ToJson());
  config["windquant_synth"] = {
      {"shape", o.shape},
      {"layers_of_full_model", full_layers},
      {"seed", o.seed},
      {"weights",
       "random: linears N(0, 0.02^2) with 0.5% outlier input channels x4..8 and 0.1% entries x4; "
       "embeddings N(0, 0.02^2); RMSNorm weights 1 + N(0, 0.05^2). Only speed and memory mean "
       "anything on this model."},
      {"vocab",
       absl::StrCat("vocab_size ", c.vocab_size, " from ", tok_path, " (the real model has ",
                    kRealVocab, "): embeddings", c.tie_word_embeddings ? "" : " and lm_head",
                    " are sized to this tokenizer")}};
  return config;
}

// tokenizer.json, and the tokenizer's config files where tok_dir has them.
absl::Status CopyTokenizerFiles(const std::filesystem::path& tok_dir,
                                const std::filesystem::path& out, const std::string& tok_json) {
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((out / "tokenizer.json").string(), tok_json));
  for (const char* f : {"tokenizer_config.json", "special_tokens_map.json"}) {
    const std::string src = (tok_dir / f).string();
    if (!base::PathExists(src)) continue;
    WQ_ASSIGN_OR_RETURN(const std::string bytes, base::ReadFile(src));
    WQ_RETURN_IF_ERROR(base::WriteFileAtomic((out / f).string(), bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SynthResult> WriteSynthCheckpoint(const SynthOptions& o) {
  WQ_ASSIGN_OR_RETURN(LlamaConfig c, SynthShapeConfig(o.shape));
  const int64_t full_layers = c.num_hidden_layers;
  if (o.layers == 0 || o.layers < -1 || o.layers > full_layers) {
    return absl::InvalidArgumentError(absl::StrCat("--layers: must be in [1, ", full_layers,
                                                   "] for ", o.shape, ", got ", o.layers));
  }
  if (o.layers > 0) c.num_hidden_layers = o.layers;
  if (o.shard_bytes < 1) return absl::InvalidArgumentError("shard_bytes: must be >= 1");
  if (o.out_dir.empty()) return absl::InvalidArgumentError("--out: required");
  const std::filesystem::path tok_dir(o.tokenizer_dir);
  const std::string tok_path = (tok_dir / "tokenizer.json").string();
  WQ_ASSIGN_OR_RETURN(const std::string tok_json, base::ReadFile(tok_path));
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, Tokenizer::FromJson(tok_json, tok_path));
  c.vocab_size = tok->vocab_size();
  if (tok->bos_id() >= 0) c.bos_token_id = tok->bos_id();
  if (tok->eos_id() >= 0) c.eos_token_ids = {tok->eos_id()};

  const std::vector<PlannedTensor> tensors = PlanTensors(c);
  uint64_t total = 0;
  const Shards shards = ShardTensors(tensors, o.shard_bytes, &total);
  SynthResult result;
  result.config = c;
  result.total_bytes = static_cast<int64_t>(total);
  for (const PlannedTensor& t : tensors) {
    if (t.kind == Kind::kLinear) result.decoder_linear_weights += t.info.num_bytes() / 2;
  }
  const std::filesystem::path out(o.out_dir);
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) return absl::InternalError(absl::StrCat(o.out_dir, ": cannot create: ", ec.message()));

  WQ_ASSIGN_OR_RETURN(const nlohmann::json weight_map, WriteShards(shards, out, total, o, &result));
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  WQ_RETURN_IF_ERROR(
      base::WriteFileAtomic((out / "model.safetensors.index.json").string(), index.dump(2) + "\n"));
  const nlohmann::json config = SynthConfigJson(c, o, full_layers, tok_path);
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic((out / "config.json").string(), config.dump(2) + "\n"));
  WQ_RETURN_IF_ERROR(CopyTokenizerFiles(tok_dir, out, tok_json));
  return result;
}

}  // namespace windquant::model
