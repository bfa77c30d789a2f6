// The fast row kernels against the first, ATen-only quantizer (reference_quantizer.h):
//  - reconstruction: given the same parameters, DequantizeKernel reproduces the
//    reference's dequantized values bit for bit (what `windquant eval --plan` measured
//    and the exporter wrote before the kernels existed);
//  - fitting: the same salient sets, errors within a tolerance, the same error orderings;
//  - determinism and stability: the same bits for a strided view and for a second call,
//    and grid choices that do not move when the activation scales move by a few ulps.
#include "common/quant/fit_kernels.h"

#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <ATen/ATen.h>

#include "common/quant/fit_kernels_isa.h"
#include "common/quant/quantizer.h"
#include "common/quant/reference_quantizer.h"
#include "gtest/gtest.h"

namespace windquant::quant {
namespace {

using reference::ReferenceFitUnit;
using reference::ReferenceUnitFit;

// Named tolerances of fast vs reference fits. The two differ by design: the fast path
// scores the FP16 neighbours of each refined scale and keeps the best (usually a little
// better than the reference), rounds its seeds to FP16 and keeps an earlier search point
// within the switch margin (each can cost up to about that margin, 1e-4).
constexpr double kNotWorseRelTol = 1e-4;
constexpr double kUnitErrorRelTol = 5e-2;    // how much better it may be
constexpr double kNearbyScaleRowsMin = 0.9;  // rows within 2 FP16 ulps of the reference's
constexpr double kOrderingRelSlack = 1e-6;

// LLaMA-like unit: N(0, 0.02^2) rows of varying scale, 1% outliers x8, log-normal s.
void RandomUnit(int64_t m, int64_t c, uint32_t seed, at::Tensor* w, at::Tensor* s) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n01(0, 1);
  std::uniform_real_distribution<float> u01(0, 1);
  std::vector<float> wv(m * c), sv(c);
  for (int64_t i = 0; i < m; ++i) {
    const float row_std = 0.02f * (0.5f + u01(rng));
    for (int64_t j = 0; j < c; ++j) {
      float x = n01(rng) * row_std;
      if (u01(rng) < 0.01f) x *= 8;
      wv[i * c + j] = x;
    }
  }
  for (int64_t j = 0; j < c; ++j) sv[j] = std::exp(0.7f * n01(rng));
  *w = at::tensor(wv).reshape({m, c}).clone();
  *s = at::tensor(sv).clone();
}

bool BitEqual(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

std::vector<float> Floats(const at::Tensor& t) {
  if (!t.defined()) return {};
  const at::Tensor c = t.to(at::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

SalientSet SalientOf(const ReferenceUnitFit& r) {
  SalientSet s;
  const at::Tensor idx = r.salient.index.to(at::kInt).contiguous();
  s.index.assign(idx.data_ptr<int32_t>(), idx.data_ptr<int32_t>() + idx.numel());
  if (r.salient.codes.defined()) {
    const at::Tensor codes = r.salient.codes.contiguous();
    s.codes.assign(codes.data_ptr<int8_t>(), codes.data_ptr<int8_t>() + codes.numel());
  }
  s.scale = r.salient.scale;
  return s;
}

struct Shape {
  int64_t m, c;
  double fraction;
};
const Shape kShapes[] = {{24, 40, plan::kDefaultSalientFraction},
                         {7, 13, 0.02},
                         {16, 64, 0.0},
                         {64, 128, 0.01},
                         {128, 256, plan::kDefaultSalientFraction}};

// The reference's own parameters, reconstructed by the fast kernel: bit for bit.
TEST(FitKernelsTest, DequantizeReproducesTheReferenceBitForBit) {
  uint32_t seed = 100;
  for (const Shape& sh : kShapes) {
    at::Tensor w, s;
    RandomUnit(sh.m, sh.c, seed++, &w, &s);
    QuantizerOptions o;
    o.salient_fraction = sh.fraction;
    auto ref = ReferenceFitUnit(w, s, plan::kAllActions, o);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const SalientSet sal = SalientOf(*ref);
    for (const auto& rf : ref->fits) {
      SCOPED_TRACE(::testing::Message()
                   << sh.m << "x" << sh.c << " " << plan::ActionName(rf.action));
      const std::vector<float> scales = Floats(rf.scales), offsets = Floats(rf.offsets);
      at::Tensor out = at::empty({sh.m, sh.c}, at::kFloat);
      DequantizeKernel(UnitView{w.data_ptr<float>(), sh.c, sh.m, sh.c}, rf.action, scales.data(),
                       offsets.data(), sal, out.data_ptr<float>(), sh.c);
      EXPECT_TRUE(BitEqual(out, rf.dequant));
      if (rf.action != plan::Action::k16) {
        std::vector<int8_t> codes(sh.m * sh.c);
        CodesKernel(UnitView{w.data_ptr<float>(), sh.c, sh.m, sh.c}, rf.action, scales.data(),
                    offsets.data(), codes.data());
        const at::Tensor rc = rf.codes.contiguous();
        // Codes at salient positions are the operator's and ignored by every reader.
        std::vector<bool> salient(sh.m * sh.c, false);
        for (int32_t f : sal.index) salient[f] = true;
        int64_t differ = 0;
        for (int64_t e = 0; e < sh.m * sh.c; ++e) {
          differ += !salient[e] && codes[e] != rc.data_ptr<int8_t>()[e];
        }
        EXPECT_EQ(differ, 0);
      }
    }
  }
}

TEST(FitKernelsTest, FitsAgreeWithTheReference) {
  uint32_t seed = 200;
  for (const Shape& sh : kShapes) {
    at::Tensor w, s;
    RandomUnit(sh.m, sh.c, seed++, &w, &s);
    QuantizerOptions o;
    o.salient_fraction = sh.fraction;
    auto ref = ReferenceFitUnit(w, s, plan::kAllActions, o);
    auto fit = FitUnit(w, s, plan::kAllActions, o);
    ASSERT_TRUE(ref.ok() && fit.ok());
    // Random floats have no ties: the same salient set.
    const SalientSet sal = SalientOf(*ref);
    EXPECT_EQ(fit->salient.index, sal.index);
    EXPECT_EQ(fit->salient.codes, sal.codes);
    EXPECT_EQ(fit->salient.scale, sal.scale);
    for (plan::Action a : plan::kAllActions) {
      SCOPED_TRACE(::testing::Message() << sh.m << "x" << sh.c << " " << plan::ActionName(a));
      const auto* r = ref->Find(a);
      const ActionFit* f = fit->Find(a);
      EXPECT_EQ(f->effective_bits, r->effective_bits);
      EXPECT_LE(f->error, r->error * (1 + kNotWorseRelTol) + 1e-15);
      EXPECT_GE(f->error, r->error * (1 - kUnitErrorRelTol));
      if (a == plan::Action::k16) {
        // Float lanes per row (the reference sums in double).
        EXPECT_NEAR(f->error, r->error, 1e-6 * r->error + 1e-18);
        continue;
      }
      const std::vector<float> rs = Floats(r->scales);
      int64_t nearby = 0;
      for (int64_t i = 0; i < sh.m; ++i) {
        nearby += std::fabs(f->scales[i] - rs[i]) <= std::ldexp(std::fabs(rs[i]), -9);
      }
      EXPECT_GE(nearby, kNearbyScaleRowsMin * sh.m);
      // The error the fit reports is the error of what it dequantizes to.
      const at::Tensor dq = *DequantizeUnit(w, *fit, a);
      EXPECT_NEAR(f->error, RelativeError(w, dq, s), 1e-5 * f->error);
    }
    auto err = [&](plan::Action a) { return fit->Find(a)->error; };
    EXPECT_LE(err(plan::Action::k8), err(plan::Action::k4) * (1 + kOrderingRelSlack));
    EXPECT_LE(err(plan::Action::k4), err(plan::Action::k3) * (1 + kOrderingRelSlack));
    EXPECT_LE(err(plan::Action::k3), err(plan::Action::k2) * (1 + kOrderingRelSlack));
    EXPECT_LE(err(plan::Action::k3), err(plan::Action::k1_58) * (1 + kOrderingRelSlack));
  }
}

// A unit inside a wider matrix (strided rows) fits exactly like its contiguous copy, and
// a second call gives the same bits.
TEST(FitKernelsTest, StridedViewAndRepeatGiveTheSameBits) {
  at::Tensor w, s;
  RandomUnit(48, 200, 7, &w, &s);
  const at::Tensor unit = w.slice(1, 64, 128);
  const UnitView strided{unit.data_ptr<float>(), 200, 48, 64};
  const at::Tensor copy = unit.contiguous();
  const UnitView packed{copy.data_ptr<float>(), 64, 48, 64};
  const at::Tensor su = s.slice(0, 64, 128).contiguous();
  const UnitFit a = FitUnitKernel(strided, su.data_ptr<float>(), plan::kAllActions, {});
  const UnitFit b = FitUnitKernel(packed, su.data_ptr<float>(), plan::kAllActions, {});
  const UnitFit c = FitUnitKernel(packed, su.data_ptr<float>(), plan::kAllActions, {});
  for (size_t i = 0; i < a.fits.size(); ++i) {
    EXPECT_EQ(a.fits[i].scales, b.fits[i].scales);
    EXPECT_EQ(a.fits[i].offsets, b.fits[i].offsets);
    EXPECT_EQ(a.fits[i].error, b.fits[i].error);
    EXPECT_EQ(b.fits[i].error, c.fits[i].error);
    EXPECT_EQ(b.fits[i].scales, c.fits[i].scales);
  }
  EXPECT_EQ(a.salient.index, b.salient.index);
}

// Ties of |W| s for the last salient slot go to the lowest flat index.
TEST(FitKernelsTest, SalientTiesGoToTheLowerIndex) {
  std::vector<float> wv(4 * 50, 0.01f);
  std::vector<float> sv(50, 1.0f);
  const UnitView v{wv.data(), 50, 4, 50};
  EXPECT_EQ(SelectSalient(v, sv.data(), 3), (std::vector<int32_t>{0, 1, 2}));
  wv[120] = 0.5f;
  EXPECT_EQ(SelectSalient(v, sv.data(), 3), (std::vector<int32_t>{0, 1, 120}));
}

// The baseline (SSE2) and AVX2 builds of the kernels give the same bits: what makes the
// unit table the same on every x86-64 CPU.
TEST(FitKernelsTest, BaselineAndAvx2BuildsGiveTheSameBits) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "this CPU has no AVX2";
  uint32_t seed = 400;
  for (const Shape& sh : kShapes) {
    at::Tensor w, s;
    RandomUnit(sh.m, sh.c, seed++, &w, &s);
    QuantizerOptions o;
    o.salient_fraction = sh.fraction;
    const UnitView v{w.data_ptr<float>(), sh.c, sh.m, sh.c};
    const UnitFit a = baseline::FitUnitKernel(v, s.data_ptr<float>(), plan::kAllActions, o);
    const UnitFit b = avx2::FitUnitKernel(v, s.data_ptr<float>(), plan::kAllActions, o);
    EXPECT_EQ(a.salient.index, b.salient.index);
    for (size_t i = 0; i < a.fits.size(); ++i) {
      EXPECT_EQ(a.fits[i].scales, b.fits[i].scales);
      EXPECT_EQ(a.fits[i].offsets, b.fits[i].offsets);
      EXPECT_EQ(a.fits[i].error, b.fits[i].error);  // exactly
      EXPECT_EQ(a.fits[i].grid_point, b.fits[i].grid_point);
      at::Tensor da = at::empty({sh.m, sh.c}), db = at::empty({sh.m, sh.c});
      baseline::DequantizeKernel(v, a.fits[i].action, a.fits[i].scales.data(),
                                 a.fits[i].offsets.data(), a.salient, da.data_ptr<float>(), sh.c);
      avx2::DequantizeKernel(v, b.fits[i].action, b.fits[i].scales.data(), b.fits[i].offsets.data(),
                             b.salient, db.data_ptr<float>(), sh.c);
      EXPECT_TRUE(BitEqual(da, db));
    }
    const UnitStats x = baseline::UnitStatsKernel(v, s.data_ptr<float>(), 0.001f);
    const UnitStats y = avx2::UnitStatsKernel(v, s.data_ptr<float>(), 0.001f);
    EXPECT_EQ(x.sum, y.sum);
    EXPECT_EQ(x.mass, y.mass);
    EXPECT_EQ(x.sparse, y.sparse);
    EXPECT_EQ(x.outliers, y.outliers);
  }
}

// Action 16 is the FP16 round trip, computed with integer tricks on 8 lanes: the same
// bits as c10::Half over every magnitude (subnormal FP16, rounding ties, overflow, -0).
TEST(FitKernelsTest, Fp16RoundTripMatchesC10HalfBitForBit) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
  std::vector<float> v;
  for (int i = 0; i < (1 << 20); ++i) {
    uint32_t b = bits(rng);
    // Mostly magnitudes FP16 can hold (2^-26 .. 2^17), some anywhere below overflow.
    if (i % 4 != 0) b = (b & 0x807fffffu) | ((101u + b % 40u) << 23);
    float f;
    std::memcpy(&f, &b, 4);
    if (std::isfinite(f)) v.push_back(f);
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 6.1035156e-05f,
                  6.1035152e-05f, 2.9802322e-08f, 2.9802326e-08f, 5.9604645e-08f, -1e-30f}) {
    v.push_back(f);
  }
  const int64_t n = static_cast<int64_t>(v.size());
  const UnitView view{v.data(), n, 1, n};
  const SalientSet none;
  std::vector<float> want(n), got(n);
  for (int64_t i = 0; i < n; ++i) want[i] = static_cast<float>(c10::Half(v[i]));
  DequantizeKernel(view, plan::Action::k16, nullptr, nullptr, none, got.data(), n);
  EXPECT_EQ(std::memcmp(want.data(), got.data(), n * sizeof(float)), 0);
  for (int64_t i = 0; i < n && i < 100000; ++i) {
    ASSERT_EQ(std::memcmp(&want[i], &got[i], 4), 0)
        << v[i] << " -> " << got[i] << ", want " << want[i];
  }
  baseline::DequantizeKernel(view, plan::Action::k16, nullptr, nullptr, none, got.data(), n);
  EXPECT_EQ(std::memcmp(want.data(), got.data(), n * sizeof(float)), 0);
}

// Moves every activation scale by a random number of ulps in [-max_ulps, max_ulps].
at::Tensor PerturbUlps(const at::Tensor& s, int max_ulps, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-max_ulps, max_ulps);
  at::Tensor out = s.clone();
  float* p = out.data_ptr<float>();
  for (int64_t j = 0; j < out.numel(); ++j) {
    const int k = d(rng);
    for (int t = 0; t < std::abs(k); ++t) p[j] = std::nextafter(p[j], k > 0 ? INFINITY : 0.0f);
  }
  return out;
}

// Relative change of an error proxy caused by moving s by `ulps` ulps, when no discrete
// choice moves: the error is a ratio of sums of s_j^2-weighted terms, so each s_j^2 moves
// by at most 2 * ulps * 2^-24 relative, the ratio by twice that, plus the float rounding of
// the row sums (8 lanes of at most c / 8 terms, ~c / 8 * 2^-24 relative, counted twice).
double ErrorTolerance(int ulps, int64_t cols) {
  const double eps = std::ldexp(1.0, -24);
  return 4.0 * ulps * eps + 2.0 * (static_cast<double>(cols) / 8 + 8) * eps;
}

// Near-ties of the searches are where a last-bit change used to send the refinement to
// another optimum. With the margin no grid choice moves, and the error proxy moves only by
// the float error of the perturbation.
TEST(FitKernelsTest, GridChoiceStableUnderUlpPerturbations) {
  constexpr int kUlps = 4;
  uint32_t seed = 300;
  int64_t rows_checked = 0;
  for (int trial = 0; trial < 6; ++trial) {
    at::Tensor w, s;
    RandomUnit(96, 64, seed++, &w, &s);
    const auto base = FitUnit(w, s, plan::kAllActions);
    ASSERT_TRUE(base.ok());
    for (uint32_t p = 0; p < 4; ++p) {
      const auto moved = FitUnit(w, PerturbUlps(s, kUlps, 1000 * trial + p), plan::kAllActions);
      ASSERT_TRUE(moved.ok());
      EXPECT_EQ(moved->salient.index, base->salient.index);
      for (size_t i = 0; i < base->fits.size(); ++i) {
        const ActionFit& a = base->fits[i];
        const ActionFit& b = moved->fits[i];
        SCOPED_TRACE(::testing::Message()
                     << "trial " << trial << " " << plan::ActionName(a.action));
        EXPECT_EQ(a.grid_point, b.grid_point);
        rows_checked += static_cast<int64_t>(a.grid_point.size());
        // Same choices; the error moves only by the float error of the perturbation
        // (the FP16 scales may move to a neighbour that scores within that error).
        EXPECT_NEAR(b.error, a.error, ErrorTolerance(kUlps, 64) * a.error + 1e-18);
      }
    }
  }
  EXPECT_GT(rows_checked, 10000);
}

}  // namespace
}  // namespace windquant::quant
