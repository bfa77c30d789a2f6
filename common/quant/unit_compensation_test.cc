// The compensated unit errors (unit_compensation.h) against their slow, obvious
// definition: GPTQ in its original form (Frantar et al. 2022, the inverse Hessian updated
// after every column: Hinv -= Hinv[:, j] Hinv[j, :] / Hinv[j, j]) in float64 on the
// unit's dampened diagonal block, each entry rounded by QuantizeEntry on the unit's
// fitted scales (salient entries to their INT8 value), then tr(D H D^T) / tr(W H W^T).
// The fast path rounds in float32 through the Cholesky factor, so the two agree within
// kReferenceTolerance, not bit for bit.
#include "common/quant/unit_compensation.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "common/model/llama_model.h"
#include "common/quant/calibration.h"
#include "common/quant/fit_kernels.h"
#include "common/quant/hessians.h"
#include "common/quant/quantizer.h"
#include "common/quant/unit_table_builder.h"
#include "gtest/gtest.h"

namespace windquant::quant {
namespace {

constexpr double kReferenceTolerance = 1e-3;  // relative, float32 path vs float64 definition
constexpr double kFitErrorTolerance = 1e-5;   // relative, diagonal Hessian vs ActionFit::error

// The definition (see the file comment) for one unit: w [rows, c], block [c, c] float64.
double ReferenceError(const at::Tensor& w, const at::Tensor& block, plan::Action a,
                      const std::vector<float>& scales, const std::vector<float>& offsets,
                      const SalientSet& salient) {
  const int64_t rows = w.size(0), c = w.size(1);
  at::Tensor hinv = at::inverse(block);
  at::Tensor cur = w.to(at::kDouble).clone();
  at::Tensor q = at::zeros_like(cur);
  for (int64_t j = 0; j < c; ++j) {
    for (int64_t r = 0; r < rows; ++r) {
      double v = 0;
      bool is_salient = false;
      for (int64_t k = 0; k < salient.count() && a != plan::Action::k16; ++k) {
        if (salient.index[k] == r * c + j) {  // (none at 16 bits: FP16 values whole)
          v = static_cast<double>(salient.codes[k]) * salient.scale;
          is_salient = true;
        }
      }
      if (!is_salient) {
        v = QuantizeEntry(a, static_cast<float>(cur[r][j].item<double>()),
                          scales.empty() ? 0.f : scales[r], offsets.empty() ? 0.f : offsets[r]);
      }
      q[r][j] = v;
    }
    const double d = hinv[j][j].item<double>();
    const at::Tensor e = (cur.select(1, j) - q.select(1, j)) / d;
    cur -= e.unsqueeze(1) * hinv[j].unsqueeze(0);
    hinv = hinv - hinv.select(1, j).unsqueeze(1).mm(hinv[j].unsqueeze(0)) / d;
  }
  const at::Tensor wd = w.to(at::kDouble), dd = wd - q;
  return (dd.mm(block) * dd).sum().item<double>() / (wd.mm(block) * wd).sum().item<double>();
}

// A random unit fitted for every action, and a correlated Hessian of its inputs.
struct TestUnit {
  at::Tensor w, s, h;
  UnitFit fit;
};

TestUnit MakeUnit(int64_t rows, int64_t cols, uint64_t seed) {
  at::manual_seed(seed);
  TestUnit t;
  t.w = at::randn({rows, cols}) * 0.1;
  const at::Tensor x =
      at::randn({400, cols}).mm(at::randn({cols, cols}) * 0.3 + at::eye(cols)) * 0.5;
  t.h = x.t().mm(x) * (2.0 / 400);
  t.s = x.abs().mean(0).contiguous();
  QuantizerOptions o;
  o.salient_fraction = 0.02;
  absl::StatusOr<UnitFit> f = FitUnit(t.w, t.s, plan::kAllActions, o);
  EXPECT_TRUE(f.ok()) << f.status();
  t.fit = *f;
  return t;
}

ColumnUnit Column(const TestUnit& t, plan::Action a) {
  const ActionFit* af = t.fit.Find(a);
  return {0,
          t.w.size(1),
          a,
          af->scales.empty() ? nullptr : af->scales.data(),
          af->offsets.empty() ? nullptr : af->offsets.data(),
          &t.fit.salient};
}

TEST(UnitCompensationTest, ErrorIsTheColumnByColumnDefinition) {
  const TestUnit t = MakeUnit(19, 40, 3);
  const at::Tensor block = DampedUnitBlock(t.h, 0, 40, 0.01);
  for (plan::Action a : plan::kAllActions) {
    absl::StatusOr<double> fast = CompensatedUnitError(t.w, block, Column(t, a), "unit");
    ASSERT_TRUE(fast.ok()) << fast.status();
    const ActionFit* af = t.fit.Find(a);
    const double want = ReferenceError(t.w, block, a, af->scales, af->offsets, t.fit.salient);
    EXPECT_NEAR(*fast, want, kReferenceTolerance * want + 1e-12) << plan::ActionName(a);
  }
}

// Compensation is what lowers the error: the same unit on a diagonal Hessian (nothing to
// compensate with) gives the plain rounding error; here, with s_j^2 on the diagonal, the
// fit's own activation-weighted error.
TEST(UnitCompensationTest, DiagonalHessianGivesTheFitsError) {
  const TestUnit t = MakeUnit(11, 32, 5);
  const at::Tensor block = at::diag(t.s.to(at::kDouble).pow(2));
  // (Not 16: its fit keeps no salient entries, the plan application does.)
  for (plan::Action a : {plan::Action::k8, plan::Action::k4, plan::Action::k3, plan::Action::k2,
                         plan::Action::k1_58, plan::Action::k1}) {
    absl::StatusOr<double> e = CompensatedUnitError(t.w, block, Column(t, a), "unit");
    ASSERT_TRUE(e.ok()) << e.status();
    const double want = t.fit.Find(a)->error;
    EXPECT_NEAR(*e, want, kFitErrorTolerance * want + 1e-12) << plan::ActionName(a);
  }
}

TEST(UnitCompensationTest, DampedBlockUsesTheWholeHessiansDiagonal) {
  at::Tensor h = at::diag(at::tensor({1.0f, 2.0f, 0.0f, 5.0f}));
  const at::Tensor b = DampedUnitBlock(h, 1, 2, 0.1);
  // mean diag with the dead input as 1: (1 + 2 + 1 + 5) / 4 = 2.25 -> damp 0.225.
  EXPECT_NEAR(b[0][0].item<double>(), 2.225, 1e-12);
  EXPECT_NEAR(b[1][1].item<double>(), 1.225, 1e-12);
  EXPECT_EQ(b.scalar_type(), at::kDouble);
}

TEST(UnitCompensationTest, NotPositiveDefiniteNamesTheUnit) {
  const TestUnit t = MakeUnit(4, 8, 7);
  const at::Tensor bad = -at::eye(8, at::kDouble);
  absl::StatusOr<double> e =
      CompensatedUnitError(t.w, bad, Column(t, plan::Action::k2), "layers.0 x");
  ASSERT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("layers.0 x"), std::string::npos) << e.status();
}

// A tiny random LLaMA (down_proj reads 40 inputs: with chunk 16 its last unit is 8 wide).
model::LlamaWeights TinyWeights(uint64_t seed) {
  at::manual_seed(seed);
  model::LlamaWeights w;
  auto& c = w.config;
  c.hidden_size = 32;
  c.intermediate_size = 40;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.vocab_size = 50;
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = true;
  w.embed_tokens = at::randn({50, 32}) * 0.5;
  w.final_norm = at::ones({32});
  w.lm_head = w.embed_tokens;
  for (int64_t l = 0; l < 2; ++l) {
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

// The stage pass: every unit's errors are the definition's on its block of the real
// calibration Hessian; parameters, bits, features and fingerprint are the plain fit's.
TEST(UnitCompensationTest, StageErrorsAreTheDefinitionAndNothingElseChanges) {
  const model::LlamaModel model(TinyWeights(9));
  at::manual_seed(10);
  const at::Tensor windows = at::randint(3, 50, {6, 16}, at::kLong);
  absl::StatusOr<ActivationStats> stats = CalibrateModel(model, windows, 3);
  ASSERT_TRUE(stats.ok()) << stats.status();
  absl::StatusOr<StageHessians> hessians = CollectModelHessians(model, windows, 3);
  ASSERT_TRUE(hessians.ok()) << hessians.status();
  UnitTableOptions options;
  options.chunk_size = 16;
  options.salient_fraction = 0.02;
  absl::StatusOr<StageFits> plain = BuildStageFits(model.weights(), *stats, options, "fp");
  ASSERT_TRUE(plain.ok()) << plain.status();
  absl::StatusOr<StageFits> comp =
      WithCompensatedUnitErrors(*plain, model.weights(), *hessians, 0.01);
  ASSERT_TRUE(comp.ok()) << comp.status();
  ASSERT_EQ(comp->table().units.size(), plain->table().units.size());
  EXPECT_EQ(comp->table().fingerprint, "fp");
  int lower = 0, total = 0;
  for (size_t i = 0; i < plain->table().units.size(); ++i) {
    const plan::Unit& p = plain->table().units[i];
    const plan::Unit& c = comp->table().units[i];
    EXPECT_EQ(p.bits, c.bits);
    EXPECT_EQ(p.features, c.features);
    EXPECT_EQ(plain->params(i).scales, comp->params(i).scales);
    EXPECT_EQ(plain->params(i).salient.index, comp->params(i).salient.index);
    const auto m = static_cast<model::Matrix>(p.matrix);
    const at::Tensor& h = hessians->layers[p.layer][static_cast<int>(InputKindOf(m))];
    const at::Tensor block = DampedUnitBlock(h, p.col_begin, p.cols, 0.01);
    const at::Tensor w = model.weights()
                             .layers[p.layer]
                             .linear[p.matrix]
                             .slice(1, p.col_begin, p.col_begin + p.cols)
                             .contiguous();
    for (int a = 1; a < plan::kNumActions; ++a) {
      const double want = ReferenceError(w, block, plan::kAllActions[a], comp->Scales(i, a),
                                         comp->Offsets(i, a), comp->params(i).salient);
      EXPECT_NEAR(c.error[a], want, kReferenceTolerance * want + 1e-12)
          << "unit " << i << " action " << plan::ActionName(plan::kAllActions[a]);
      total += 1;
      lower += c.error[a] < p.error[a] ? 1 : 0;
    }
  }
  // Different numbers from the plain rounding error (what makes a new cache entry needed).
  EXPECT_GT(lower, 0);
  EXPECT_EQ(total, 6 * static_cast<int>(plain->table().units.size()));
}

TEST(UnitCompensationTest, WrongWidthHessianNamesTheLinear) {
  const model::LlamaModel model(TinyWeights(11));
  const at::Tensor windows = at::randint(3, 50, {2, 8}, at::kLong);
  absl::StatusOr<ActivationStats> stats = CalibrateModel(model, windows, 2);
  ASSERT_TRUE(stats.ok());
  absl::StatusOr<StageHessians> hessians = CollectModelHessians(model, windows, 2);
  ASSERT_TRUE(hessians.ok());
  hessians->layers[1][static_cast<int>(InputKind::kDown)] = at::eye(32);
  UnitTableOptions options;
  options.chunk_size = 16;
  absl::StatusOr<StageFits> plain = BuildStageFits(model.weights(), *stats, options, "fp");
  ASSERT_TRUE(plain.ok());
  absl::StatusOr<StageFits> comp = WithCompensatedUnitErrors(*plain, model.weights(), *hessians);
  ASSERT_EQ(comp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(comp.status().message().find(model::LinearTensorName(1, model::Matrix::kDown)),
            std::string::npos)
      << comp.status();
}

}  // namespace
}  // namespace windquant::quant
