// Plans applied a layer at a time (QuantizedStage::PlanModel) against the slow, obvious
// reference: a float32 copy of every weight with each unit replaced by the ATen
// dequantization of its parameters (reference_quantizer.h). The logits and perplexities
// must be bit-identical, and on stories260k so must the exporter's files and the
// reconstruction of the first quantizer's own outputs.
#include "common/quant/quantized_stage.h"

#include <c10/core/GradMode.h>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <ATen/ATen.h>

#include "common/export/exporter.h"
#include "common/export/quantized_checkpoint.h"
#include "common/model/checkpoint.h"
#include "common/model/perplexity.h"
#include "common/quant/fit_kernels.h"
#include "common/quant/quantization_session.h"
#include "common/quant/reference_quantizer.h"
#include "common/quant/unit_table_builder.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"

namespace windquant::quant {
namespace {

model::LlamaWeights TinyWeights(uint64_t seed, at::ScalarType dtype) {
  at::manual_seed(seed);
  model::LlamaWeights w;
  auto& c = w.config;
  c.hidden_size = 32;
  c.intermediate_size = 40;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.vocab_size = 50;
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = true;
  w.embed_tokens = (at::randn({50, 32}) * 0.5).to(dtype);
  w.final_norm = at::ones({32}).to(dtype);
  w.lm_head = w.embed_tokens;
  const int64_t out[7] = {32, 16, 16, 32, 40, 40, 32};
  const int64_t in[7] = {32, 32, 32, 32, 32, 32, 40};
  for (int l = 0; l < 3; ++l) {
    model::LayerWeights lw;
    for (int m = 0; m < 7; ++m) lw.linear[m] = (at::randn({out[m], in[m]}) * 0.2).to(dtype);
    lw.input_layernorm = at::ones({32}).to(dtype);
    lw.post_attention_layernorm = at::ones({32}).to(dtype);
    w.layers.push_back(lw);
  }
  return w;
}

// The reference: float32 copies of every linear, each unit replaced by the ATen
// dequantization of its stored parameters.
model::LlamaWeights ReferencePlanWeights(const model::LlamaWeights& fp, const StageFits& fits,
                                         const std::vector<int>& actions) {
  model::LlamaWeights w = fp;
  for (auto& l : w.layers) {
    for (auto& m : l.linear) m = m.to(at::kFloat).clone();
  }
  const plan::UnitTable& t = fits.table();
  for (size_t i = 0; i < t.units.size(); ++i) {
    const plan::Unit& u = t.units[i];
    const int a = actions[u.id];
    at::Tensor cols = w.layers[u.layer - w.first_layer].linear[u.matrix].slice(
        1, u.col_begin, u.col_begin + u.cols);
    cols.copy_(reference::ReferenceDequantize(cols, plan::kAllActions[a], fits.Scales(i, a),
                                              fits.Offsets(i, a), fits.params(i).salient));
  }
  return w;
}

std::vector<int> MixedPlan(size_t n) {
  std::vector<int> a(n);
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<int>((i * 5 + 2) % plan::kNumActions);
  return a;
}

bool BitEqual(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

class QuantizedStageTest : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(QuantizedStageTest, PlanModelEqualsTheFloat32ReferenceBitForBit) {
  auto fp = std::make_shared<const model::LlamaModel>(TinyWeights(5, GetParam()));
  const at::Tensor windows = at::randint(3, 50, {4, 12}, at::kLong);
  auto stats = CalibrateModel(*fp, windows, 4);
  ASSERT_TRUE(stats.ok()) << stats.status();
  UnitTableOptions o;
  o.chunk_size = 16;
  o.salient_fraction = 0.02;
  auto fits = BuildStageFits(fp->weights(), *stats, o, "fp");
  ASSERT_TRUE(fits.ok()) << fits.status();
  auto stage = QuantizedStage::Create(fp, std::make_shared<const StageFits>(*std::move(fits)));
  ASSERT_TRUE(stage.ok()) << stage.status();
  const std::vector<int> plan = MixedPlan((*stage)->table().units.size());
  auto planned = (*stage)->PlanModel(std::make_shared<const std::vector<int>>(plan));
  ASSERT_TRUE(planned.ok()) << planned.status();

  // The plan model shares the stored weights: no copy of the stage.
  EXPECT_TRUE((*planned)->weights().layers[1].linear[4].is_same(fp->weights().layers[1].linear[4]));
  EXPECT_EQ((*planned)->weights().layers[1].linear[4].scalar_type(), GetParam());

  const model::LlamaModel reference(ReferencePlanWeights(fp->weights(), (*stage)->fits(), plan));
  for (int64_t l = 0; l < 3; ++l) {
    const auto got = (*planned)->LayerLinears(l);
    for (int m = 0; m < model::kNumMatrices; ++m) {
      EXPECT_TRUE(BitEqual(got[m], reference.weights().layers[l].linear[m])) << l << " " << m;
    }
  }
  c10::NoGradGuard no_grad;
  const at::Tensor ids = at::randint(3, 50, {2, 16}, at::kLong);
  EXPECT_TRUE(BitEqual((*planned)->Logits(ids), reference.Logits(ids)));
  // And the plan really changes the model.
  EXPECT_FALSE(at::equal((*planned)->Logits(ids), fp->Logits(ids)));
}

INSTANTIATE_TEST_SUITE_P(StoredDtypes, QuantizedStageTest,
                         ::testing::Values(at::kFloat, at::kBFloat16), [](const auto& info) {
                           return std::string(info.param == at::kFloat ? "f32" : "bf16");
                         });

TEST(QuantizedStageErrorsTest, BadPlansAndMismatchedFitsAreRejected) {
  auto fp = std::make_shared<const model::LlamaModel>(TinyWeights(6, at::kFloat));
  auto stats = CalibrateModel(*fp, at::randint(3, 50, {2, 8}, at::kLong), 2);
  ASSERT_TRUE(stats.ok());
  UnitTableOptions o;
  o.chunk_size = 16;
  auto fits = BuildStageFits(fp->weights(), *stats, o, "fp");
  ASSERT_TRUE(fits.ok());
  auto shared = std::make_shared<const StageFits>(*std::move(fits));
  auto stage = QuantizedStage::Create(fp, shared);
  ASSERT_TRUE(stage.ok());
  const size_t n = (*stage)->table().units.size();
  auto short_plan = (*stage)->PlanModel(std::make_shared<const std::vector<int>>(n - 1, 0));
  EXPECT_EQ(short_plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(short_plan.status().message().find("actions"), std::string::npos);
  std::vector<int> bad(n, 0);
  bad[7] = plan::kNumActions;
  auto out_of_range = (*stage)->PlanModel(std::make_shared<const std::vector<int>>(bad));
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_range.status().message().find("unit 7"), std::string::npos);
  // Fits of other layers than the model's.
  model::LlamaWeights two = TinyWeights(6, at::kFloat);
  two.layers.resize(2);
  auto other = QuantizedStage::Create(std::make_shared<const model::LlamaModel>(two), shared);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("layers [0, 3)"), std::string::npos) << other.status();
}

// The exporter: the quantized checkpoint reads back to the weights of `planned`, the
// fake-quant checkpoint holds their FP16 rounding.
void ExpectExportHoldsThePlan(const QuantizationSession& s, const std::vector<int>& actions,
                              const model::LlamaModel& planned) {
  const plan::Plan plan = s.MakePlan(actions, "test", 0);
  const exporter::ExportInputs in = exporter::SessionExportInputs(s, plan);
  const std::string dir = ::testing::TempDir() + "/quantized_stage_test_export";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(exporter::WriteQuantizedCheckpoint(in, dir + "/q").ok());
  ASSERT_TRUE(exporter::WriteFakeQuantCheckpoint(in, dir + "/f").ok());
  auto q = exporter::QuantizedCheckpoint::Open(dir + "/q");
  ASSERT_TRUE(q.ok()) << q.status();
  auto back = (*q)->ReadAll();
  ASSERT_TRUE(back.ok()) << back.status();
  auto fake = model::Checkpoint::Open(dir + "/f");
  ASSERT_TRUE(fake.ok()) << fake.status();
  auto fake_w = (*fake)->LoadWeights(model::LoadRequest{});
  ASSERT_TRUE(fake_w.ok());
  for (int64_t l = 0; l < s.model().config().num_hidden_layers; ++l) {
    const auto lin = planned.LayerLinears(l);
    for (int m = 0; m < model::kNumMatrices; ++m) {
      // Equal values; not the same bits where the plan has -0 (a small negative weight
      // rounded to code 0): code 0 reads back as +0.
      EXPECT_TRUE(at::equal(back->layers[l].linear[m], lin[m])) << l << " " << m;
      EXPECT_TRUE(BitEqual(fake_w->layers[l].linear[m], lin[m].to(at::kHalf)));
    }
  }
}

// The first quantizer's outputs on every unit of the model, rebuilt from its own
// parameters by the fast kernel: bit for bit, every action.
void ExpectFastKernelRebuildsReferenceFits(const QuantizationSession& s) {
  const plan::UnitTable& t = s.table();
  for (const plan::Unit& u : t.units) {
    const at::Tensor W = s.model()
                             .weights()
                             .layers[u.layer]
                             .linear[u.matrix]
                             .slice(1, u.col_begin, u.col_begin + u.cols)
                             .contiguous();
    const at::Tensor act = s.activation_stats()
                               .at(u.layer, static_cast<model::Matrix>(u.matrix))
                               .mean_abs.slice(0, u.col_begin, u.col_begin + u.cols)
                               .contiguous();
    auto ref = reference::ReferenceFitUnit(W, act, plan::kAllActions);
    ASSERT_TRUE(ref.ok());
    SalientSet sal;
    const at::Tensor idx = ref->salient.index.to(at::kInt).contiguous();
    sal.index.assign(idx.data_ptr<int32_t>(), idx.data_ptr<int32_t>() + idx.numel());
    sal.codes.assign(ref->salient.codes.data_ptr<int8_t>(),
                     ref->salient.codes.data_ptr<int8_t>() + ref->salient.codes.numel());
    sal.scale = ref->salient.scale;
    for (const auto& rf : ref->fits) {
      std::vector<float> scales, offsets;
      if (rf.scales.defined())
        scales.assign(rf.scales.data_ptr<float>(), rf.scales.data_ptr<float>() + rf.scales.numel());
      if (rf.offsets.defined())
        offsets.assign(rf.offsets.data_ptr<float>(),
                       rf.offsets.data_ptr<float>() + rf.offsets.numel());
      at::Tensor out = at::empty({u.rows, u.cols}, at::kFloat);
      DequantizeKernel(UnitView{W.data_ptr<float>(), u.cols, u.rows, u.cols}, rf.action,
                       scales.data(), offsets.data(), sal, out.data_ptr<float>(), u.cols);
      EXPECT_TRUE(BitEqual(out, rf.dequant))
          << plan::UnitName(u) << " " << plan::ActionName(rf.action);
    }
  }
}

// The real test model (stories260k, or the default model on a fresh clone) through the
// session: `eval --plan`'s model, the exporter's two files and the float32 reference
// agree bit for bit, and the parameters of the first (ATen) quantizer are reconstructed
// bit for bit by the fast kernel.
TEST(QuantizedStageRealModelTest, EvalPlanExportAndReferenceAgreeBitForBit) {
  const testing::TestModel m = testing::RealModel();
  SessionOptions so;
  so.model_dir = m.dir;
  so.calibration.text = m.text_path;
  so.calibration.samples = 8;
  so.calibration.seq_len = 128;
  so.heldout.text = so.calibration.text;
  so.context = 128;
  // The same windows per forward as the reference's below: the nll is compared bit for bit,
  // which holds only where both run the same reductions (another batch shape may take
  // another BLAS kernel on another CPU).
  so.batch = 4;
  so.units.chunk_size = 64;
  so.use_cache = false;
  auto session = QuantizationSession::Create(so);
  ASSERT_TRUE(session.ok()) << session.status();
  const QuantizationSession& s = **session;
  const std::vector<int> actions = MixedPlan(s.table().units.size());

  // eval --plan (the session's plan model) vs the float32 reference.
  auto planned = s.PlanModel(actions);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const model::LlamaModel reference(ReferencePlanWeights(s.model().weights(), s.fits(), actions));
  model::PerplexityOptions po;
  po.context = 128;
  po.batch_size = 4;
  po.max_tokens = 2048;
  auto p_plan = model::ComputePerplexity(**planned, s.eval_ids(), po);
  auto p_ref = model::ComputePerplexity(reference, s.eval_ids(), po);
  ASSERT_TRUE(p_plan.ok() && p_ref.ok());
  EXPECT_EQ(p_plan->nll, p_ref->nll);
  auto p_session = s.Perplexity(actions, 2048);
  ASSERT_TRUE(p_session.ok());
  EXPECT_EQ(p_session->nll, p_ref->nll);

  ASSERT_NO_FATAL_FAILURE(ExpectExportHoldsThePlan(s, actions, **planned));
  ASSERT_NO_FATAL_FAILURE(ExpectFastKernelRebuildsReferenceFits(s));
}

}  // namespace
}  // namespace windquant::quant
