#include "common/rl/local_plan_evaluator.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/quant/unit_table_builder.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace windquant::rl {
namespace {

using ::windquant::testing::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

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
  EXPECT_THAT(
      (*ev)->Evaluate(std::vector<int>(units + 1, 0)),
      StatusIs(kInvalid, absl::StrCat("plan: ", units + 1, " actions for ", units, " units")));
  EXPECT_THAT((*ev)->Evaluate({}), StatusIs(kInvalid, "plan: no actions"));
  // No cache of its own (CachingPlanEvaluator adds one): measured again, same numbers.
  auto again = (*ev)->Evaluate(std::vector<int>(units, 6));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->cached);
  EXPECT_DOUBLE_EQ(again->eval_nll, one->eval_nll);
}

}  // namespace
}  // namespace windquant::rl
