#include "common/quant/quantizer.h"

#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace windquant::quant {
namespace {

// Named tolerances for fast path vs scalar reference.
constexpr double kErrorRelTol = 2e-4;       // error proxy, relative
constexpr double kScaleRelTol = 2e-3;       // fitted per-row scales/offsets, relative (> FP16 ulp)
constexpr double kCodeMismatchMax = 0.005;  // fraction of codes allowed to differ (near-ties)
constexpr double kMonotoneRelSlack = 1e-6;  // guaranteed orderings, float rounding only

// ---------------------------------------------------------------------------------------
// Slow, obvious scalar reference: one row at a time, nearest level by brute force over the
// level list, plain loops. Mirrors the documented algorithm of quantizer.h/.cc.
float Half(double x) { return static_cast<float>(c10::Half(static_cast<float>(x))); }
float HalfScale(double x) { return Half(std::clamp(x, 5.9604644775390625e-08, 65504.0)); }

struct RefFit {
  std::vector<float> scale, offset;
  std::vector<int> codes;  // row-major
  std::vector<float> dequant;
  double error = 0;
};

struct RefUnit {
  int m, c;
  std::vector<float> w, s;
  std::vector<bool> salient;
  std::vector<double> wt;  // fitting weights
  std::vector<bool> row_valid;
  std::vector<float> maxabs;
  std::vector<float> salient_value;  // INT8-dequantized value at salient positions
  double den = 0;
  double salient_err = 0;
};

RefUnit MakeRefUnit(const std::vector<float>& w, const std::vector<float>& s, int m, int c,
                    double fraction) {
  RefUnit u{m,
            c,
            w,
            s,
            std::vector<bool>(m * c, false),
            std::vector<double>(m * c, 0),
            std::vector<bool>(m, false),
            std::vector<float>(m, 0),
            std::vector<float>(m * c, 0)};
  const int64_t k = plan::SalientCount(int64_t{m} * c, fraction);
  std::vector<int> order(m * c);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return std::fabs(w[a]) * s[a % c] > std::fabs(w[b]) * s[b % c];
  });
  float maxsal = 0;
  for (int64_t i = 0; i < k; ++i) {
    u.salient[order[i]] = true;
    maxsal = std::max(maxsal, std::fabs(w[order[i]]));
  }
  const float sal_scale = Half(maxsal / 127.0f);
  for (int i = 0; i < m * c; ++i) {
    if (!u.salient[i]) continue;
    const double q =
        sal_scale > 0 ? std::clamp<double>(std::nearbyint(w[i] / sal_scale), -127, 127) : 0;
    u.salient_value[i] = static_cast<float>(q * sal_scale);
  }
  for (int i = 0; i < m; ++i) {
    double sum = 0;
    for (int j = 0; j < c; ++j) {
      const int e = i * c + j;
      if (!u.salient[e]) {
        sum += double(s[j]) * s[j];
        u.maxabs[i] = std::max(u.maxabs[i], std::fabs(w[e]));
      }
    }
    u.row_valid[i] = sum > 0;
    for (int j = 0; j < c; ++j) {
      const int e = i * c + j;
      u.wt[e] = u.salient[e] ? 0.0 : (sum > 0 ? double(s[j]) * s[j] : 1.0);
    }
  }
  for (int e = 0; e < m * c; ++e) {
    const double s2 = double(s[e % c]) * s[e % c];
    u.den += s2 * w[e] * w[e];
    if (u.salient[e]) u.salient_err += s2 * std::pow(w[e] - u.salient_value[e], 2);
  }
  return u;
}

// Levels of a symmetric grid: values l(q) for codes q.
struct RefGrid {
  std::vector<int> codes;
  std::vector<double> levels;
};
RefGrid UniformGrid(int b) {
  RefGrid g;
  for (int q = -(1 << (b - 1)); q <= (1 << (b - 1)) - 1; ++q) {
    g.codes.push_back(q);
    g.levels.push_back(q);
  }
  return g;
}
RefGrid SeqGrid() { return {{-2, -1, 0, 1}, {-1.5, -0.5, 0.5, 1.5}}; }
RefGrid TernaryGrid() { return {{-1, 0, 1}, {-1, 0, 1}}; }

int Nearest(const RefGrid& g, double s, double w) {
  int best = 0;
  for (size_t t = 1; t < g.levels.size(); ++t) {
    if (std::fabs(w - s * g.levels[t]) < std::fabs(w - s * g.levels[best])) best = t;
  }
  return best;
}

double RowErr(const RefUnit& u, int i, const RefGrid& g, double s, std::vector<int>* idx) {
  double e = 0;
  idx->assign(u.c, 0);
  for (int j = 0; j < u.c; ++j) {
    const int x = i * u.c + j;
    (*idx)[j] = Nearest(g, s, u.w[x]);
    e += u.wt[x] * std::pow(u.w[x] - s * g.levels[(*idx)[j]], 2);
  }
  return e;
}

double LsScale(const RefUnit& u, int i, const RefGrid& g, double s) {
  std::vector<int> idx;
  RowErr(u, i, g, s, &idx);
  double num = 0, den = 0;
  for (int j = 0; j < u.c; ++j) {
    const double l = g.levels[idx[j]];
    num += u.wt[i * u.c + j] * u.w[i * u.c + j] * l;
    den += u.wt[i * u.c + j] * l * l;
  }
  return (den > 0 && num > 0) ? num / den : s;
}

// Per row: initial scale (search), refinement, FP16, seeds; then assemble.
RefFit RefGridFit(const RefUnit& u, const RefGrid& g, const std::vector<double>& init,
                  const QuantizerOptions& o, const std::vector<std::vector<float>>& seeds) {
  RefFit f;
  f.scale.resize(u.m);
  f.codes.resize(u.m * u.c);
  f.dequant.resize(u.m * u.c);
  for (int i = 0; i < u.m; ++i) {
    double s = init[i];
    for (int t = 0; t < o.refine_steps; ++t) s = LsScale(u, i, g, s);
    // The nearest FP16 value, its FP16 neighbours, then the seeds.
    const float nearest = HalfScale(s);
    std::vector<float> cands = {nearest};
    for (int k = 1; k <= o.fp16_neighbors; ++k) {
      for (int sign : {-1, 1}) {
        const int bits = int(c10::Half(nearest).x) + sign * k;
        const float c = HalfScale(static_cast<float>(
            c10::Half(static_cast<uint16_t>(std::max(bits, 1)), c10::Half::from_bits())));
        if (c != nearest) cands.push_back(c);
      }
    }
    for (const auto& seed : seeds) cands.push_back(seed[i]);
    std::vector<int> idx, best_idx;
    double best_e = 0;
    float best_s = 0;
    for (size_t k = 0; k < cands.size(); ++k) {
      const double e = RowErr(u, i, g, cands[k], &idx);
      if (k == 0 || e < best_e) {
        best_e = e;
        best_s = cands[k];
        best_idx = idx;
      }
    }
    f.scale[i] = best_s;
    if (u.row_valid[i]) f.error += best_e;
    for (int j = 0; j < u.c; ++j) {
      const int x = i * u.c + j;
      f.codes[x] = g.codes[best_idx[j]];
      f.dequant[x] = u.salient[x] ? u.salient_value[x] : float(best_s * g.levels[best_idx[j]]);
    }
  }
  f.error = u.den > 0 ? (f.error + u.salient_err) / u.den : 0;
  return f;
}

std::vector<double> ClipSearch(const RefUnit& u, const RefGrid& g, double top,
                               const QuantizerOptions& o) {
  std::vector<double> out(u.m);
  std::vector<int> idx;
  for (int i = 0; i < u.m; ++i) {
    const double base = (u.maxabs[i] > 0 ? u.maxabs[i] : 1.0) / top;
    double best_e = 0;
    for (int p = 0; p < o.clip_grid_points; ++p) {
      const double r = 1.0 - (1.0 - o.clip_min_ratio) * p / (o.clip_grid_points - 1);
      const double e = RowErr(u, i, g, base * r, &idx);
      if (p == 0 || e < best_e * (1 - o.switch_margin)) {
        best_e = e;
        out[i] = base * r;
      }
    }
  }
  return out;
}

std::vector<double> TernarySearch(const RefUnit& u, const QuantizerOptions& o) {
  std::vector<double> out(u.m);
  for (int i = 0; i < u.m; ++i) {
    double best_e = 0;
    for (int p = 0; p < o.ternary_grid_points; ++p) {
      const double r = o.ternary_min_ratio + (o.ternary_max_ratio - o.ternary_min_ratio) * p /
                                                 (o.ternary_grid_points - 1);
      const double delta = u.maxabs[i] * r;
      double num = 0, den = 0;
      for (int j = 0; j < u.c; ++j) {
        const int x = i * u.c + j;
        if (std::fabs(u.w[x]) > delta) {
          num += u.wt[x] * std::fabs(u.w[x]);
          den += u.wt[x];
        }
      }
      const double a = (den > 0 && num > 0) ? num / den : (u.maxabs[i] > 0 ? u.maxabs[i] : 1.0);
      double e = 0;
      for (int j = 0; j < u.c; ++j) {
        const int x = i * u.c + j;
        const double q = std::fabs(u.w[x]) > delta ? (u.w[x] > 0 ? 1 : (u.w[x] < 0 ? -1 : 0)) : 0;
        e += u.wt[x] * std::pow(u.w[x] - a * q, 2);
      }
      if (p == 0 || e < best_e * (1 - o.switch_margin)) {
        best_e = e;
        out[i] = a;
      }
    }
  }
  return out;
}

RefFit RefBinary(const RefUnit& u, const QuantizerOptions& o) {
  RefFit f;
  f.scale.resize(u.m);
  f.offset.resize(u.m);
  f.codes.resize(u.m * u.c);
  f.dequant.resize(u.m * u.c);
  for (int i = 0; i < u.m; ++i) {
    double sw = 0, sx = 0;
    for (int j = 0; j < u.c; ++j) {
      sw += u.wt[i * u.c + j];
      sx += u.wt[i * u.c + j] * u.w[i * u.c + j];
    }
    sw = std::max(sw, 1e-30);
    double beta = sx / sw, alpha = 0;
    for (int t = 0; t < o.binarize_steps; ++t) {
      double sq = 0, sxq = 0;
      for (int j = 0; j < u.c; ++j) {
        const int x = i * u.c + j;
        const double q = u.w[x] >= beta ? 1 : -1;
        sq += u.wt[x] * q;
        sxq += u.wt[x] * u.w[x] * q;
      }
      const double det = sw * sw - sq * sq;
      if (det > sw * sw * 1e-6) {
        alpha = std::max(0.0, (sxq * sw - sx * sq) / det);
        beta = (sx * sw - sxq * sq) / det;
      } else {
        alpha = 0;
        beta = sx / sw;
      }
    }
    const float a = Half(std::clamp(alpha, 0.0, 65504.0)), b = Half(beta);
    f.scale[i] = a;
    f.offset[i] = b;
    double e = 0;
    for (int j = 0; j < u.c; ++j) {
      const int x = i * u.c + j;
      const int q = u.w[x] >= b ? 1 : -1;
      f.codes[x] = q;
      const float v = q * a + b;
      e += u.wt[x] * std::pow(u.w[x] - v, 2);
      f.dequant[x] = u.salient[x] ? u.salient_value[x] : v;
    }
    if (u.row_valid[i]) f.error += e;
  }
  f.error = u.den > 0 ? (f.error + u.salient_err) / u.den : 0;
  return f;
}

// All actions but 16, with the same seeding chain as the fast path.
std::map<plan::Action, RefFit> ReferenceFitAll(const RefUnit& u, const QuantizerOptions& o) {
  std::map<plan::Action, RefFit> r;
  r[plan::Action::k1] = RefBinary(u, o);
  r[plan::Action::k2] = RefGridFit(u, SeqGrid(), ClipSearch(u, SeqGrid(), 1.5, o), o, {});
  r[plan::Action::k1_58] = RefGridFit(u, TernaryGrid(), TernarySearch(u, o), o, {});
  std::vector<float> half_alpha2(u.m);
  for (int i = 0; i < u.m; ++i) half_alpha2[i] = HalfScale(r[plan::Action::k2].scale[i] * 0.5);
  std::vector<std::vector<float>> seeds = {half_alpha2, r[plan::Action::k1_58].scale};
  int prev = 0;
  for (auto [a, b] : {std::pair{plan::Action::k3, 3}, std::pair{plan::Action::k4, 4},
                      std::pair{plan::Action::k8, 8}}) {
    if (prev > 0) {
      const plan::Action pa = prev == 3 ? plan::Action::k3 : plan::Action::k4;
      std::vector<float> seed(u.m);
      for (int i = 0; i < u.m; ++i) seed[i] = HalfScale(r[pa].scale[i] / double(1 << (b - prev)));
      seeds = {seed};
    }
    const RefGrid g = UniformGrid(b);
    r[a] = RefGridFit(u, g, ClipSearch(u, g, (1 << (b - 1)) - 1, o), o, seeds);
    prev = b;
  }
  return r;
}

// ---------------------------------------------------------------------------------------
std::vector<float> ToVec(const std::vector<float>& v) { return v; }
std::vector<float> ToVec(const at::Tensor& t) {
  at::Tensor c = t.to(at::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

at::Tensor FromVec(const std::vector<float>& v, std::vector<int64_t> shape) {
  return at::tensor(v, at::kFloat).reshape(shape).clone();
}

// Weights: Gaussian rows with per-row std and a few heavy outliers; act scales log-normal.
void RandomUnit(int m, int c, uint32_t seed, std::vector<float>* w, std::vector<float>* s) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n01(0, 1);
  std::uniform_real_distribution<float> u01(0, 1);
  w->resize(m * c);
  s->resize(c);
  for (int i = 0; i < m; ++i) {
    const float row_std = 0.02f * (0.5f + u01(rng));
    for (int j = 0; j < c; ++j) {
      float x = n01(rng) * row_std;
      if (u01(rng) < 0.01f) x *= 8;
      (*w)[i * c + j] = x;
    }
  }
  for (int j = 0; j < c; ++j) (*s)[j] = std::exp(0.7f * n01(rng));
}

const plan::Action kLowActions[] = {plan::Action::k8, plan::Action::k4,    plan::Action::k3,
                                    plan::Action::k2, plan::Action::k1_58, plan::Action::k1};

void ExpectMatchesReference(int m, int c, uint32_t seed, double fraction) {
  std::vector<float> wv, sv;
  RandomUnit(m, c, seed, &wv, &sv);
  QuantizerOptions o;
  o.salient_fraction = fraction;
  auto fit = FitUnit(FromVec(wv, {m, c}), FromVec(sv, {c}), plan::kAllActions, o);
  ASSERT_TRUE(fit.ok()) << fit.status();
  const RefUnit ru = MakeRefUnit(wv, sv, m, c, fraction);
  const auto ref = ReferenceFitAll(ru, o);
  // Salient set.
  std::vector<bool> mask(m * c, false);
  for (int32_t e : fit->salient.index) mask[e] = true;
  for (int e = 0; e < m * c; ++e) ASSERT_EQ(mask[e], ru.salient[e]) << "entry " << e;
  for (plan::Action a : kLowActions) {
    SCOPED_TRACE(::testing::Message()
                 << m << "x" << c << " seed " << seed << " action " << plan::ActionName(a));
    const ActionFit* f = fit->Find(a);
    ASSERT_NE(f, nullptr);
    const RefFit& r = ref.at(a);
    EXPECT_NEAR(f->error, r.error, kErrorRelTol * r.error + 1e-12);
    std::vector<float> sc = ToVec(f->scales);
    for (int i = 0; i < m; ++i)
      EXPECT_NEAR(sc[i], r.scale[i], kScaleRelTol * std::fabs(r.scale[i]));
    if (a == plan::Action::k1) {
      std::vector<float> off = ToVec(f->offsets);
      for (int i = 0; i < m; ++i) {
        EXPECT_NEAR(off[i], r.offset[i],
                    kScaleRelTol * (std::fabs(r.offset[i]) + std::fabs(r.scale[i])));
      }
    }
    std::vector<float> codes = ToVec(*UnitCodes(FromVec(wv, {m, c}), *fit, a));
    int mismatched = 0;
    for (int e = 0; e < m * c; ++e) mismatched += !ru.salient[e] && codes[e] != r.codes[e];
    EXPECT_LE(mismatched, kCodeMismatchMax * m * c);
  }
}

TEST(QuantizerTest, MatchesScalarReference) {
  ExpectMatchesReference(24, 40, 1, plan::kDefaultSalientFraction);  // n=960 -> k=5
  ExpectMatchesReference(7, 13, 2, 0.02);                            // odd shape, k=2
  ExpectMatchesReference(16, 64, 3, 0.0);                            // no salient entries
  ExpectMatchesReference(32, 48, 4, 0.01);
}

// Rows of exact grid points (all scales/offsets FP16-exact) come back exactly.
TEST(QuantizerTest, OnGridWeightsComeBackExactly) {
  const int m = 6, c = 32;
  std::mt19937 rng(7);
  std::vector<float> sv(c);
  for (int j = 0; j < c; ++j) sv[j] = 0.25f + 0.05f * j;
  QuantizerOptions o;
  o.salient_fraction = 0.0;
  auto check = [&](plan::Action a, auto level_of_code, std::vector<int> codes_pool, bool offset) {
    std::vector<float> wv(m * c);
    for (int i = 0; i < m; ++i) {
      const float alpha = 0.03125f * (1 + i);  // FP16-exact
      const float beta = offset ? 0.0078125f * (i - 2) : 0.0f;
      for (int j = 0; j < c; ++j) {
        // First entries cover every code (so max|W| is the top level), then random codes.
        const int q =
            j < int(codes_pool.size()) ? codes_pool[j] : codes_pool[rng() % codes_pool.size()];
        wv[i * c + j] = alpha * level_of_code(q) + beta;
      }
    }
    auto fit = FitUnit(FromVec(wv, {m, c}), FromVec(sv, {c}), {a}, o);
    ASSERT_TRUE(fit.ok()) << fit.status();
    const ActionFit& f = fit->fits[0];
    EXPECT_EQ(f.error, 0.0) << plan::ActionName(a);
    EXPECT_TRUE(at::equal(*DequantizeUnit(FromVec(wv, {m, c}), *fit, a), FromVec(wv, {m, c})))
        << plan::ActionName(a);
  };
  auto ident = [](int q) { return double(q); };
  for (int b : {3, 4, 8}) {
    std::vector<int> pool;
    for (int q = -((1 << (b - 1)) - 1); q <= (1 << (b - 1)) - 1; ++q) pool.push_back(q);
    check(b == 3   ? plan::Action::k3
          : b == 4 ? plan::Action::k4
                   : plan::Action::k8,
          ident, pool, false);
  }
  check(
      plan::Action::k2, [](int q) { return q + 0.5; }, {-2, -1, 0, 1}, false);
  check(plan::Action::k1_58, ident, {-1, 0, 1}, false);
  check(plan::Action::k1, ident, {-1, 1}, true);
}

TEST(QuantizerTest, GuaranteedErrorOrderingAndRequestIndependence) {
  for (uint32_t seed = 10; seed < 16; ++seed) {
    std::vector<float> wv, sv;
    const int m = 48, c = seed % 2 ? 64 : 37;
    RandomUnit(m, c, seed, &wv, &sv);
    const at::Tensor w = FromVec(wv, {m, c}), s = FromVec(sv, {c});
    auto fit = FitUnit(w, s, plan::kAllActions);
    ASSERT_TRUE(fit.ok()) << fit.status();
    auto err = [&](plan::Action a) { return fit->Find(a)->error; };
    auto le = [&](plan::Action lo, plan::Action hi) {
      EXPECT_LE(err(lo), err(hi) * (1 + kMonotoneRelSlack))
          << "seed " << seed << ": err(" << plan::ActionName(lo) << ") > err("
          << plan::ActionName(hi) << ")";
    };
    le(plan::Action::k8, plan::Action::k4);
    le(plan::Action::k4, plan::Action::k3);
    le(plan::Action::k3, plan::Action::k2);
    le(plan::Action::k3, plan::Action::k1_58);
    EXPECT_GT(err(plan::Action::k2), 0.0);
    // Fitting 3 bit alone gives the same as fitting it among all actions.
    auto alone = FitUnit(w, s, {plan::Action::k3});
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ(alone->fits[0].scales, fit->Find(plan::Action::k3)->scales);
    EXPECT_EQ(alone->fits[0].error, fit->Find(plan::Action::k3)->error);
  }
}

TEST(QuantizerTest, SalientEntriesWithinInt8ErrorAndSixteenIsFp16RoundTrip) {
  std::vector<float> wv, sv;
  const int m = 64, c = 32;  // n = 2048 -> k = 10
  RandomUnit(m, c, 21, &wv, &sv);
  const at::Tensor w = FromVec(wv, {m, c}), s = FromVec(sv, {c});
  auto fit = FitUnit(w, s, plan::kAllActions);
  ASSERT_TRUE(fit.ok());
  const SalientSet& sal = fit->salient;
  ASSERT_EQ(sal.count(), 10);
  const at::Tensor index = at::tensor(std::vector<int64_t>(sal.index.begin(), sal.index.end()));
  float maxsal = w.reshape({-1}).index_select(0, index).abs().max().item<float>();
  EXPECT_NEAR(sal.scale, maxsal / 127, maxsal / 127 * 1e-3);
  for (plan::Action a : kLowActions) {
    const ActionFit& f = *fit->Find(a);
    const at::Tensor dq = *DequantizeUnit(w, *fit, a);
    at::Tensor diff = (dq - w).abs().reshape({-1}).index_select(0, index);
    EXPECT_LE(diff.max().item<float>(), sal.scale * 0.5f * (1 + 1e-5)) << plan::ActionName(a);
    EXPECT_EQ(f.effective_bits, plan::UnitEffectiveBits(m, c, 10, a));
    EXPECT_NEAR(f.error, RelativeError(w, dq, s), 1e-5 * f.error) << plan::ActionName(a);
  }
  const ActionFit& f16 = *fit->Find(plan::Action::k16);
  EXPECT_TRUE(
      at::equal(*DequantizeUnit(w, *fit, plan::Action::k16), w.to(at::kHalf).to(at::kFloat)));
  EXPECT_TRUE(f16.scales.empty());
  EXPECT_FALSE(UnitCodes(w, *fit, plan::Action::k16).ok());
  EXPECT_EQ(f16.effective_bits, m * c * 16.0);
  EXPECT_LT(f16.error, 1e-6);
  // SalientMask agrees with the fit's set.
  auto mask = SalientMask(w, s, plan::kDefaultSalientFraction);
  ASSERT_TRUE(mask.ok());
  EXPECT_EQ(mask->sum().item<int64_t>(), 10);
  for (int32_t e : sal.index) EXPECT_TRUE(mask->reshape({-1})[e].item<bool>());
}

// What is exactly reproducible from codes + FP16 parameters + salient values.
TEST(QuantizerTest, DequantIsReproducibleFromStoredParameters) {
  std::vector<float> wv, sv;
  const int m = 20, c = 50;
  RandomUnit(m, c, 31, &wv, &sv);
  const at::Tensor w = FromVec(wv, {m, c});
  auto fit = FitUnit(w, FromVec(sv, {c}), kLowActions);
  ASSERT_TRUE(fit.ok());
  const at::Tensor index =
      at::tensor(std::vector<int64_t>(fit->salient.index.begin(), fit->salient.index.end()));
  at::Tensor sal_values =
      at::tensor(std::vector<float>(fit->salient.codes.begin(), fit->salient.codes.end())) *
      fit->salient.scale;
  for (const ActionFit& f : fit->fits) {
    at::Tensor q = UnitCodes(w, *fit, f.action)->to(at::kFloat);
    const at::Tensor scales = FromVec(f.scales, {m});
    at::Tensor l = f.action == plan::Action::k2 ? q + 0.5 : q;
    at::Tensor r = l * scales.unsqueeze(1);
    if (f.action == plan::Action::k1) r = r + FromVec(f.offsets, {m}).unsqueeze(1);
    r.view({-1}).index_put_({index}, sal_values);
    EXPECT_TRUE(at::equal(r, *DequantizeUnit(w, *fit, f.action))) << plan::ActionName(f.action);
    EXPECT_TRUE(at::equal(scales, scales.to(at::kHalf).to(at::kFloat)));
    const double lo = f.action == plan::Action::k8   ? -128
                      : f.action == plan::Action::k4 ? -8
                      : f.action == plan::Action::k3 ? -4
                      : f.action == plan::Action::k2 ? -2
                                                     : -1;
    EXPECT_GE(q.min().item<float>(), lo) << plan::ActionName(f.action);
    EXPECT_LE(q.max().item<float>(),
              -lo - 1 + (f.action == plan::Action::k1_58 || f.action == plan::Action::k1))
        << plan::ActionName(f.action);
    if (f.action == plan::Action::k1) {
      EXPECT_FALSE((q == 0).any().item<bool>());
    }
  }
}

TEST(QuantizerTest, ZeroActivationsFallBackToUnweightedFit) {
  std::vector<float> wv, sv;
  RandomUnit(8, 16, 41, &wv, &sv);
  std::fill(sv.begin(), sv.end(), 0.0f);
  auto fit = FitUnit(FromVec(wv, {8, 16}), FromVec(sv, {16}), plan::kAllActions);
  ASSERT_TRUE(fit.ok());
  const at::Tensor w = FromVec(wv, {8, 16});
  for (const ActionFit& f : fit->fits) {
    EXPECT_EQ(f.error, 0.0);  // 0/0 defined as 0
    const at::Tensor dq = *DequantizeUnit(w, *fit, f.action);
    EXPECT_TRUE(at::isfinite(dq).all().item<bool>());
    if (f.action == plan::Action::k4) {
      // The unweighted fit is still a good fit of W.
      EXPECT_LT(((dq - w).square().sum() / w.square().sum()).item<float>(), 0.05f);
    }
  }
}

TEST(QuantizerTest, RejectsBadInputs) {
  const at::Tensor w = at::randn({4, 8});
  const at::Tensor s = at::ones({8});
  auto expect_invalid = [](const absl::StatusOr<UnitFit>& r, const char* what) {
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << what;
  };
  expect_invalid(FitUnit(at::randn({32}), s, {plan::Action::k4}), "1-D weight");
  expect_invalid(FitUnit(w.to(at::kDouble), s, {plan::Action::k4}), "double weight");
  expect_invalid(FitUnit(w, at::ones({7}), {plan::Action::k4}), "size mismatch");
  at::Tensor bad = w.clone();
  bad[0][0] = NAN;
  expect_invalid(FitUnit(bad, s, {plan::Action::k4}), "NaN weight");
  expect_invalid(FitUnit(w, -s, {plan::Action::k4}), "negative scale");
  EXPECT_FALSE(SalientMask(w, at::ones({3}), 0.01).ok());
}

}  // namespace
}  // namespace windquant::quant
