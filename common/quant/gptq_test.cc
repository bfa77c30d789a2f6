// Error compensation (gptq.h) against its slow, obvious definition: one column at a
// time in ATen, each column quantized by the reference dequantization of its unit
// (reference_quantizer.h) and its error carried into every later column at once. The
// fast path (row groups, lazy blocks) gives every entry the same float32 operations in
// the same order (there is no reduction), so the two must agree bit for bit. The factor
// is checked against float64 algebra within kFactorTolerance, and on the real model
// the packed export decodes bit for bit to the compensated weights the evaluation uses.
#include "common/quant/gptq.h"

#include <filesystem>
#include <string>
#include <vector>

#include "common/config/run_config.h"
#include "common/export/exporter.h"
#include "common/quant/fit_kernels.h"
#include "common/quant/gptq_kernels.h"
#include "common/quant/gptq_torch.h"
#include "common/quant/hessians.h"
#include "common/quant/quantization_session.h"
#include "common/quant/quantizer.h"
#include "common/quant/reference_quantizer.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/test_paths.h"
#include "common/testing/tiny_weights.h"
#include "gtest/gtest.h"

namespace windquant::quant {
namespace {

constexpr double kFactorTolerance = 1e-5;  // U^T U vs (H + damp)^-1, relative to max

// Correlated inputs X [n, in] (a random mixing of independent columns) and H = 2/n X^T X.
at::Tensor CorrelatedHessian(int64_t in, int64_t n, uint64_t seed) {
  at::manual_seed(seed);
  const at::Tensor x = at::randn({n, in}).mm(at::randn({in, in}) * 0.3 + at::eye(in));
  return x.t().mm(x) * (2.0 / static_cast<double>(n));
}

// A linear of `rows` x `in` cut in units of `chunk` columns, each fitted for its action.
struct TestLinear {
  at::Tensor w;
  std::vector<UnitFit> fits;
  std::vector<ColumnUnit> units;
};

TestLinear MakeLinear(int64_t rows, int64_t in, int64_t chunk,
                      const std::vector<plan::Action>& actions, uint64_t seed) {
  at::manual_seed(seed);
  TestLinear t;
  t.w = at::randn({rows, in}) * 0.1;
  const at::Tensor s = at::rand({in}) + 0.1;
  QuantizerOptions o;
  o.salient_fraction = 0.02;
  for (int64_t c0 = 0, k = 0; c0 < in; c0 += chunk, ++k) {
    const int64_t c = std::min(chunk, in - c0);
    absl::StatusOr<UnitFit> f = FitUnit(t.w.slice(1, c0, c0 + c).contiguous(),
                                        s.slice(0, c0, c0 + c).contiguous(), plan::kAllActions, o);
    EXPECT_TRUE(f.ok()) << f.status();
    t.fits.push_back(*f);
    t.units.push_back({c0, c, actions[k % actions.size()], nullptr, nullptr, nullptr});
  }
  for (size_t k = 0; k < t.units.size(); ++k) {
    const ActionFit* af = t.fits[k].Find(t.units[k].action);
    t.units[k].scales = af->scales.empty() ? nullptr : af->scales.data();
    t.units[k].offsets = af->offsets.empty() ? nullptr : af->offsets.data();
    t.units[k].salient = &t.fits[k].salient;
  }
  return t;
}

// The definition, one column at a time.
at::Tensor ReferenceCompensate(const TestLinear& t, const at::Tensor& u) {
  at::Tensor w = t.w.clone();
  const int64_t in = w.size(1);
  for (size_t k = 0; k < t.units.size(); ++k) {
    const ColumnUnit& cu = t.units[k];
    const ActionFit* af = t.fits[k].Find(cu.action);
    for (int64_t j = cu.col_begin; j < cu.col_begin + cu.cols; ++j) {
      const at::Tensor cols = w.slice(1, cu.col_begin, cu.col_begin + cu.cols).contiguous();
      const at::Tensor q =
          reference::ReferenceDequantize(cols, cu.action, af->scales, af->offsets, *cu.salient)
              .select(1, j - cu.col_begin);
      const at::Tensor e = (w.select(1, j) - q) / u[j][j];
      w.select(1, j).copy_(q);
      if (j + 1 < in) {
        at::Tensor rest = w.slice(1, j + 1, in);
        rest.copy_(rest - e.unsqueeze(1) * u[j].slice(0, j + 1, in).unsqueeze(0));
      }
    }
  }
  return w;
}

TEST(GptqTest, QuantizeEntryIsTheKernelsDequantization) {
  at::manual_seed(3);
  const int64_t rows = 16, cols = 40;
  at::Tensor w = at::randn({rows, cols}) * 0.2;
  // Entries on rounding midpoints and past the clamp for a scale of 0.0625.
  w[0].copy_(at::arange(cols).to(at::kFloat) * 0.03125 - 0.6);
  std::vector<float> scales(rows, 0.0625f), offsets(rows);
  for (int64_t r = 1; r < rows; ++r) scales[r] = RoundToHalf(0.01f + 0.013f * r);
  for (int64_t r = 0; r < rows; ++r) offsets[r] = RoundToHalf(0.01f * (r - 8));
  for (plan::Action a : plan::kAllActions) {
    std::vector<float> out(rows * cols);
    DequantizeKernel(UnitView{w.data_ptr<float>(), cols, rows, cols}, a, scales.data(),
                     offsets.data(), SalientSet{}, out.data(), cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(QuantizeEntry(a, w[r][c].item<float>(), scales[r], offsets[r]), out[r * cols + c])
            << plan::ActionName(a) << " at " << r << "," << c;
      }
    }
  }
}

// The factoring runs in place in one float64 buffer; it must give what ATen's
// out-of-place composition gives, bit for bit, and so must the packed factors.
TEST(GptqTest, InPlaceFactorIsTheOutOfPlaceCompositionBitForBit) {
  for (int64_t n : {1, 7, 48, 300, 1100}) {
    const at::Tensor h = CorrelatedHessian(n, 2 * n + 10, static_cast<int>(n));
    absl::StatusOr<at::Tensor> u = InverseHessianFactor(h, 0.01, "test");
    ASSERT_TRUE(u.ok()) << u.status();
    at::Tensor damped = h.to(at::kDouble);
    at::Tensor diag = damped.diagonal();
    diag.add_(0.01 * diag.mean().item<double>());
    auto [lower, info] = at::linalg_cholesky_ex(damped);
    auto [upper, info2] = at::linalg_cholesky_ex(at::cholesky_inverse(lower), /*upper=*/true);
    ASSERT_EQ(info.item<int64_t>() + info2.item<int64_t>(), 0);
    EXPECT_TRUE(at::equal(upper.to(at::kFloat).contiguous(), *u)) << "n " << n;
    // Through Create (the widened Hessian it owns, packed from the column-major result).
    StageHessians hs;
    hs.layers.resize(1);
    for (int k = 0; k < kNumInputKinds; ++k) hs.layers[0][k] = h.to(at::kDouble);
    absl::StatusOr<GptqFactors> f = GptqFactors::Create(std::move(hs));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_TRUE(at::equal(f->Layer(0)->Of(model::Matrix::kDown).Dense(), *u)) << "n " << n;
  }
}

TEST(GptqTest, FactorIsTheCholeskyOfTheDampedInverse) {
  const at::Tensor h = CorrelatedHessian(48, 400, 5);
  absl::StatusOr<at::Tensor> u = InverseHessianFactor(h, 0.01, "test");
  ASSERT_TRUE(u.ok()) << u.status();
  const at::Tensor hd = h.to(at::kDouble);
  const at::Tensor damped = hd + at::eye(48, at::kDouble) * (0.01 * hd.diagonal().mean());
  const at::Tensor want = at::inverse(damped);
  const at::Tensor ud = u->to(at::kDouble);
  EXPECT_TRUE(at::equal(at::triu(*u), *u));
  const double err = (ud.t().mm(ud) - want).abs().max().item<double>();
  EXPECT_LE(err, kFactorTolerance * want.abs().max().item<double>());
}

TEST(GptqTest, FastPathIsTheColumnByColumnDefinitionBitForBit) {
  const int64_t rows = 21, in = 100;
  const std::vector<plan::Action> actions = {
      plan::Action::k2, plan::Action::k3, plan::Action::k1_58, plan::Action::k1, plan::Action::k4};
  const TestLinear t = MakeLinear(rows, in, 24, actions, 7);
  absl::StatusOr<at::Tensor> u = InverseHessianFactor(CorrelatedHessian(in, 300, 8), 0.01, "t");
  ASSERT_TRUE(u.ok()) << u.status();
  const at::Tensor want = ReferenceCompensate(t, *u);
  std::vector<GptqOptions> options;
  std::vector<TrailingUpdateFn> kernels = {nullptr, &gptq_baseline::TrailingUpdate};
  if (__builtin_cpu_supports("avx2")) kernels.push_back(&gptq_avx2::TrailingUpdate);
  for (TrailingUpdateFn k : kernels) {
    for (const auto& [block, group] :
         std::vector<std::pair<int64_t, int64_t>>{{128, 16}, {7, 5}, {1, 1}, {33, 64}, {20, 9}}) {
      GptqOptions o;
      o.block_columns = block;
      o.row_group = group;
      o.trailing = k;
      options.push_back(o);
    }
  }
  for (const GptqOptions& o : options) {
    at::Tensor w = t.w.clone();
    at::Tensor from = at::empty_like(w);
    CompensateLinear(t.units, *u, &w, &from, o);
    EXPECT_TRUE(at::equal(w, want)) << "block " << o.block_columns << " group " << o.row_group
                                    << ": max diff " << (w - want).abs().max().item<float>();
    // The exporter's codes: the kernel's dequantization of `from` is the result.
    for (size_t k = 0; k < t.units.size(); ++k) {
      const ColumnUnit& cu = t.units[k];
      const at::Tensor f = from.slice(1, cu.col_begin, cu.col_begin + cu.cols).contiguous();
      at::Tensor deq = at::empty_like(f);
      DequantizeKernel(UnitView{f.data_ptr<float>(), cu.cols, rows, cu.cols}, cu.action, cu.scales,
                       cu.offsets, *cu.salient, deq.data_ptr<float>(), cu.cols);
      EXPECT_TRUE(at::equal(deq, w.slice(1, cu.col_begin, cu.col_begin + cu.cols))) << "unit " << k;
    }
  }
}

// Both builds of the trailing update against the definition, on ragged tile edges.
TEST(GptqTest, TrailingUpdateBuildsAreTheDefinitionBitForBit) {
  at::manual_seed(21);
  const int64_t rows = 11, nj = 13, cols = 45, ws = 50, es = 16;
  const at::Tensor e = at::randn({rows, es}), u = at::randn({nj, cols}), w0 = at::randn({rows, ws});
  std::vector<const float*> urow(nj);
  for (int64_t j = 0; j < nj; ++j) urow[j] = u.data_ptr<float>() + j * cols;
  at::Tensor want = w0.clone();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t j = 0; j < nj; ++j) {
        const float p = e[r][j].item<float>() * u[j][c].item<float>();
        want[r][c] = want[r][c].item<float>() - p;
      }
    }
  }
  std::vector<TrailingUpdateFn> kernels = {&gptq_baseline::TrailingUpdate};
  if (__builtin_cpu_supports("avx2")) kernels.push_back(&gptq_avx2::TrailingUpdate);
  for (TrailingUpdateFn k : kernels) {
    at::Tensor w = w0.clone();
    k(e.data_ptr<float>(), es, urow.data(), nj, w.data_ptr<float>(), ws, rows, cols);
    EXPECT_TRUE(at::equal(w, want)) << (w - want).abs().max().item<float>();
  }
}

TEST(GptqTest, PackedFactorHoldsTheUpperTriangle) {
  at::manual_seed(4);
  const at::Tensor u = at::randn({37, 37});
  const PackedUpper p = PackedUpper::Pack(u);
  EXPECT_EQ(p.n(), 37);
  EXPECT_EQ(p.Bytes(), 37 * 38 / 2 * 4);
  EXPECT_TRUE(at::equal(p.Dense(), at::triu(u)));
  for (int64_t j : {0, 1, 20, 36}) {
    for (int64_t k = j; k < 37; ++k) ASSERT_EQ(p.RowBase(j)[k], u[j][k].item<float>());
  }
}

// A stage of random weights (hidden 16, intermediate 24).
model::LlamaModel TinyModel(int64_t layers) {
  return model::LlamaModel(testing::TinyLayerWeights(layers));
}

void ExpectSameFactors(const GptqFactors& got, const GptqFactors& want) {
  ASSERT_EQ(got.first_layer(), want.first_layer());
  ASSERT_EQ(got.end_layer(), want.end_layer());
  for (int64_t l = got.first_layer(); l < got.end_layer(); ++l) {
    absl::StatusOr<LayerFactors> g = got.Layer(l), w = want.Layer(l);
    ASSERT_TRUE(g.ok() && w.ok()) << g.status() << " " << w.status();
    for (int m = 0; m < model::kNumMatrices; ++m) {
      const auto mat = static_cast<model::Matrix>(m);
      EXPECT_TRUE(at::equal(g->Of(mat).Dense(), w->Of(mat).Dense()))
          << "layer " << l << " matrix " << m;
    }
  }
}

// One layer at a time gives the factors of all layers' Hessians collected in one pass.
TEST(GptqTest, LayerByLayerFactorsAreTheOnePassFactors) {
  const model::LlamaModel model = TinyModel(3);
  at::manual_seed(9);
  std::vector<at::Tensor> inputs = {at::randn({2, 8, 16}), at::randn({3, 5, 16})};
  HessianCollector all(model, 0, 3);
  for (const at::Tensor& x : inputs) ASSERT_TRUE(all.RunStage(x).ok());
  absl::StatusOr<StageHessians> h = all.Finish();
  ASSERT_TRUE(h.ok()) << h.status();
  absl::StatusOr<GptqFactors> want = GptqFactors::Create(*h);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<GptqFactors> got = GptqFactors::FromInputs(model, 0, 3, inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->end_layer(), 3);
  EXPECT_EQ(got->Bytes(), want->Bytes());
  EXPECT_EQ(want->Bytes(), 3 * 4 * (3 * 16 * 17 / 2 + 24 * 25 / 2));
  ExpectSameFactors(*got, *want);
  // Spilled to a scratch file: the same values read back, nothing resident, no file left
  // with a name in the directory.
  testing::ScopedTestDir dir("gptq-spill");
  GptqOptions spill;
  spill.spill_dir = dir.path() + "/factors";
  absl::StatusOr<GptqFactors> spilled = GptqFactors::FromInputs(model, 0, 3, inputs, spill);
  ASSERT_TRUE(spilled.ok()) << spilled.status();
  EXPECT_EQ(spilled->Bytes(), want->Bytes());
  EXPECT_EQ(spilled->ResidentBytes(), 0);
  EXPECT_EQ(want->ResidentBytes(), want->Bytes());
  EXPECT_TRUE(std::filesystem::is_empty(spill.spill_dir));
  ExpectSameFactors(*spilled, *want);
  EXPECT_EQ(spilled->Layer(3).status().code(), absl::StatusCode::kOutOfRange);
  // Two stages' factors as one, sharing their storage.
  absl::StatusOr<GptqFactors> a = GptqFactors::FromInputs(model, 0, 1, inputs);
  ASSERT_TRUE(a.ok()) << a.status();
  StageHessians rest = *h;
  rest.first_layer = 1;
  rest.layers.erase(rest.layers.begin());
  absl::StatusOr<GptqFactors> b = GptqFactors::Create(rest);
  ASSERT_TRUE(b.ok()) << b.status();
  auto pa = std::make_shared<const GptqFactors>(*std::move(a));
  auto pb = std::make_shared<const GptqFactors>(*std::move(b));
  absl::StatusOr<GptqFactors> both = GptqFactors::Concat({pa, pb});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->first_layer(), 0);
  EXPECT_EQ(both->end_layer(), 3);
  EXPECT_EQ(both->Layer(2)->Of(model::Matrix::kDown).RowBase(0),
            pb->Layer(2)->Of(model::Matrix::kDown).RowBase(0));
  // A spilled stage and one in memory as one.
  auto ps = std::make_shared<const GptqFactors>(*std::move(spilled));
  absl::StatusOr<GptqFactors> mixed = GptqFactors::Concat({pa, pb});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  absl::StatusOr<GptqFactors> tail = GptqFactors::Concat({ps});
  ASSERT_TRUE(tail.ok()) << tail.status();
  ExpectSameFactors(*tail, *mixed);
  absl::StatusOr<GptqFactors> gap = GptqFactors::Concat({pb, pa});
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(gap.status().message().find("stage 1 starts at layer 0"), std::string::npos)
      << gap.status();
}

// Also for a unit at 16 bits: its FP16 values, no salient entries (as DequantizeKernel).
TEST(GptqTest, DiagonalHessianChangesNothing) {
  const TestLinear t =
      MakeLinear(9, 50, 16, {plan::Action::k2, plan::Action::k16, plan::Action::k3}, 11);
  absl::StatusOr<at::Tensor> u = InverseHessianFactor(at::diag(at::rand({50}) + 0.5), 0.01, "diag");
  ASSERT_TRUE(u.ok()) << u.status();
  at::Tensor w = t.w.clone();
  CompensateLinear(t.units, *u, &w, nullptr);
  for (size_t k = 0; k < t.units.size(); ++k) {
    const ColumnUnit& cu = t.units[k];
    const at::Tensor cols = t.w.slice(1, cu.col_begin, cu.col_begin + cu.cols).contiguous();
    const ActionFit* af = t.fits[k].Find(cu.action);
    const at::Tensor plain =
        reference::ReferenceDequantize(cols, cu.action, af->scales, af->offsets, *cu.salient);
    EXPECT_TRUE(at::equal(plain, w.slice(1, cu.col_begin, cu.col_begin + cu.cols)));
  }
}

// What compensation is for: the output error tr(D H D^T), D = W - What, on the inputs of
// H, is lower than rounding every unit on its own.
TEST(GptqTest, LowersTheOutputErrorOnCorrelatedInputs) {
  for (plan::Action a : {plan::Action::k2, plan::Action::k3}) {
    const int64_t in = 96;
    const TestLinear t = MakeLinear(32, in, 32, {a}, 13);
    const at::Tensor h = CorrelatedHessian(in, 500, 14);
    absl::StatusOr<at::Tensor> u = InverseHessianFactor(h, 0.01, "t");
    ASSERT_TRUE(u.ok()) << u.status();
    at::Tensor comp = t.w.clone();
    CompensateLinear(t.units, *u, &comp, nullptr);
    at::Tensor plain = t.w.clone();
    for (size_t k = 0; k < t.units.size(); ++k) {
      const ColumnUnit& cu = t.units[k];
      const ActionFit* af = t.fits[k].Find(cu.action);
      at::Tensor cols = plain.slice(1, cu.col_begin, cu.col_begin + cu.cols);
      cols.copy_(reference::ReferenceDequantize(cols.contiguous(), cu.action, af->scales,
                                                af->offsets, *cu.salient));
    }
    auto out_err = [&](const at::Tensor& q) {
      const at::Tensor d = (t.w - q).to(at::kDouble);
      return d.mm(h.to(at::kDouble)).mul(d).sum().item<double>();
    };
    EXPECT_LT(out_err(comp), 0.8 * out_err(plain)) << plan::ActionName(a);
  }
}

// The exporter's invariant: the kernels' dequantization of `from` is `w`, unit by unit.
void ExpectCodesOfFrom(const TestLinear& t, const at::Tensor& from, const at::Tensor& w) {
  for (size_t k = 0; k < t.units.size(); ++k) {
    const ColumnUnit& cu = t.units[k];
    const at::Tensor f = from.slice(1, cu.col_begin, cu.col_begin + cu.cols).contiguous();
    at::Tensor deq = at::empty_like(f);
    DequantizeKernel(UnitView{f.data_ptr<float>(), cu.cols, f.size(0), cu.cols}, cu.action,
                     cu.scales, cu.offsets, *cu.salient, deq.data_ptr<float>(), cu.cols);
    EXPECT_TRUE(at::equal(deq, w.slice(1, cu.col_begin, cu.col_begin + cu.cols))) << "unit " << k;
  }
}

// Through the torch ops in one block (no GEMM) every entry gets the definition's
// operations, so the CPU path's bits: weights, quantized-from values, codes.
void ExpectOneBlockIsTheCpuPath(const TestLinear& t, uint64_t seed) {
  const int64_t in = t.w.size(1);
  absl::StatusOr<at::Tensor> u = InverseHessianFactor(CorrelatedHessian(in, 400, seed), 0.01, "t");
  ASSERT_TRUE(u.ok()) << u.status();
  const PackedUpper packed = PackedUpper::Pack(*u);
  at::Tensor want = t.w.clone(), want_from = at::empty_like(want);
  CompensateLinear(t.units, packed, &want, &want_from);
  GptqOptions one_block;
  one_block.block_columns = in;
  at::Tensor got = t.w.clone(), got_from = at::empty_like(got);
  CompensateLinearTorch(t.units, packed, &got, &got_from, one_block);
  EXPECT_TRUE(at::equal(got, want)) << "max diff " << (got - want).abs().max().item<float>();
  EXPECT_TRUE(at::equal(got_from, want_from));
  ExpectCodesOfFrom(t, got_from, got);
}

TEST(GptqTorchTest, OneBlockIsTheCpuPathBitForBit) {
  // All seven actions with their salient entries.
  ExpectOneBlockIsTheCpuPath(
      MakeLinear(19, 7 * 24, 24, {plan::kAllActions.begin(), plan::kAllActions.end()}, 21), 22);
  // A zero row with zero scales at 3 and 2 bits: 0 / 0 is NaN, which the CPU's clamp
  // turns into a zero value.
  TestLinear t = MakeLinear(8, 64, 32, {plan::Action::k3, plan::Action::k2}, 23);
  t.w[2].zero_();
  std::vector<std::vector<float>> scales;
  const SalientSet none;
  for (ColumnUnit& cu : t.units) {
    scales.emplace_back(cu.scales, cu.scales + 8);
    scales.back()[2] = 0.0f;
    cu.scales = scales.back().data();
    cu.salient = &none;
  }
  ExpectOneBlockIsTheCpuPath(t, 24);
}

// In blocks the trailing update is a GEMM: each entry's terms summed in another order,
// so the values quantized from differ in the last bits (within 1e-5 of the largest) and
// a rounding may flip; the output error tr(D H D^T) within 1 % of the CPU path's, and
// the codes still those of the values quantized from.
TEST(GptqTorchTest, BlocksKeepTheOutputErrorOfTheCpuPath) {
  const int64_t rows = 64, in = 192;
  const TestLinear t =
      MakeLinear(rows, in, 32, {plan::Action::k2, plan::Action::k3, plan::Action::k4}, 23);
  const at::Tensor h = CorrelatedHessian(in, 600, 24);
  absl::StatusOr<at::Tensor> u = InverseHessianFactor(h, 0.01, "t");
  ASSERT_TRUE(u.ok()) << u.status();
  const PackedUpper packed = PackedUpper::Pack(*u);
  auto out_err = [&](const at::Tensor& q) {
    const at::Tensor d = (t.w - q).to(at::kDouble);
    return d.mm(h.to(at::kDouble)).mul(d).sum().item<double>();
  };
  at::Tensor cpu = t.w.clone(), cpu_from = at::empty_like(cpu);
  CompensateLinear(t.units, packed, &cpu, &cpu_from);
  const double scale = cpu_from.abs().max().item<double>();
  for (int64_t block : {1, 16, 50, 128}) {
    GptqOptions o;
    o.block_columns = block;
    at::Tensor got = t.w.clone(), from = at::empty_like(got);
    CompensateLinearTorch(t.units, packed, &got, &from, o);
    EXPECT_NEAR(out_err(got) / out_err(cpu), 1.0, 0.01) << "block " << block;
    EXPECT_LE((from - cpu_from).abs().max().item<double>(), 1e-5 * scale) << "block " << block;
    ExpectCodesOfFrom(t, from, got);
  }
}

// The whole device path (the factor made with torch ops, gptq_torch.h, then the torch
// compensation in blocks) keeps the output error tr(D H D^T) of the CPU path (its factor,
// CompensateLinear) within 1 %, also with dead inputs.
TEST(GptqTorchTest, DeviceFactorKeepsTheOutputErrorOfTheCpuPath) {
  const int64_t rows = 64, in = 192;
  const TestLinear t =
      MakeLinear(rows, in, 32, {plan::Action::k2, plan::Action::k3, plan::Action::k4}, 25);
  at::Tensor h = CorrelatedHessian(in, 600, 26);
  for (int64_t j : {3, 100}) {
    h[j].zero_();
    h.select(1, j).zero_();
  }
  auto out_err = [&](const at::Tensor& q) {
    const at::Tensor d = (t.w - q).to(at::kDouble);
    return d.mm(h.to(at::kDouble)).mul(d).sum().item<double>();
  };
  absl::StatusOr<at::Tensor> u = InverseHessianFactor(h, 0.01, "t");
  ASSERT_TRUE(u.ok()) << u.status();
  at::Tensor cpu = t.w.clone();
  CompensateLinear(t.units, PackedUpper::Pack(*u), &cpu, nullptr);
  absl::StatusOr<TorchFactor> f = InverseHessianFactorTorch(h, 0.01, "t");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(CheckTorchFactors({f->failure}, {"t"}).ok());
  GptqOptions o;
  o.block_columns = 64;
  at::Tensor got = t.w.clone();
  CompensateLinearTorch(t.units, f->u, &got, nullptr, o);
  EXPECT_NEAR(out_err(got) / out_err(cpu), 1.0, 0.01);
  // Compensation did something: rounding alone is worse.
  at::Tensor plain = t.w.clone();
  CompensateLinearTorch(t.units, PackedUpper::Pack(at::eye(in)), &plain, nullptr, o);
  EXPECT_GT(out_err(plain), 1.1 * out_err(cpu));
}

TEST(GptqTest, FactorsNameTheLayerAndInputOfABadHessian) {
  StageHessians h;
  h.first_layer = 2;
  h.layers.resize(1);
  for (int k = 0; k < kNumInputKinds; ++k) h.layers[0][k] = at::eye(4) * 2;
  h.layers[0][static_cast<int>(InputKind::kDown)] = at::full({4, 4}, NAN);
  absl::StatusOr<GptqFactors> f = GptqFactors::Create(h);
  ASSERT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("layer 2 down input"), std::string::npos) << f.status();
  h.layers[0][static_cast<int>(InputKind::kDown)] = at::Tensor();
  f = GptqFactors::Create(h);
  ASSERT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("missing"), std::string::npos) << f.status();
}

// On the real model with quant.compensation: gptq, a mixed plan's packed export decodes
// bit for bit to the weights the evaluation applies (VerifyQuantizedCheckpoint), and the
// compensated model is another model than the uncompensated one.
TEST(GptqRealModelTest, ExportIsTheEvaluatedCompensatedModelBitForBit) {
  const testing::TestModel m = testing::RealModel();
  absl::StatusOr<config::RunConfig> c = config::LoadRunConfig(m.config);
  ASSERT_TRUE(c.ok()) << c.status();
  SessionOptions so;
  so.model_dir = m.dir;
  so.calibration = c->calibration;
  so.calibration.text = m.text_path;
  so.calibration.samples = 8;
  so.calibration.seq_len = 128;
  so.units = c->quant;
  so.heldout = c->evaluation.heldout;
  so.heldout.text = m.text_path;
  so.context = c->evaluation.context;
  so.batch = c->evaluation.batch;
  so.compensation = Compensation::kGptq;
  so.use_cache = false;
  auto session = QuantizationSession::Create(so);
  ASSERT_TRUE(session.ok()) << session.status();
  const QuantizationSession& s = **session;
  ASSERT_NE(s.fits().compensation(), nullptr);
  std::vector<int> actions(s.table().units.size());
  // Every action, 16 bits included.
  for (size_t i = 0; i < actions.size(); ++i) {
    actions[i] = static_cast<int>((i * 3) % plan::kNumActions);
  }
  const plan::Plan plan = s.MakePlan(actions, "test", 0);
  const exporter::ExportInputs in = exporter::SessionExportInputs(s, plan);
  const std::string dir = ::testing::TempDir() + "/gptq_export";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(exporter::WriteQuantizedCheckpoint(in, dir).ok());
  const absl::Status verified = exporter::VerifyQuantizedCheckpoint(in, dir, dir);
  EXPECT_TRUE(verified.ok()) << verified;

  // Without the factors the same fits give other weights for this plan.
  std::array<at::Tensor, model::kNumMatrices> with, without;
  for (int k = 0; k < model::kNumMatrices; ++k) {
    with[k] = s.model().weights().layers[0].linear[k].to(at::kFloat).clone().contiguous();
    without[k] = with[k].clone();
  }
  s.fits().ApplyToLayer(0, actions, &with);
  StageFits plain = s.fits();
  plain.set_compensation(nullptr);
  plain.ApplyToLayer(0, actions, &without);
  EXPECT_FALSE(at::equal(with[static_cast<int>(model::Matrix::kDown)],
                         without[static_cast<int>(model::Matrix::kDown)]));

  // A plan model compensates a layer once and then decodes it from its codes: every
  // forward sees the same weights, bit for bit (also with units at 16 bits).
  std::vector<int> mixed(actions.size());
  for (size_t i = 0; i < mixed.size(); ++i) mixed[i] = static_cast<int>(i % plan::kNumActions);
  for (const std::vector<int>* plan_actions : {&actions, &mixed}) {
    absl::StatusOr<std::shared_ptr<const model::LlamaModel>> planned =
        s.stage()->PlanModel(std::make_shared<const std::vector<int>>(*plan_actions));
    ASSERT_TRUE(planned.ok()) << planned.status();
    for (int64_t layer : {0, 1}) {
      std::array<at::Tensor, model::kNumMatrices> want;
      for (int k = 0; k < model::kNumMatrices; ++k) {
        want[k] = s.model().weights().layers[layer].linear[k].to(at::kFloat).clone().contiguous();
      }
      s.fits().ApplyToLayer(layer, *plan_actions, &want);
      for (int pass = 0; pass < 2; ++pass) {  // computed, then from the codes
        const std::array<at::Tensor, model::kNumMatrices> got = (*planned)->LayerLinears(layer);
        for (int k = 0; k < model::kNumMatrices; ++k) {
          EXPECT_TRUE(at::equal(got[k], want[k]))
              << "layer " << layer << " matrix " << k << " pass " << pass;
        }
      }
    }
  }
}

}  // namespace
}  // namespace windquant::quant
