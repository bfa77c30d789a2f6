#include "common/rl/episode_evaluator.h"

#include <cmath>

#include "common/quant/unit_table_builder.h"
#include "common/rl/synthetic_table.h"
#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

TEST(CachingPlanEvaluatorTest, IdenticalPlansAreEvaluatedOnce) {
  const quant::UnitTable t = testing::SyntheticTable(20, 1);
  testing::SyntheticEvaluator inner(&t);
  CachingPlanEvaluator cache(&inner);
  std::vector<int> a(20, 4), b(20, 4);
  b[3] = 2;
  auto e1 = cache.Evaluate(a);
  auto e2 = cache.Evaluate(b);
  auto e3 = cache.Evaluate(a);
  ASSERT_TRUE(e1.ok() && e2.ok() && e3.ok());
  EXPECT_EQ(inner.calls(), 2);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 2);
  EXPECT_FALSE(e1->cached);
  EXPECT_TRUE(e3->cached);
  EXPECT_DOUBLE_EQ(e1->eval_ppl, e3->eval_ppl);
  EXPECT_NE(e1->eval_ppl, e2->eval_ppl);
  EXPECT_NE(PlanHash(a), PlanHash(b));
  EXPECT_FALSE(cache.Evaluate(std::vector<int>(3, 0)).ok());
}

TEST(EpisodeEndRewardTest, MatchesFormula) {
  config::EnvConfig env;
  env.bit_reduction_weight = 2.0;
  env.loss_penalty_weight = 3.0;
  env.violation_penalty_weight = 5.0;
  env.ppl_penalty_weight = 0.5;
  PlanEvaluation e;
  e.effective_bits = 2.25;
  e.loss_increase = 0.1;
  e.relative_ppl_increase = 0.4;
  const EpisodeReward r = EpisodeEndReward(env, e, 1.5, 2.0);
  EXPECT_DOUBLE_EQ(r.bit_reduction, (16 - 2.25) / 16);
  EXPECT_DOUBLE_EQ(r.violation, 0.25);
  EXPECT_NEAR(r.total, 2.0 * (13.75 / 16) - 3.0 * 0.1 - 5.0 * 0.25 - 0.5 * 1.5 * 0.4, 1e-12);
  e.relative_ppl_increase = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isfinite(EpisodeEndReward(env, e, 1.5, 2.0).total));
}

// A tiny random LLaMA, its unit table and fits: FP16 plans must reproduce the
// FP loss; 1-bit plans must be worse; Measure({}) restores the FP model.
TEST(LocalPlanEvaluatorTest, MeasuresPlansOnTheRealModel) {
  at::manual_seed(3);
  model::LlamaWeights w;
  auto& c = w.config;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.vocab_size = 40;
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = true;
  c.bos_token_id = 1;
  w.embed_tokens = at::randn({40, 32});
  w.final_norm = at::ones({32});
  w.lm_head = w.embed_tokens;
  const int64_t out[7] = {32, 16, 16, 32, 48, 48, 32};
  const int64_t in[7] = {32, 32, 32, 32, 32, 32, 48};
  for (int l = 0; l < 2; ++l) {
    model::LayerWeights lw;
    for (int m = 0; m < 7; ++m) lw.linear[m] = at::randn({out[m], in[m]}) * 0.3;
    lw.input_layernorm = at::ones({32});
    lw.post_attention_layernorm = at::ones({32});
    w.layers.push_back(lw);
  }
  model::LlamaModel model(w);
  at::Tensor windows = at::randint(3, 40, {4, 16}, at::kLong);
  auto stats = quant::CalibrateModel(model, windows, 2);
  ASSERT_TRUE(stats.ok()) << stats.status();
  quant::UnitTableOptions uo;
  uo.chunk_size = 16;
  auto sq = quant::BuildStageFits(model.weights(), *stats, uo, "tiny");
  ASSERT_TRUE(sq.ok()) << sq.status();
  std::vector<int32_t> ids(600);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = 3 + static_cast<int32_t>((i * 7 + i / 5) % 37);
  std::vector<int32_t> calib(ids.begin(), ids.begin() + 200), eval(ids.begin() + 200, ids.end());
  LocalEvaluatorOptions lo;
  lo.context = 16;
  lo.batch = 4;
  auto ev = LocalPlanEvaluator::Create(&model, &*sq, &sq->table(), calib, eval, lo);
  ASSERT_TRUE(ev.ok()) << ev.status();
  const size_t units = sq->table().units.size();
  auto fp16 = (*ev)->Evaluate(std::vector<int>(units, 0));
  ASSERT_TRUE(fp16.ok()) << fp16.status();
  // FP16 round trip of float32 weights: within a small tolerance of FP.
  constexpr double kFp16LossTolerance = 1e-3;
  EXPECT_NEAR(fp16->loss_increase, 0.0, kFp16LossTolerance);
  EXPECT_NEAR(fp16->relative_ppl_increase, 0.0, kFp16LossTolerance);
  EXPECT_NEAR(fp16->effective_bits, 16.0, 1e-12);
  auto one = (*ev)->Evaluate(std::vector<int>(units, 6));
  ASSERT_TRUE(one.ok());
  EXPECT_GT(one->loss_increase, 10 * kFp16LossTolerance);
  EXPECT_GT(one->eval_ppl, fp16->eval_ppl);
  EXPECT_NEAR(std::log(one->eval_ppl), one->eval_nll, 1e-9);
  auto fp = (*ev)->Measure({}, eval);
  ASSERT_TRUE(fp.ok());
  EXPECT_NEAR(fp->perplexity, (*ev)->fp_eval_ppl(), 1e-9);
  EXPECT_FALSE((*ev)->Evaluate(std::vector<int>(units + 1, 0)).ok());
}

}  // namespace
}  // namespace windquant::rl
