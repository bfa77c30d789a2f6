// Perplexity of the real test model against an independent reference:
// - stories260k (../shared): on tinystories-valid-sample.txt at W=256 against the
//   float64 reference of shared/models/stories260k/README.md (PPL 5.695458, 1541
//   windows, 392,955 predicted tokens). About a minute of CPU; it runs in the default
//   suite because it is the end-to-end check of loader + tokenizer + forward pass +
//   protocol.
// - the project's default model (a fresh clone): on its own text, against the
//   perplexity protocol recomputed here in float64 by the textbook formulas
//   (ReferenceLogits64), window by window.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "common/model/checkpoint.h"
#include "common/model/llama_model.h"
#include "common/model/perplexity.h"
#include "common/model/tokenizer.h"
#include "common/testing/test_paths.h"

namespace windquant::model {
namespace {

// The brief asks for 0.1 %; fp32 is expected to agree to ~6 digits.
constexpr double kPerplexityRelTolerance = 1e-3;
constexpr double kReferencePerplexity = 5.695458;
// fp32 forward vs the float64 reference over the same windows: logits agree to
// ~1e-5, so the mean NLL to far better than this.
constexpr double kFloat64RelTolerance = 1e-4;
// Windows of the default model's text checked against the float64 reference.
constexpr int64_t kReferenceWindows = 12;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

// Float64 logits [T, V] of one sequence by the textbook LLaMA formulas
// (RMSNorm, RoPE with rotate-half pairs, causal softmax attention with grouped
// KV heads, SwiGLU), vectorised over positions: written independently of
// LlamaModel, and in double.
at::Tensor ReferenceLogits64(const LlamaWeights& w, const at::Tensor& ids) {
  const LlamaConfig& c = w.config;
  const auto D = at::kDouble;
  const int64_t T = ids.size(0), hd = c.head_dim;
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  const at::Tensor inv_freq = at::pow(at::scalar_tensor(c.rope_theta, D),
                                      -at::arange(0, hd, 2, D) / static_cast<double>(hd));
  const at::Tensor angles = at::outer(at::arange(T, D), inv_freq);   // [T, hd/2]
  const at::Tensor cos = at::cat({angles.cos(), angles.cos()}, -1);  // [T, hd]
  const at::Tensor sin = at::cat({angles.sin(), angles.sin()}, -1);
  auto rope = [&](const at::Tensor& x) {  // [heads, T, hd]
    const at::Tensor x1 = x.narrow(-1, 0, hd / 2), x2 = x.narrow(-1, hd / 2, hd / 2);
    return x * cos + at::cat({-x2, x1}, -1) * sin;
  };
  auto norm = [&](const at::Tensor& x, const at::Tensor& g) {
    return x * at::rsqrt(x.pow(2).mean(-1, true) + c.rms_norm_eps) * g.to(D);
  };
  const at::Tensor mask = at::ones({T, T}, at::kBool).triu(1);
  at::Tensor x = w.embed_tokens.to(D).index_select(0, ids);  // [T, H]
  for (const LayerWeights& l : w.layers) {
    const at::Tensor h = norm(x, l.input_layernorm);
    auto heads = [&](Matrix m, int64_t n) {
      return at::matmul(h, l.at(m).to(D).t()).view({T, n, hd}).transpose(0, 1);
    };
    const at::Tensor q = rope(heads(Matrix::kQ, nh));
    const at::Tensor k = rope(heads(Matrix::kK, nkv)).repeat_interleave(nh / nkv, 0);
    const at::Tensor v = heads(Matrix::kV, nkv).repeat_interleave(nh / nkv, 0);
    at::Tensor scores = at::matmul(q, k.transpose(1, 2)) / std::sqrt(static_cast<double>(hd));
    scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
    const at::Tensor o = at::matmul(at::softmax(scores, -1), v).transpose(0, 1).reshape({T, -1});
    x = x + at::matmul(o, l.at(Matrix::kO).to(D).t());
    const at::Tensor h2 = norm(x, l.post_attention_layernorm);
    const at::Tensor g = at::matmul(h2, l.at(Matrix::kGate).to(D).t());
    const at::Tensor u = at::matmul(h2, l.at(Matrix::kUp).to(D).t());
    x = x + at::matmul(at::silu(g) * u, l.at(Matrix::kDown).to(D).t());
  }
  return at::matmul(norm(x, w.final_norm), w.lm_head.to(D).t());
}

TEST(PerplexityReferenceTest, RealModelMatchesReference) {
  const testing::TestModel m = testing::RealModel();
  at::set_num_threads(1);  // the machine is shared; one thread is the fastest per CPU-s
  auto ckpt = Checkpoint::Open(m.dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto weights = (*ckpt)->LoadWeights(LoadRequest{});
  ASSERT_TRUE(weights.ok()) << weights.status();
  const LlamaWeights reference_weights = *weights;
  const LlamaModel model(std::move(*weights));
  auto tokenizer = Tokenizer::FromFile(m.dir + "/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::vector<int32_t> ids = (*tokenizer)->Encode(ReadAll(m.text_path), /*add_bos=*/false);

  PerplexityOptions options;
  options.context = 256;
  options.batch_size = 16;
  if (m.stories260k) {
    ASSERT_EQ(ids.size(), 393018u);
    auto r = ComputePerplexity(model, ids, options);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->windows, 1541);
    EXPECT_EQ(r->tokens, 392955);
    EXPECT_NEAR(r->perplexity / kReferencePerplexity, 1.0, kPerplexityRelTolerance)
        << "perplexity " << r->perplexity;
    std::printf("stories260k tinystories W=256: ppl %.6f nll %.7f, %.0f tokens/s\n", r->perplexity,
                r->nll, r->tokens_per_s);
    return;
  }
  ASSERT_FALSE(model.config().rope_scaling.has_value()) << "the reference has no RoPE scaling";
  const int64_t W = std::min<int64_t>(options.context, model.config().max_position_embeddings);
  options.context = W;
  options.max_tokens = kReferenceWindows * (W - 1) + (W - 2);  // the partial chunk is dropped
  ASSERT_GE(static_cast<int64_t>(ids.size()), options.max_tokens);
  auto r = ComputePerplexity(model, ids, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->context, W);
  EXPECT_EQ(r->windows, kReferenceWindows);
  EXPECT_EQ(r->tokens, kReferenceWindows * (W - 1));

  // The protocol of perplexity.h, in float64: [BOS] + each chunk of W-1 ids, every
  // chunk id predicted.
  double total_nll = 0;
  for (int64_t win = 0; win < kReferenceWindows; ++win) {
    std::vector<int64_t> window = {(*tokenizer)->bos_id()};
    for (int64_t i = 0; i < W - 1; ++i) window.push_back(ids[win * (W - 1) + i]);
    const at::Tensor t = at::tensor(window, at::kLong);
    const at::Tensor logp = at::log_softmax(ReferenceLogits64(reference_weights, t), -1);
    const at::Tensor targets = t.narrow(0, 1, W - 1).unsqueeze(1);
    total_nll -= logp.narrow(0, 0, W - 1).gather(1, targets).sum().item<double>();
  }
  const double reference_ppl = std::exp(total_nll / r->tokens);
  EXPECT_NEAR(r->perplexity / reference_ppl, 1.0, kFloat64RelTolerance)
      << "perplexity " << r->perplexity << " vs float64 reference " << reference_ppl;
  EXPECT_GT(reference_ppl, 1.0);
  // A trained model: far better than uniform guessing over the vocabulary.
  EXPECT_LT(reference_ppl, 0.5 * model.config().vocab_size);
  std::printf("%s W=%lld, %lld windows: ppl %.6f, float64 reference %.6f\n", m.name.c_str(),
              static_cast<long long>(W), static_cast<long long>(r->windows), r->perplexity,
              reference_ppl);
}

}  // namespace
}  // namespace windquant::model
