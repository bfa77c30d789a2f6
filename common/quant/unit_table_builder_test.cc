#include "common/quant/unit_table_builder.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "common/plan/effective_bits.h"
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
  c10::NoGradGuard g;
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

// The statistics are sums taken one token at a time in arrival order: the same windows
// in micro-batches of 3, 3 and 2 give the same bits as one forward of 8 for the inputs
// that do not pass through a matmul of the batch (q/k/v of the first layer read the
// RMSNorm of the embeddings), and the others agree within the float error of the BLAS.
TEST(CalibrationTest, MicroBatchingDoesNotChangeTheSums) {
  model::LlamaModel model(TinyWeights(3));
  const at::Tensor windows = at::randint(3, 50, {8, 12}, at::kLong);
  auto one = CalibrateModel(model, windows, 8);
  ASSERT_TRUE(one.ok());
  Calibrator split(model, 0, 3);
  c10::NoGradGuard g;
  for (auto [b, e] : {std::pair{0, 3}, std::pair{3, 6}, std::pair{6, 8}}) {
    ASSERT_TRUE(split.RunStage(model.Embed(windows.slice(0, b, e))).ok());
  }
  const ActivationStats two = split.Finish();
  for (model::Matrix m : {model::Matrix::kQ, model::Matrix::kK, model::Matrix::kV}) {
    EXPECT_TRUE(at::equal(one->at(0, m).mean_abs, two.at(0, m).mean_abs));
    EXPECT_TRUE(at::equal(one->at(0, m).mean_sq, two.at(0, m).mean_sq));
  }
  // k, v and up share q's and gate's input: the same statistics, copied.
  EXPECT_TRUE(
      at::equal(one->at(1, model::Matrix::kV).mean_abs, one->at(1, model::Matrix::kQ).mean_abs));
  EXPECT_TRUE(at::equal(one->at(2, model::Matrix::kUp).mean_abs,
                        one->at(2, model::Matrix::kGate).mean_abs));
  for (int l = 0; l < 3; ++l) {
    for (int m = 0; m < 7; ++m) {
      const auto mm = static_cast<model::Matrix>(m);
      EXPECT_TRUE(at::allclose(one->at(l, mm).mean_abs, two.at(l, mm).mean_abs, 1e-5, 1e-7));
      EXPECT_EQ(two.at(l, mm).tokens, 8 * 12);
    }
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
    options_.salient_fraction = 0.01;
  }
  model::LlamaWeights weights_;
  ActivationStats stats_;
  UnitTableOptions options_;
};

TEST_F(UnitTableBuilderTest, EnumeratesUnitsInGlobalOrderWithHonestBits) {
  auto sq = BuildStageFits(weights_, stats_, options_, "fp");
  ASSERT_TRUE(sq.ok()) << sq.status();
  const plan::UnitTable& t = sq->table();
  // q,k,v,o,gate,up: 32 columns = 2 chunks each; down: 40 = 16+16+8 -> 3 chunks.
  EXPECT_EQ(UnitsPerLayer(weights_.config, 16), 15);
  ASSERT_EQ(t.units.size(), 45u);
  ASSERT_TRUE(t.Validate().ok());
  const plan::Unit& last = t.units[14];
  EXPECT_EQ(last.matrix, 6);
  EXPECT_EQ(last.cols, 8);
  EXPECT_EQ(last.col_begin, 32);
  for (const plan::Unit& u : t.units) {
    for (int a = 0; a < plan::kNumActions; ++a) {
      EXPECT_DOUBLE_EQ(u.bits[a], plan::UnitEffectiveBits(u.rows, u.cols, u.salient_count,
                                                          plan::kAllActions[a]));
    }
    EXPECT_LE(u.error[plan::ActionIndex(plan::Action::k8)],
              u.error[plan::ActionIndex(plan::Action::k4)] + 1e-9);
    EXPECT_LE(u.error[plan::ActionIndex(plan::Action::k4)],
              u.error[plan::ActionIndex(plan::Action::k2)] + 1e-9);
    for (float f : u.features) EXPECT_TRUE(std::isfinite(f));
  }
  // Bits of a uniform plan recounted independently: sum over units / weights.
  std::vector<int> plan(t.units.size(), plan::ActionIndex(plan::Action::k4));
  double bits = 0, n = 0;
  for (const plan::Unit& u : t.units) {
    bits += plan::UnitEffectiveBits(u.rows, u.cols, u.salient_count, plan::Action::k4);
    n += u.rows * u.cols;
  }
  EXPECT_DOUBLE_EQ(t.EffectiveBits(plan), bits / n);
  EXPECT_GT(t.EffectiveBits(plan), 4.0);
}

TEST_F(UnitTableBuilderTest, ApplyReplacesEachUnitByItsChosenAction) {
  auto sq = BuildStageFits(weights_, stats_, options_, "fp");
  ASSERT_TRUE(sq.ok());
  std::vector<int> plan(sq->table().units.size(), plan::ActionIndex(plan::Action::k16));
  plan[1] = plan::ActionIndex(plan::Action::k2);  // q_proj chunk 1 of layer 0
  ASSERT_TRUE(sq->CheckPlan(plan).ok());
  std::array<at::Tensor, model::kNumMatrices> lin;
  for (int m = 0; m < model::kNumMatrices; ++m) lin[m] = weights_.layers[0].linear[m].clone();
  sq->ApplyToLayer(0, plan, &lin);
  const at::Tensor q = lin[0];
  const at::Tensor orig = weights_.layers[0].linear[0];
  EXPECT_TRUE(at::equal(q.slice(1, 0, 16), orig.slice(1, 0, 16).to(at::kHalf).to(at::kFloat)));
  EXPECT_TRUE(
      at::equal(q.slice(1, 16, 32),
                sq->DequantizeUnit(1, plan::ActionIndex(plan::Action::k2), orig.slice(1, 16, 32))));
  EXPECT_FALSE(at::equal(q.slice(1, 16, 32), orig.slice(1, 16, 32)));
  plan[3] = 9;
  const absl::Status bad = sq->CheckPlan(plan);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("unit 3"), std::string::npos) << bad;
  EXPECT_FALSE(sq->CheckPlan(std::vector<int>(10, 0)).ok());
}

// A BF16 stage is fitted on its values widened to float32: the same table as the
// float32 stage holding those values.
TEST_F(UnitTableBuilderTest, StoredBf16FitsLikeItsFloat32Values) {
  model::LlamaWeights bf16 = weights_, f32 = weights_;
  for (size_t l = 0; l < weights_.layers.size(); ++l) {
    for (int m = 0; m < model::kNumMatrices; ++m) {
      bf16.layers[l].linear[m] = weights_.layers[l].linear[m].to(at::kBFloat16);
      f32.layers[l].linear[m] = bf16.layers[l].linear[m].to(at::kFloat);
    }
  }
  auto a = BuildStageFits(bf16, stats_, options_, "fp");
  auto b = BuildStageFits(f32, stats_, options_, "fp");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  ASSERT_EQ(a->table().units.size(), b->table().units.size());
  for (size_t i = 0; i < a->table().units.size(); ++i) {
    EXPECT_EQ(a->table().units[i].error, b->table().units[i].error);
    EXPECT_EQ(a->table().units[i].features, b->table().units[i].features);
    EXPECT_EQ(a->params(i).scales, b->params(i).scales);
  }
}

TEST_F(UnitTableBuilderTest, NonFiniteWeightsAreRejectedNamingTheTensor) {
  model::LlamaWeights w = weights_;
  w.layers[1].linear[4] = w.layers[1].linear[4].clone();
  w.layers[1].linear[4][3][5] = NAN;
  auto r = BuildStageFits(w, stats_, options_, "fp");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("model.layers.1.mlp.gate_proj.weight"), std::string::npos)
      << r.status();
}

TEST_F(UnitTableBuilderTest, StagesMergeIntoTheWholeTableAndRoundTripProto) {
  auto whole = BuildStageFits(weights_, stats_, options_, "fp");
  ASSERT_TRUE(whole.ok());
  ActivationStats s0 = stats_, s1 = stats_;
  s0.layers.resize(1);
  s1.first_layer = 1;
  s1.layers.erase(s1.layers.begin());
  auto a = BuildStageFits(Slice(weights_, 0, 1), s0, options_, "fp");
  auto b = BuildStageFits(Slice(weights_, 1, 3), s1, options_, "fp");
  ASSERT_TRUE(a.ok() && b.ok());
  v1::UnitTable proto;
  b->table().ToProto(&proto);
  auto b2 = plan::UnitTable::FromProto(proto);
  ASSERT_TRUE(b2.ok()) << b2.status();
  auto merged = plan::UnitTable::Merge({*b2, a->table()});
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(merged->units.size(), whole->table().units.size());
  for (size_t i = 0; i < merged->units.size(); ++i) {
    EXPECT_EQ(merged->units[i].id, whole->table().units[i].id);
    EXPECT_EQ(merged->units[i].bits, whole->table().units[i].bits);
    EXPECT_EQ(merged->units[i].error, whole->table().units[i].error);
  }
  EXPECT_FALSE(plan::UnitTable::Merge({b->table()}).ok());  // layer 0 missing
  b2->fingerprint = "other";
  EXPECT_FALSE(plan::UnitTable::Merge({a->table(), *b2}).ok());
  proto.mutable_units(0)->add_features(1.0f);
  EXPECT_FALSE(plan::UnitTable::FromProto(proto).ok());
}

}  // namespace
}  // namespace windquant::quant
