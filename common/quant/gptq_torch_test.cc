// The factorisation with torch ops (gptq_torch.h InverseHessianFactorTorch) against the
// CPU path's (gptq.cc: LAPACK in place, cholesky_inverse), which gptq_test pins bit for
// bit to ATen's float64 composition (Reference64 below). The steps are the same, the
// reductions are not (a triangular solve and a GEMM where LAPACK's potri inverts; the
// device's BLAS), so the two are compared within a tolerance derived from the
// arithmetic:
//   * each float64 computation of U has a relative (Frobenius) forward error of at most
//     ~ n * eps64 * kappa (kappa: the damped Hessian's condition number; Cholesky, the
//     inverse and the second Cholesky each contribute c * n * eps64 * kappa to first
//     order), so two of them differ by at most kSafety * n * eps64 * kappa;
//   * each is then rounded to float32 (relative eps32 per entry, so in Frobenius norm).
// The tolerance is asserted to be far below what a wrong step would cost (a wrong
// triangle, damping or dead-column rule changes U by ~1e-4 relative here), and the
// measured differences are printed.
#include "common/quant/gptq_torch.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/model/llama_model.h"
#include "common/quant/gptq.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/tiny_weights.h"
#include "gtest/gtest.h"

namespace windquant::quant {
namespace {

constexpr double kEps64 = 0x1p-53;  // float64 unit roundoff
constexpr double kEps32 = 0x1p-24;  // float32 unit roundoff
constexpr double kSafety = 8.0;     // on the first-order constant c
constexpr double kDamp = 0.01;

// H = 2/N X^T X of N tokens of correlated inputs (N < in: singular, definite only once
// damped), in float32 as HessianCollector::Finish gives it.
at::Tensor CorrelatedHessian(int64_t in, int64_t tokens, uint64_t seed) {
  at::manual_seed(seed);
  const at::Tensor x = at::randn({tokens, in}).mm(at::randn({in, in}) * 0.3 + at::eye(in));
  return x.t().mm(x) * (2.0 / static_cast<double>(tokens));
}

// The damped Hessian the CPU path factors: H's lower triangle (mirrored), zero diagonal
// entries set to 1, damp_fraction * mean(diagonal) added.
at::Tensor Damped(const at::Tensor& h) {
  const at::Tensor lower = h.to(at::kDouble).tril();
  at::Tensor d = lower + lower.tril(-1).mT();
  at::Tensor diag = d.diagonal();
  diag.masked_fill_(diag == 0, 1.0);
  diag.add_(kDamp * diag.mean().item<double>());
  return d;
}

// The CPU path's U in float64, before its float32 rounding.
at::Tensor Reference64(const at::Tensor& h) {
  const at::Tensor l = at::linalg_cholesky(Damped(h));
  return at::linalg_cholesky(at::cholesky_inverse(l), /*upper=*/true);
}

double Condition(const at::Tensor& h) {
  const at::Tensor ev = at::linalg_eigvalsh(Damped(h));
  return ev.max().item<double>() / ev.min().item<double>();
}

double RelativeDistance(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).norm().item<double>() /
         b.to(at::kDouble).norm().item<double>();
}

at::Tensor TorchFactorOf(const at::Tensor& h, const std::string& what) {
  absl::StatusOr<TorchFactor> t = InverseHessianFactorTorch(h, kDamp, what);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return at::Tensor();
  const absl::Status checked = CheckTorchFactors({t->failure}, {what});
  EXPECT_TRUE(checked.ok()) << checked;
  EXPECT_EQ(t->u.data().scalar_type(), at::kFloat);
  return t->u.Dense();
}

void ExpectNearTheCpuFactor(const at::Tensor& h, const std::string& what) {
  const int64_t n = h.size(0);
  const double kappa = Condition(h);
  const double tol64 = kSafety * static_cast<double>(n) * kEps64 * kappa;
  ASSERT_LT(tol64, 1e-8) << what << ": kappa " << kappa << " leaves no meaningful tolerance";
  const at::Tensor got = TorchFactorOf(h, what);
  ASSERT_TRUE(got.defined());
  EXPECT_TRUE(at::equal(got, got.triu())) << what;
  // Against the float64 factor, and against the float32 one compensation reads.
  const double to64 = RelativeDistance(got, Reference64(h));
  absl::StatusOr<at::Tensor> cpu = InverseHessianFactor(h, kDamp, what);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const double to32 = RelativeDistance(got, *cpu);
  EXPECT_LE(to64, kEps32 + tol64) << what;
  EXPECT_LE(to32, 2 * kEps32 + tol64) << what;
  std::printf("%-28s n %5lld kappa %9.3g tolerance %.3g: to float64 %.3g, to CPU float32 %.3g\n",
              what.c_str(), static_cast<long long>(n), kappa, 2 * kEps32 + tol64, to64, to32);
}

TEST(GptqTorchFactorTest, IsTheCpuFactorWithinTheDerivedTolerance) {
  for (int64_t n : {1, 7, 48, 300}) {
    ExpectNearTheCpuFactor(CorrelatedHessian(n, 2 * n + 10, static_cast<uint64_t>(n)),
                           "correlated " + std::to_string(n));
  }
  // Fewer tokens than inputs: H singular, definite only with the damping.
  ExpectNearTheCpuFactor(CorrelatedHessian(64, 16, 3), "rank 16 of 64");
  // Dead inputs (rows and columns of zeros): diagonal 1 before the damping's mean.
  at::Tensor dead = CorrelatedHessian(48, 200, 4);
  for (int64_t j : {0, 5, 47}) {
    dead[j].zero_();
    dead.select(1, j).zero_();
  }
  ExpectNearTheCpuFactor(dead, "dead inputs 0, 5, 47");
  // The CPU path factors H's lower triangle; its upper one is not read.
  at::Tensor skew = CorrelatedHessian(48, 200, 5);
  skew.add_(at::triu(at::rand({48, 48}), 1) * 1e-2);
  ExpectNearTheCpuFactor(skew, "upper triangle perturbed");
  // Past one chunk of packed positions (kPackChunk = 2^20: n (n + 1) / 2 > 2^20).
  at::manual_seed(6);
  ExpectNearTheCpuFactor(at::diag(at::rand({1500}) + 0.5) + 1e-3 * at::ones({1500, 1500}),
                         "n 1500, two pack chunks");
}

// Owned (the float64 Hessian's only reference: factored in its memory) or copied (float32,
// or shared), the same ops on the same values: the same bits.
TEST(GptqTorchFactorTest, InPlaceIsTheCopyBitForBit) {
  const at::Tensor h = CorrelatedHessian(40, 100, 7);
  const at::Tensor copied = TorchFactorOf(h, "float32");
  at::Tensor owned = h.to(at::kDouble);
  absl::StatusOr<TorchFactor> t = InverseHessianFactorTorch(std::move(owned), kDamp, "owned");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(at::equal(t->u.Dense(), copied));
}

TEST(GptqTorchFactorTest, FailuresAreTheCpuPathsErrors) {
  struct Bad {
    at::Tensor h;
    FactorFailure failure;
    const char* message;
  };
  at::Tensor nan = at::eye(4) * 2;
  nan[1][2] = NAN;
  // Indefinite beyond the damping (the mean diagonal is negative, so is the damping).
  const at::Tensor indefinite = at::diag(at::tensor({1.0f, 1.0f, -5.0f, 1.0f}));
  const std::vector<Bad> bad = {
      {nan, FactorFailure::kNotFinite, "bad: Hessian not finite"},
      {at::full({3, 3}, INFINITY), FactorFailure::kNotFinite, "bad: Hessian not finite"},
      {indefinite, FactorFailure::kNotPositiveDefinite,
       "bad: Hessian not positive definite after dampening"}};
  for (const Bad& b : bad) {
    absl::StatusOr<TorchFactor> t = InverseHessianFactorTorch(b.h, kDamp, "bad");
    ASSERT_TRUE(t.ok()) << t.status();  // known only once checked
    EXPECT_EQ(t->failure.item<int64_t>(), static_cast<int64_t>(b.failure)) << b.message;
    const absl::Status got = CheckTorchFactors({t->failure}, {"bad"});
    EXPECT_EQ(got.code(), absl::StatusCode::kInvalidArgument) << got;
    EXPECT_EQ(got.message(), b.message);
    // The CPU path's words.
    EXPECT_EQ(InverseHessianFactor(b.h, kDamp, "bad").status().message(), b.message);
  }
  // The first failure among several is named.
  absl::StatusOr<TorchFactor> ok = InverseHessianFactorTorch(at::eye(3), kDamp, "fine");
  absl::StatusOr<TorchFactor> no = InverseHessianFactorTorch(indefinite, kDamp, "second");
  ASSERT_TRUE(ok.ok() && no.ok());
  const absl::Status both = CheckTorchFactors({ok->failure, no->failure}, {"fine", "second"});
  EXPECT_EQ(both.message(), "second: Hessian not positive definite after dampening");
  // Shapes are known without the values.
  EXPECT_EQ(InverseHessianFactorTorch(at::ones({3, 4}), kDamp, "wide").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InverseHessianFactorTorch(at::Tensor(), kDamp, "none").status().message(),
            "none: Hessian missing or not square");
}

// Through GptqFactors with torch_ops (the test switch; a Hessian off the CPU takes this
// path by itself): the same factors within the tolerance above, the same errors naming
// the layer and input, and on the CPU they still spill.
TEST(GptqTorchFactorTest, GptqFactorsWithTorchOpsAreTheCpuFactors) {
  const model::LlamaModel model(testing::TinyLayerWeights(2));
  at::manual_seed(9);
  const std::vector<at::Tensor> inputs = {at::randn({2, 8, 16}), at::randn({3, 5, 16})};
  GptqOptions torch_ops;
  torch_ops.torch_ops = true;
  absl::StatusOr<GptqFactors> cpu = GptqFactors::FromInputs(model, 0, 2, inputs);
  absl::StatusOr<GptqFactors> got = GptqFactors::FromInputs(model, 0, 2, inputs, torch_ops);
  ASSERT_TRUE(cpu.ok() && got.ok()) << cpu.status() << " " << got.status();
  EXPECT_EQ(got->Bytes(), cpu->Bytes());
  for (int64_t l = 0; l < 2; ++l) {
    for (int m = 0; m < model::kNumMatrices; ++m) {
      const auto mat = static_cast<model::Matrix>(m);
      const at::Tensor a = got->Layer(l)->Of(mat).Dense(), b = cpu->Layer(l)->Of(mat).Dense();
      // kappa of these tiny Hessians is < 1e4: tol64 < 1e-10, the float32 rounding rules.
      EXPECT_LE(RelativeDistance(a, b), 2 * kEps32 + 1e-10) << "layer " << l << " matrix " << m;
    }
  }
  testing::ScopedTestDir dir("gptq-torch-spill");
  torch_ops.spill_dir = dir.path() + "/factors";
  absl::StatusOr<GptqFactors> spilled = GptqFactors::FromInputs(model, 0, 2, inputs, torch_ops);
  ASSERT_TRUE(spilled.ok()) << spilled.status();
  EXPECT_EQ(spilled->ResidentBytes(), 0);
  EXPECT_TRUE(at::equal(spilled->Layer(1)->Of(model::Matrix::kDown).Dense(),
                        got->Layer(1)->Of(model::Matrix::kDown).Dense()));

  StageHessians h;
  h.first_layer = 2;
  h.layers.resize(1);
  for (int k = 0; k < kNumInputKinds; ++k) h.layers[0][k] = at::eye(4) * 2;
  h.layers[0][static_cast<int>(InputKind::kDown)] = at::full({4, 4}, NAN);
  torch_ops.spill_dir.clear();
  absl::StatusOr<GptqFactors> f = GptqFactors::Create(h, torch_ops);
  ASSERT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.status().message(), "layer 2 down input: Hessian not finite");
  h.layers[0][static_cast<int>(InputKind::kDown)] = at::Tensor();
  f = GptqFactors::Create(h, torch_ops);
  EXPECT_EQ(f.status().message(), "layer 2 down input: Hessian missing or not square");
}

}  // namespace
}  // namespace windquant::quant
