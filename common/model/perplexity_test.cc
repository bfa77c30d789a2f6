#include "common/model/perplexity.h"
#include "common/testing/status_matchers.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace windquant::model {
namespace {

using ::windquant::testing::StatusIs;

// Batched fp32 vs one-window-at-a-time float64 log-softmax.
constexpr double kNllRelTolerance = 1e-5;

LlamaWeights TinyWeights(uint64_t seed) {
  LlamaConfig c;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 23;
  c.bos_token_id = 1;
  c.max_position_embeddings = 32;
  at::manual_seed(seed);
  auto lin = [](int64_t out, int64_t in) { return at::randn({out, in}) / std::sqrt(double(in)); };
  LlamaWeights w;
  w.config = c;
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    LayerWeights l;
    l.at(Matrix::kQ) = lin(16, 16);
    l.at(Matrix::kK) = lin(8, 16);
    l.at(Matrix::kV) = lin(8, 16);
    l.at(Matrix::kO) = lin(16, 16);
    l.at(Matrix::kGate) = lin(24, 16);
    l.at(Matrix::kUp) = lin(24, 16);
    l.at(Matrix::kDown) = lin(16, 24);
    l.input_layernorm = at::ones({16});
    l.post_attention_layernorm = at::ones({16});
    w.layers.push_back(l);
  }
  w.embed_tokens = at::randn({c.vocab_size, 16});
  w.final_norm = at::ones({16});
  w.lm_head = lin(c.vocab_size, 16) * 3.0;
  return w;
}

std::vector<int32_t> RandomIds(int64_t n, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> ids(n);
  for (auto& x : ids) x = d(rng);
  return ids;
}

// The protocol written out: one window at a time, one position at a time.
double SlowTotalNll(const LlamaModel& model, const std::vector<int32_t>& ids, int64_t context,
                    int64_t* tokens) {
  const int64_t chunk = context - 1;
  double total = 0;
  *tokens = 0;
  for (size_t start = 0; start + chunk <= ids.size(); start += chunk) {
    std::vector<int64_t> window = {model.config().bos_token_id};
    for (int64_t j = 0; j < chunk; ++j) window.push_back(ids[start + j]);
    const at::Tensor in = at::tensor(window, at::kLong).unsqueeze(0);
    const at::Tensor logits = model.Logits(in)[0].to(at::kDouble);  // [context, V]
    for (int64_t p = 0; p < chunk; ++p) {
      const at::Tensor lp = at::log_softmax(logits[p], -1);
      total -= lp[window[p + 1]].item<double>();
      ++*tokens;
    }
  }
  return total;
}

TEST(PerplexityTest, MatchesSlowPerWindowReference) {
  LlamaModel model(TinyWeights(1));
  const std::vector<int32_t> ids = RandomIds(100, 23, 2);  // 100 = 6*16 + 4 dropped
  int64_t tokens = 0;
  const double expected = SlowTotalNll(model, ids, 17, &tokens);
  ASSERT_EQ(tokens, 96);
  for (int64_t batch : {1, 4, 8}) {
    PerplexityOptions o;
    o.context = 17;
    o.batch_size = batch;
    int calls = 0;
    o.progress = [&](int64_t done, int64_t total, int64_t toks) {
      ++calls;
      EXPECT_LE(done, total);
      EXPECT_EQ(toks, done * 16);
    };
    auto r = ComputePerplexity(model, ids, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->windows, 6);
    EXPECT_EQ(r->tokens, 96);
    EXPECT_EQ(r->context, 17);
    EXPECT_EQ(calls, (6 + batch - 1) / batch);
    EXPECT_NEAR(r->total_nll / expected, 1.0, kNllRelTolerance) << "batch " << batch;
    EXPECT_NEAR(r->perplexity, std::exp(expected / 96), 1e-4 * r->perplexity);
    EXPECT_GT(r->tokens_per_s, 0);
  }
}

TEST(PerplexityTest, ContextIsClampedAndMaxTokensLimits) {
  LlamaModel model(TinyWeights(3));
  const std::vector<int32_t> ids = RandomIds(200, 23, 4);
  PerplexityOptions o;
  o.context = 2048;  // > max_position_embeddings 32
  auto r = ComputePerplexity(model, ids, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->context, 32);
  EXPECT_EQ(r->windows, 200 / 31);
  o.max_tokens = 70;  // 2 windows of 31, 8 dropped
  auto limited = ComputePerplexity(model, ids, o);
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->windows, 2);
  EXPECT_EQ(limited->tokens, 62);
  int64_t tokens = 0;
  const double expected =
      SlowTotalNll(model, std::vector<int32_t>(ids.begin(), ids.begin() + 62), 32, &tokens);
  EXPECT_NEAR(limited->total_nll / expected, 1.0, kNllRelTolerance);
}

TEST(PerplexityTest, RejectsBadInput) {
  LlamaModel model(TinyWeights(5));
  PerplexityOptions o;
  o.context = 17;
  EXPECT_EQ(ComputePerplexity(model, RandomIds(10, 23, 6), o).status().code(),
            absl::StatusCode::kInvalidArgument);  // less than one window
  std::vector<int32_t> bad = RandomIds(40, 23, 7);
  bad[5] = 23;
  auto r = ComputePerplexity(model, bad, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("position 5"), std::string::npos);
  o.batch_size = 0;
  EXPECT_THAT(ComputePerplexity(model, RandomIds(40, 23, 8), o),
              StatusIs(absl::StatusCode::kInvalidArgument, "batch_size: must be >= 1, got 0"));
  o.batch_size = 1;
  o.context = 1;
  EXPECT_THAT(ComputePerplexity(model, RandomIds(40, 23, 8), o),
              StatusIs(absl::StatusCode::kInvalidArgument, "context: must be >= 2, got 1"));
  // A partial stage cannot compute perplexity.
  LlamaWeights partial = TinyWeights(5);
  partial.layers.pop_back();
  o.context = 17;
  EXPECT_THAT(ComputePerplexity(LlamaModel(std::move(partial)), RandomIds(40, 23, 8), o),
              StatusIs(absl::StatusCode::kInvalidArgument, "whole model"));
}

}  // namespace
}  // namespace windquant::model
