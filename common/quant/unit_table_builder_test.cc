#include "common/quant/unit_table_builder.h"

#include <ATen/ATen.h>

#include "common/quant/effective_bits.h"
#include "gtest/gtest.h"
#include "windquant/v1/types.pb.h"

namespace windquant::quant {
namespace {

// A tiny random LLaMA with uneven in-features (intermediate 40 with chunk 16
// gives a narrower last chunk of down_proj).
model::LlamaWeights TinyWeights(uint64_t seed, int64_t layers = 3) {
  at::manual_seed(seed);
  model::LlamaWeights w;
  auto& c = w.config;
  c.hidden_size = 32;
  c.intermediate_size = 40;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.vocab_size = 50;
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = true;
  w.embed_tokens = at::randn({50, 32}) * 0.5;
  w.final_norm = at::ones({32});
  w.lm_head = w.embed_tokens;
  for (int64_t l = 0; l < layers; ++l) {
    model::LayerWeights lw;
    const int64_t out[7] = {32, 16, 16, 32, 40, 40, 32};
    const int64_t in[7] = {32, 32, 32, 32, 32, 32, 40};
    for (int m = 0; m < 7; ++m) lw.linear[m] = at::randn({out[m], in[m]}) * 0.2;
    lw.input_layernorm = at::ones({32});
    lw.post_attention_layernorm = at::ones({32});
    w.layers.push_back(lw);
  }
  return w;
}

model::LlamaWeights Slice(const model::LlamaWeights& w, int64_t a, int64_t b) {
  model::LlamaWeights s;
  s.config = w.config;
  s.first_layer = a;
  s.layers.assign(w.layers.begin() + a, w.layers.begin() + b);
  for (auto& l : s.layers) {
    for (auto& t : l.linear) t = t.clone();
  }
  return s;
}

TEST(CalibrationTest, WindowsStartWithBosAndAreSeeded) {
  std::vector<int32_t> ids(100);
  for (int i = 0; i < 100; ++i) ids[i] = 3 + i % 40;
  auto a = SampleCalibrationWindows(ids, 4, 10, 7, 1);
  auto b = SampleCalibrationWindows(ids, 4, 10, 7, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(at::equal(*a, *b));
  EXPECT_TRUE((a->select(1, 0) == 1).all().item<bool>());
  EXPECT_FALSE(SampleCalibrationWindows(std::vector<int32_t>(5, 3), 4, 10, 7, 1).ok());
}

TEST(CalibrationTest, StageByStageEqualsWholeModel) {
  model::LlamaModel model(TinyWeights(1));
  at::Tensor windows = at::randint(3, 50, {4, 12}, at::kLong);
  auto whole = CalibrateModel(model, windows, 2);
  ASSERT_TRUE(whole.ok()) << whole.status();
  Calibrator first(model, 0, 1), second(model, 1, 3);
  at::NoGradGuard g;
  auto h = first.RunStage(model.Embed(windows));
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(second.RunStage(*h).ok());
  ActivationStats s1 = first.Finish(), s2 = second.Finish();
  for (int m = 0; m < 7; ++m) {
    auto mm = static_cast<model::Matrix>(m);
    EXPECT_TRUE(at::allclose(whole->at(0, mm).mean_abs, s1.at(0, mm).mean_abs, 1e-5, 1e-6));
    EXPECT_TRUE(at::allclose(whole->at(2, mm).mean_sq, s2.at(2, mm).mean_sq, 1e-5, 1e-6));
    EXPECT_EQ(whole->at(2, mm).tokens, 4 * 12);
  }
}

class UnitTableBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = TinyWeights(2);
    model::LlamaModel model(weights_);
    auto stats = CalibrateModel(model, at::randint(3, 50, {4, 12}, at::kLong), 4);
    ASSERT_TRUE(stats.ok());
    stats_ = *stats;
    options_.chunk_size = 16;
    options_.quantizer.salient_fraction = 0.01;
  }
  model::LlamaWeights weights_;
  ActivationStats stats_;
  UnitTableOptions options_;
};

TEST_F(UnitTableBuilderTest, EnumeratesUnitsInGlobalOrderWithHonestBits) {
  auto sq = BuildStageQuantization(weights_, stats_, options_, "fp");
  ASSERT_TRUE(sq.ok()) << sq.status();
  const UnitTable& t = sq->table;
  // q,k,v,o,gate,up: 32 columns = 2 chunks each; down: 40 = 16+16+8 -> 3 chunks.
  EXPECT_EQ(UnitsPerLayer(weights_.config, 16), 15);
  ASSERT_EQ(t.units.size(), 45u);
  ASSERT_TRUE(t.Validate().ok());
  const Unit& last = t.units[14];
  EXPECT_EQ(last.matrix, 6);
  EXPECT_EQ(last.cols, 8);
  EXPECT_EQ(last.col_begin, 32);
  for (const Unit& u : t.units) {
    for (int a = 0; a < kNumActions; ++a) {
      EXPECT_DOUBLE_EQ(u.bits[a],
                       UnitEffectiveBits(u.rows, u.cols, u.salient_count, kAllActions[a]));
    }
    EXPECT_LE(u.error[ActionIndex(Action::k8)], u.error[ActionIndex(Action::k4)] + 1e-9);
    EXPECT_LE(u.error[ActionIndex(Action::k4)], u.error[ActionIndex(Action::k2)] + 1e-9);
    for (float f : u.features) EXPECT_TRUE(std::isfinite(f));
  }
  // Bits of a uniform plan recounted independently: sum over units / weights.
  std::vector<int> plan(t.units.size(), ActionIndex(Action::k4));
  double bits = 0, n = 0;
  for (const Unit& u : t.units) {
    bits += UnitEffectiveBits(u.rows, u.cols, u.salient_count, Action::k4);
    n += u.rows * u.cols;
  }
  EXPECT_DOUBLE_EQ(t.EffectiveBits(plan), bits / n);
  EXPECT_GT(t.EffectiveBits(plan), 4.0);
}

TEST_F(UnitTableBuilderTest, ApplyCopiesOnlyTheChosenColumns) {
  auto sq = BuildStageQuantization(weights_, stats_, options_, "fp");
  ASSERT_TRUE(sq.ok());
  model::LlamaWeights target = Slice(weights_, 0, 3);
  std::vector<int> plan(sq->table.units.size(), ActionIndex(Action::k16));
  plan[1] = ActionIndex(Action::k2);  // q_proj chunk 1 of layer 0
  ASSERT_TRUE(sq->weights.Apply(sq->table, plan, &target).ok());
  const at::Tensor q = target.layers[0].linear[0];
  const at::Tensor orig = weights_.layers[0].linear[0];
  EXPECT_TRUE(at::equal(q.slice(1, 0, 16), orig.slice(1, 0, 16).to(at::kHalf).to(at::kFloat)));
  EXPECT_TRUE(at::equal(q.slice(1, 16, 32),
                        sq->weights.at(0, 0, ActionIndex(Action::k2)).slice(1, 16, 32)));
  EXPECT_FALSE(at::equal(q.slice(1, 16, 32), orig.slice(1, 16, 32)));
  plan[3] = 9;
  EXPECT_FALSE(sq->weights.Apply(sq->table, plan, &target).ok());
}

TEST_F(UnitTableBuilderTest, StagesMergeIntoTheWholeTableAndRoundTripProto) {
  auto whole = BuildStageQuantization(weights_, stats_, options_, "fp");
  ASSERT_TRUE(whole.ok());
  ActivationStats s0 = stats_, s1 = stats_;
  s0.layers.resize(1);
  s1.first_layer = 1;
  s1.layers.erase(s1.layers.begin());
  auto a = BuildStageQuantization(Slice(weights_, 0, 1), s0, options_, "fp");
  auto b = BuildStageQuantization(Slice(weights_, 1, 3), s1, options_, "fp");
  ASSERT_TRUE(a.ok() && b.ok());
  v1::UnitTable proto;
  b->table.ToProto(&proto);
  auto b2 = UnitTable::FromProto(proto);
  ASSERT_TRUE(b2.ok()) << b2.status();
  auto merged = UnitTable::Merge({*b2, a->table});
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(merged->units.size(), whole->table.units.size());
  for (size_t i = 0; i < merged->units.size(); ++i) {
    EXPECT_EQ(merged->units[i].id, whole->table.units[i].id);
    EXPECT_EQ(merged->units[i].bits, whole->table.units[i].bits);
    EXPECT_EQ(merged->units[i].error, whole->table.units[i].error);
  }
  EXPECT_FALSE(UnitTable::Merge({b->table}).ok());  // layer 0 missing
  b2->fingerprint = "other";
  EXPECT_FALSE(UnitTable::Merge({a->table, *b2}).ok());
  proto.mutable_units(0)->add_features(1.0f);
  EXPECT_FALSE(UnitTable::FromProto(proto).ok());
}

}  // namespace
}  // namespace windquant::quant
