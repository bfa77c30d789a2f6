#include "common/export/gguf_llama.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"

namespace windquant::exporter::gguf {
namespace {

constexpr const char* kLinearNames[model::kNumMatrices] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

absl::StatusOr<int64_t> Int(const GgufFile& f, const std::string& key) {
  WQ_ASSIGN_OR_RETURN(const double v, f.Number(key));
  return static_cast<int64_t>(v);
}

// Tensor `name` decoded as float32 with Hugging Face shape `shape` ([out, in] or [n]).
absl::StatusOr<at::Tensor> Load(const GgufFile& f, const std::string& name,
                                const std::vector<int64_t>& shape) {
  const TensorInfo* t = f.Find(name);
  if (t == nullptr) return absl::NotFoundError(absl::StrCat(f.path(), ": no tensor ", name));
  std::vector<int64_t> dims(shape.rbegin(), shape.rend());  // ggml lists the row length first
  if (t->dims != dims) {
    return absl::DataLossError(absl::StrCat(f.path(), ": tensor ", name, " has dims [",
                                            absl::StrJoin(t->dims, ", "), "], expected [",
                                            absl::StrJoin(dims, ", "), "]"));
  }
  WQ_ASSIGN_OR_RETURN(std::vector<float> values, f.Decode(*t));
  at::Tensor out = at::empty(shape, at::kFloat);
  std::memcpy(out.data_ptr<float>(), values.data(), values.size() * sizeof(float));
  return out;
}

}  // namespace

std::string LinearName(int64_t layer, int matrix) {
  return absl::StrCat("blk.", layer, ".", kLinearNames[matrix], ".weight");
}

std::string NormName(int64_t layer, bool post_attention) {
  return absl::StrCat("blk.", layer, post_attention ? ".ffn_norm.weight" : ".attn_norm.weight");
}

int64_t PermutedHeads(const model::LlamaConfig& c, int matrix) {
  if (matrix == static_cast<int>(model::Matrix::kQ)) return c.num_attention_heads;
  if (matrix == static_cast<int>(model::Matrix::kK)) return c.num_key_value_heads;
  return 0;
}

int64_t HfRowOf(int64_t row, int64_t rows, int64_t heads) {
  if (heads <= 0) return row;
  const int64_t hd = rows / heads, h = row / hd, r = row % hd;
  return h * hd + (r % 2) * (hd / 2) + r / 2;
}

absl::Status AddLlamaMetadata(const model::LlamaConfig& c, const std::string& name, Metadata* md) {
  if (c.rope_scaling.has_value()) {
    return absl::UnimplementedError(
        "GGUF export: rope_scaling (LLaMA-3.1 rope_freqs) is not carried yet");
  }
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF export: odd head_dim ", c.head_dim));
  }
  md->AddString("general.architecture", "llama");
  md->AddString("general.name", name);
  md->AddU32("llama.vocab_size", static_cast<uint32_t>(c.vocab_size));
  md->AddU32("llama.context_length", static_cast<uint32_t>(c.max_position_embeddings));
  md->AddU32("llama.embedding_length", static_cast<uint32_t>(c.hidden_size));
  md->AddU32("llama.block_count", static_cast<uint32_t>(c.num_hidden_layers));
  md->AddU32("llama.feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  md->AddU32("llama.attention.head_count", static_cast<uint32_t>(c.num_attention_heads));
  md->AddU32("llama.attention.head_count_kv", static_cast<uint32_t>(c.num_key_value_heads));
  md->AddU32("llama.attention.key_length", static_cast<uint32_t>(c.head_dim));
  md->AddU32("llama.attention.value_length", static_cast<uint32_t>(c.head_dim));
  md->AddU32("llama.rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  md->AddF32("llama.rope.freq_base", static_cast<float>(c.rope_theta));
  md->AddF32("llama.attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  return absl::OkStatus();
}

absl::StatusOr<model::LlamaConfig> LlamaConfigOf(const GgufFile& f) {
  WQ_ASSIGN_OR_RETURN(const std::string arch, f.Text("general.architecture"));
  if (arch != "llama") {
    return absl::InvalidArgumentError(
        absl::StrCat(f.path(), ": architecture '", arch, "' (windquant reads llama)"));
  }
  model::LlamaConfig c;
  WQ_ASSIGN_OR_RETURN(c.hidden_size, Int(f, "llama.embedding_length"));
  WQ_ASSIGN_OR_RETURN(c.intermediate_size, Int(f, "llama.feed_forward_length"));
  WQ_ASSIGN_OR_RETURN(c.num_hidden_layers, Int(f, "llama.block_count"));
  WQ_ASSIGN_OR_RETURN(c.num_attention_heads, Int(f, "llama.attention.head_count"));
  c.num_key_value_heads = Int(f, "llama.attention.head_count_kv").value_or(c.num_attention_heads);
  c.head_dim = Int(f, "llama.attention.key_length")
                   .value_or(c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0);
  WQ_ASSIGN_OR_RETURN(c.max_position_embeddings, Int(f, "llama.context_length"));
  c.rope_theta = f.Number("llama.rope.freq_base").value_or(10000.0);
  WQ_ASSIGN_OR_RETURN(c.rms_norm_eps, f.Number("llama.attention.layer_norm_rms_epsilon"));
  const TensorInfo* embed = f.Find(kEmbeddingName);
  if (embed == nullptr || embed->dims.size() != 2) {
    return absl::NotFoundError(absl::StrCat(f.path(), ": no 2-D tensor ", kEmbeddingName));
  }
  c.vocab_size = embed->dims[1];
  c.tie_word_embeddings = f.Find(kHeadName) == nullptr;
  c.bos_token_id = Int(f, "tokenizer.ggml.bos_token_id").value_or(c.bos_token_id);
  c.eos_token_ids.clear();
  if (absl::StatusOr<int64_t> eos = Int(f, "tokenizer.ggml.eos_token_id"); eos.ok()) {
    c.eos_token_ids.push_back(*eos);
  }
  c.torch_dtype = "float32";
  if (c.hidden_size <= 0 || c.num_hidden_layers <= 0 || c.num_attention_heads <= 0 ||
      c.num_key_value_heads <= 0 || c.head_dim <= 0 || c.intermediate_size <= 0) {
    return absl::DataLossError(absl::StrCat(f.path(), ": llama.* sizes must be positive"));
  }
  return c;
}

absl::StatusOr<model::LlamaWeights> ReadLlamaWeights(const GgufFile& f) {
  model::LlamaWeights w;
  WQ_ASSIGN_OR_RETURN(w.config, LlamaConfigOf(f));
  const model::LlamaConfig& c = w.config;
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim, in = c.intermediate_size;
  const std::vector<int64_t> shapes[model::kNumMatrices] = {{q, h},  {kv, h}, {kv, h}, {h, q},
                                                            {in, h}, {in, h}, {h, in}};
  WQ_ASSIGN_OR_RETURN(w.embed_tokens, Load(f, kEmbeddingName, {c.vocab_size, h}));
  WQ_ASSIGN_OR_RETURN(w.final_norm, Load(f, kFinalNormName, {h}));
  if (c.tie_word_embeddings) {
    w.lm_head = w.embed_tokens;
  } else {
    WQ_ASSIGN_OR_RETURN(w.lm_head, Load(f, kHeadName, {c.vocab_size, h}));
  }
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    model::LayerWeights lw;
    for (int m = 0; m < model::kNumMatrices; ++m) {
      WQ_ASSIGN_OR_RETURN(at::Tensor t, Load(f, LinearName(l, m), shapes[m]));
      const int64_t heads = PermutedHeads(c, m), rows = shapes[m][0];
      if (heads > 0) {
        // GGUF row g holds Hugging Face row HfRowOf(g): put each back.
        std::vector<int64_t> hf(rows);
        for (int64_t g = 0; g < rows; ++g) hf[g] = HfRowOf(g, rows, heads);
        at::Tensor back = at::empty_like(t);
        back.index_copy_(0, at::tensor(hf, at::kLong), t);
        t = back;
      }
      lw.linear[m] = t;
    }
    WQ_ASSIGN_OR_RETURN(lw.input_layernorm, Load(f, NormName(l, false), {h}));
    WQ_ASSIGN_OR_RETURN(lw.post_attention_layernorm, Load(f, NormName(l, true), {h}));
    w.layers.push_back(std::move(lw));
  }
  return w;
}

}  // namespace windquant::exporter::gguf
