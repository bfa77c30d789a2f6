// The LLaMA forward pass in plain ATen ops (differentiable). Follows the
// Hugging Face LlamaForCausalLM modelling code: RMSNorm in fp32, RoPE with the
// rotate_half convention, grouped-query attention (query head h uses key/value
// head h / n_rep), causal mask, fp32 softmax, SwiGLU MLP.
#include "common/model/llama_model.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace windquant::model {
namespace {

// Positions beyond this are not tabulated up front (LLaMA-3 declares 131072);
// longer sequences compute their cos/sin on the fly.
constexpr int64_t kMaxTabulatedPositions = 8192;

void Require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("LlamaModel: " + what);
}

// Keeps the dtype: a BF16 checkpoint stays BF16 in memory.
at::Tensor ToDevice(const at::Tensor& t, at::Device device) {
  if (!t.defined()) return t;
  return t.to(device);
}

// A weight in the compute dtype: the tensor itself when it already is (so training keeps
// its autograd graph, and a BF16 checkpoint computing in BF16 is never copied), else a
// cast copy.
at::Tensor Cast(const at::Tensor& t, at::ScalarType dtype) {
  return t.scalar_type() == dtype ? t : t.to(dtype);
}

// lm_head rows cast at a time when the head is not stored in the compute dtype: bounds
// the temporary to ~64 MB whatever the vocabulary.
constexpr int64_t kHeadBlockBytes = 64 << 20;

// HF LlamaRMSNorm: the statistics in fp32, the normalized x back in x's dtype, times
// w in that dtype (w * x.to(input_dtype)).
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor var = xf.pow(2).mean(-1, /*keepdim=*/true);
  return Cast(w, x.scalar_type()) * (xf * at::rsqrt(var + eps)).to(x.scalar_type());
}

// [.., d] -> [.., d] with the halves swapped and the second negated.
at::Tensor RotateHalf(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// cos/sin tables [positions, head_dim] (in `dtype`, CPU) for RoPE in the
// rotate_half layout: angle(p, i) = p * inv_freq[i mod head_dim/2]. Computed in
// double so that long positions keep their precision, rounded once to `dtype`.
void RopeCosSin(const LlamaConfig& c, int64_t positions, at::ScalarType dtype, at::Tensor* cos,
                at::Tensor* sin) {
  const at::Tensor inv_freq = RopeInvFreq(c);  // [hd/2] double
  const at::Tensor pos = at::arange(positions, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor freqs = at::outer(pos, inv_freq);   // [P, hd/2]
  const at::Tensor emb = at::cat({freqs, freqs}, -1);  // [P, hd]
  *cos = emb.cos().to(dtype);
  *sin = emb.sin().to(dtype);
}

}  // namespace

at::Tensor RopeInvFreq(const LlamaConfig& c) {
  const int64_t hd = c.head_dim > 0 ? c.head_dim : c.hidden_size / c.num_attention_heads;
  // inv_freq[i] = theta^(-2i/hd), i = 0..hd/2-1.
  const at::Tensor exponent =
      at::arange(0, hd, 2, at::TensorOptions().dtype(at::kDouble)) / static_cast<double>(hd);
  at::Tensor inv_freq = at::pow(c.rope_theta, exponent).reciprocal();
  if (!c.rope_scaling.has_value() || c.rope_scaling->rope_type != "llama3") return inv_freq;
  // HF _compute_llama3_parameters: wavelengths longer than
  // original_max/low_freq_factor are divided by `factor`, shorter than
  // original_max/high_freq_factor are kept, and those in between are blended:
  //   smooth = (original_max / wavelen - low) / (high - low)
  //   inv = (1 - smooth) * inv / factor + smooth * inv
  const RopeScaling& s = *c.rope_scaling;
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_len / s.low_freq_factor;
  const double high_freq_wavelen = old_len / s.high_freq_factor;
  const at::Tensor wavelen = (2.0 * M_PI) / inv_freq;
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  const at::Tensor smooth =
      (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const at::Tensor smoothed = (1.0 - smooth) * scaled / s.factor + smooth * scaled;
  const at::Tensor medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return at::where(medium, smoothed, scaled);
}

at::Device TorchDevice(const ComputeOptions& compute) { return at::Device(compute.device); }

at::ScalarType TorchDtype(const ComputeOptions& compute) {
  return compute.dtype == ComputeDtype::kBFloat16 ? at::kBFloat16 : at::kFloat;
}

std::string DtypeName(at::ScalarType dtype) {
  if (dtype == at::kFloat) return ComputeDtypeName(ComputeDtype::kFloat32);
  if (dtype == at::kBFloat16) return ComputeDtypeName(ComputeDtype::kBFloat16);
  return c10::toString(dtype);
}

LlamaModel::LlamaModel(LlamaWeights weights, const ComputeOptions& compute,
                       std::shared_ptr<const LinearSource> linears)
    : weights_(std::move(weights)),
      compute_(compute),
      device_(TorchDevice(compute)),
      dtype_(TorchDtype(compute)),
      linears_(std::move(linears)) {
  const LlamaConfig& c = weights_.config;
  Require(c.hidden_size > 0 && c.num_attention_heads > 0, "hidden_size and heads must be > 0");
  Require(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0,
          "num_attention_heads must be a multiple of num_key_value_heads");
  if (weights_.config.head_dim <= 0) {
    weights_.config.head_dim = c.hidden_size / c.num_attention_heads;
  }
  Require(weights_.config.head_dim % 2 == 0, "head_dim must be even");
  const bool tied = weights_.lm_head.defined() && weights_.embed_tokens.defined() &&
                    weights_.lm_head.is_same(weights_.embed_tokens);
  for (LayerWeights& l : weights_.layers) {
    for (at::Tensor& t : l.linear) t = ToDevice(t, device_);
    l.input_layernorm = ToDevice(l.input_layernorm, device_);
    l.post_attention_layernorm = ToDevice(l.post_attention_layernorm, device_);
  }
  weights_.embed_tokens = ToDevice(weights_.embed_tokens, device_);
  weights_.final_norm = ToDevice(weights_.final_norm, device_);
  weights_.lm_head = tied ? weights_.embed_tokens : ToDevice(weights_.lm_head, device_);

  const int64_t positions = std::min(c.max_position_embeddings, kMaxTabulatedPositions);
  RopeCosSin(weights_.config, std::max<int64_t>(positions, 1), dtype_, &rope_cos_, &rope_sin_);
  rope_cos_ = rope_cos_.to(device_);
  rope_sin_ = rope_sin_.to(device_);
}

std::shared_ptr<const LlamaModel> LlamaModel::WithLinears(
    std::shared_ptr<const LinearSource> linears) const {
  auto m = std::make_shared<LlamaModel>(*this);
  m->linears_ = std::move(linears);
  return m;
}

std::array<at::Tensor, kNumMatrices> LlamaModel::LayerLinears(int64_t layer) const {
  Require(layer >= first_layer() && layer < end_layer(),
          "layer " + std::to_string(layer) + " not in this stage");
  const LayerWeights& w = weights_.layers[layer - first_layer()];
  std::array<at::Tensor, kNumMatrices> out;
  if (linears_ != nullptr) {
    out = linears_->Linears(layer, w);
    // A source that hands back another dtype still computes in this model's.
    for (at::Tensor& t : out) t = Cast(t, dtype_);
    return out;
  }
  for (int m = 0; m < kNumMatrices; ++m) out[m] = Cast(w.linear[m], dtype_);
  return out;
}

at::Tensor LlamaModel::Embed(const at::Tensor& ids) const {
  Require(weights_.embed_tokens.defined(), "Embed() needs embed_tokens in this stage");
  Require(ids.dim() == 2, "ids must be [B, T]");
  // Look up in the stored dtype, then cast only the rows used.
  return Cast(at::embedding(weights_.embed_tokens, ids.to(device_, at::kLong)), dtype_);
}

at::Tensor LlamaModel::ForwardLayers(const at::Tensor& hidden, int64_t begin, int64_t end,
                                     const LinearInputHook* hook) const {
  Require(begin >= first_layer() && begin <= end && end <= end_layer(),
          "layers [" + std::to_string(begin) + ", " + std::to_string(end) +
              ") not within this stage [" + std::to_string(first_layer()) + ", " +
              std::to_string(end_layer()) + ")");
  Require(hidden.dim() == 3 && hidden.size(2) == config().hidden_size,
          "hidden must be [B, T, hidden_size]");
  const LlamaConfig& c = config();
  const int64_t B = hidden.size(0), T = hidden.size(1);
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
  const int64_t n_rep = nh / nkv;
  const double eps = c.rms_norm_eps;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));

  at::Tensor cos, sin;
  if (T <= rope_cos_.size(0)) {
    cos = rope_cos_.narrow(0, 0, T);
    sin = rope_sin_.narrow(0, 0, T);
  } else {
    RopeCosSin(c, T, dtype_, &cos, &sin);
    cos = cos.to(device_);
    sin = sin.to(device_);
  }
  // Additive causal mask: 0 on and below the diagonal, -inf above; repeated
  // for the n_rep query heads that share a K/V head (rows are (rep, t)).
  const at::Tensor mask = at::full({T, T}, -std::numeric_limits<float>::infinity(),
                                   at::TensorOptions().dtype(dtype_).device(device_))
                              .triu(1)
                              .repeat({n_rep, 1})
                              .expand({B * nkv, n_rep * T, T});

  auto call_hook = [&](int64_t layer, Matrix m, const at::Tensor& in) {
    if (hook != nullptr && *hook) (*hook)(layer, m, in);
  };

  at::Tensor x = hidden.to(device_, dtype_);
  for (int64_t layer = begin; layer < end; ++layer) {
    const LayerWeights& w = weights_.layers[layer - first_layer()];
    // This layer's linears in the compute dtype; released at the end of the iteration.
    const std::array<at::Tensor, kNumMatrices> lin = LayerLinears(layer);
    auto L = [&](Matrix m) -> const at::Tensor& { return lin[static_cast<int>(m)]; };
    // --- attention ---
    const at::Tensor h = RmsNorm(x, w.input_layernorm, eps);
    call_hook(layer, Matrix::kQ, h);
    call_hook(layer, Matrix::kK, h);
    call_hook(layer, Matrix::kV, h);
    at::Tensor q = at::linear(h, L(Matrix::kQ)).view({B, T, nh, hd}).transpose(1, 2);
    at::Tensor k = at::linear(h, L(Matrix::kK)).view({B, T, nkv, hd}).transpose(1, 2);
    at::Tensor v = at::linear(h, L(Matrix::kV)).view({B, T, nkv, hd}).transpose(1, 2);
    q = q * cos + RotateHalf(q) * sin;  // [B, nh, T, hd]
    k = k * cos + RotateHalf(k) * sin;  // [B, nkv, T, hd]
    // GQA without copying K/V: the n_rep query heads of each K/V head are
    // stacked along the rows, [B*nkv, n_rep*T, hd]. scores = mask + scale*q.k
    // in one baddbmm (the attention tensors dominate memory traffic).
    const at::Tensor qg = q.reshape({B * nkv, n_rep * T, hd});
    const at::Tensor scores = at::baddbmm(mask, qg, k.reshape({B * nkv, T, hd}).transpose(1, 2),
                                          /*beta=*/1.0, /*alpha=*/scale);
    const at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(v.scalar_type());
    const at::Tensor attn = at::bmm(probs, v.reshape({B * nkv, T, hd}))  // [B*nkv, n_rep*T, hd]
                                .view({B, nh, T, hd})
                                .transpose(1, 2)
                                .reshape({B, T, nh * hd});
    call_hook(layer, Matrix::kO, attn);
    x = x + at::linear(attn, L(Matrix::kO));
    // --- SwiGLU MLP ---
    const at::Tensor h2 = RmsNorm(x, w.post_attention_layernorm, eps);
    call_hook(layer, Matrix::kGate, h2);
    call_hook(layer, Matrix::kUp, h2);
    const at::Tensor m =
        at::silu(at::linear(h2, L(Matrix::kGate))) * at::linear(h2, L(Matrix::kUp));
    call_hook(layer, Matrix::kDown, m);
    x = x + at::linear(m, L(Matrix::kDown));
  }
  return x;
}

at::Tensor LlamaModel::Head(const at::Tensor& hidden) const {
  Require(weights_.final_norm.defined(), "Head() needs the final norm in this stage");
  const at::Tensor& head = weights_.lm_head.defined() ? weights_.lm_head : weights_.embed_tokens;
  Require(head.defined(), "Head() needs lm_head (or tied embed_tokens) in this stage");
  const at::Tensor normed =
      RmsNorm(hidden.to(device_, dtype_), weights_.final_norm, config().rms_norm_eps);
  // The logits in the compute dtype (HF's lm_head), then float32 for the loss: a no-op
  // in float32.
  if (head.scalar_type() == dtype_) return at::linear(normed, head).to(at::kFloat);
  const int64_t rows =
      std::max<int64_t>(1, kHeadBlockBytes / (c10::elementSize(dtype_) * head.size(1)));
  if (rows >= head.size(0)) return at::linear(normed, head.to(dtype_)).to(at::kFloat);
  std::vector<at::Tensor> blocks;
  for (int64_t r = 0; r < head.size(0); r += rows) {
    blocks.push_back(
        at::linear(normed, head.slice(0, r, std::min(r + rows, head.size(0))).to(dtype_)));
  }
  return at::cat(blocks, -1).to(at::kFloat);
}

at::Tensor LlamaModel::Logits(const at::Tensor& ids) const {
  return Head(ForwardLayers(Embed(ids), first_layer(), end_layer()));
}

}  // namespace windquant::model
