// Built with -ffp-contract=off (common/quant/CMakeLists.txt): a fused multiply-add would
// make the values depend on the CPU and break the exactness contract of fit_kernels.h.
#include "common/quant/fit_kernels.h"

#include <c10/util/Half.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

namespace windquant::quant {
namespace {

// 8 float lanes. On a CPU without AVX the compiler splits each operation into two SSE
// halves; the results are the same because every operation is lane-wise IEEE.
// may_alias: rows are filled through float pointers (memcpy / element stores).
typedef float V __attribute__((vector_size(32), may_alias));
typedef int32_t VI __attribute__((vector_size(32), may_alias));
constexpr int64_t kLanes = 8;

constexpr float kMinHalf = 5.9604644775390625e-08f;  // smallest positive FP16 (subnormal)
constexpr float kMaxHalf = 65504.0f;

#define WQ_INLINE inline __attribute__((always_inline))

WQ_INLINE V Splat(float x) { return V{x, x, x, x, x, x, x, x}; }
WQ_INLINE V Abs(V x) { return (V)((VI)x & 0x7fffffff); }
WQ_INLINE V Min(V a, V b) { return a < b ? a : b; }
WQ_INLINE V Max(V a, V b) { return a > b ? a : b; }
// Round half to even for |x| <= 2^22 (the values are clamped to the code range first),
// keeping the sign of zero as nearbyint does (-0.3 -> -0).
WQ_INLINE V RoundEven(V x) {
  const V magic = Splat(12582912.0f);  // 1.5 * 2^23
  const V r = (x + magic) - magic;
  return (V)((VI)r | ((VI)x & (VI)Splat(-0.0f)));
}
WQ_INLINE V Floor(V x) {
  const V r = RoundEven(x);
  return r > x ? r - 1.0f : r;
}
// Fixed-order horizontal sum in double.
WQ_INLINE double HSum(V a) {
  double s = 0;
  for (int i = 0; i < kLanes; ++i) s += static_cast<double>(a[i]);
  return s;
}
WQ_INLINE float HMax(V a) {
  float m = a[0];
  for (int i = 1; i < kLanes; ++i) m = std::max(m, a[i]);
  return m;
}

float ClampHalf(float s) { return RoundToHalf(std::min(std::max(s, kMinHalf), kMaxHalf)); }

// The positive FP16 value `k` steps away from the positive FP16 value h, within
// [kMinHalf, kMaxHalf].
float NeighbourHalf(float h, int k) {
  const int bits = static_cast<int>(HalfBits(h)) + k;
  return std::min(std::max(FromHalfBits(static_cast<uint16_t>(std::max(bits, 1))), kMinHalf),
                  kMaxHalf);
}

// A symmetric level grid: code q in [qmin, qmax], level q (+ 0.5 when `half`).
//   uniform b bit: qmin = -2^(b-1), qmax = 2^(b-1)-1 (nearest: round)
//   ternary:       qmin = -1, qmax = 1
//   SEQ 2 bit:     qmin = -2, qmax = 1, half (levels +-0.5, +-1.5; nearest: floor)
struct Grid {
  float qmin, qmax;
  bool half;
  float top() const { return half ? qmax + 0.5f : qmax; }
};

Grid UniformGrid(int bits) {
  return {-std::ldexp(1.0f, bits - 1), std::ldexp(1.0f, bits - 1) - 1.0f, false};
}
constexpr Grid kSeq2{-2.0f, 1.0f, true};
constexpr Grid kTernary{-1.0f, 1.0f, false};

// Nearest code: the grid is evenly spaced, so clamping then rounding (flooring for the
// half-offset grid) is the nearest level; clamping to integer bounds first commutes.
WQ_INLINE V Code(const Grid& g, V x, V s) {
  V q = Max(Min(x / s, Splat(g.qmax)), Splat(g.qmin));
  return g.half ? Floor(q) : RoundEven(q);
}
WQ_INLINE V Level(const Grid& g, V q) { return g.half ? q + 0.5f : q; }

// Aligned scratch of n vectors.
struct VecBuffer {
  explicit VecBuffer(int64_t n)
      : p(static_cast<V*>(std::aligned_alloc(sizeof(V), std::max<int64_t>(n, 1) * sizeof(V)))) {}
  ~VecBuffer() { std::free(p); }
  VecBuffer(const VecBuffer&) = delete;
  VecBuffer& operator=(const VecBuffer&) = delete;
  V* p;
};

struct GridResult {
  float scale = 0;
  double error = 0;
  int16_t point = -1;
};

// One row of a unit, held in L1 while every action is fitted on it.
class RowFitter {
 public:
  RowFitter(int64_t cols, const QuantizerOptions& o)
      : cols_(cols), n8_((cols + kLanes - 1) / kLanes), o_(o), x_(n8_), ax_(n8_), t_(n8_),
        ns_(n8_) {}

  // w: the row's `cols` weights; s2: [n8*8] s_j^2 (zero padded); salient: ascending
  // column indices of the row's salient entries.
  void Load(const float* w, const V* s2, const int32_t* salient, int64_t num_salient) {
    float* x = reinterpret_cast<float*>(x_.p);
    float* ns = reinterpret_cast<float*>(ns_.p);
    std::memset(x_.p, 0, n8_ * sizeof(V));
    std::memcpy(x, w, cols_ * sizeof(float));
    for (int64_t j = 0; j < n8_ * kLanes; ++j) ns[j] = j < cols_ ? 1.0f : 0.0f;
    for (int64_t i = 0; i < num_salient; ++i) ns[salient[i]] = 0.0f;
    V any = Splat(0.0f), mx = Splat(0.0f), xx = Splat(0.0f);
    for (int64_t v = 0; v < n8_; ++v) {
      ax_.p[v] = Abs(x_.p[v]);
      t_.p[v] = ns_.p[v] * s2[v];
      any = Max(any, t_.p[v]);
      mx = Max(mx, ax_.p[v] * ns_.p[v]);
    }
    valid_ = HMax(any) > 0.0f;
    if (!valid_) {
      // No activation weight on this row: unweighted least squares keeps its parameters
      // meaningful; its weighted error is 0 and is not counted.
      for (int64_t v = 0; v < n8_; ++v) t_.p[v] = ns_.p[v];
    }
    for (int64_t v = 0; v < n8_; ++v) xx += t_.p[v] * (x_.p[v] * x_.p[v]);
    sxx_ = HSum(xx);
    maxabs_ = HMax(mx);
  }

  bool valid() const { return valid_; }

  // sum_j t_j (s * level_j - x_j)^2 with the nearest codes.
  WQ_INLINE double GridError(const Grid& g, float s) const {
    const V S = Splat(s);
    V acc = Splat(0.0f);
    for (int64_t v = 0; v < n8_; ++v) {
      const V d = Level(g, Code(g, x_.p[v], S)) * S - x_.p[v];
      acc += t_.p[v] * (d * d);
    }
    return HSum(acc);
  }

  // One refinement step: nearest codes for s, then the closed-form weighted LS scale
  // s = sum t x l / sum t l^2 for those codes (kept when undefined or not positive).
  WQ_INLINE float LsStep(const Grid& g, float s) const {
    const V S = Splat(s);
    V num = Splat(0.0f), den = Splat(0.0f);
    for (int64_t v = 0; v < n8_; ++v) {
      const V l = Level(g, Code(g, x_.p[v], S));
      const V wl = t_.p[v] * l;
      num += wl * x_.p[v];
      den += wl * l;
    }
    const double n = HSum(num), d = HSum(den);
    return d > 0 && n > 0 ? static_cast<float>(n / d) : s;
  }

  // Whether `e` replaces the best error so far `best` of a search.
  bool Switch(double e, double best) const { return e < best * (1.0 - o_.switch_margin); }

  // Refinement from `s`, FP16 rounding, then the best (strictly smaller error; ties keep
  // the earlier) of the rounded fit and the `seeds` (FP16 scales reproducing a coarser
  // grid's levels on this one). Each refinement step cannot increase the error.
  GridResult RefineAndSelect(const Grid& g, float s, const float* seeds, int num_seeds) const {
    for (int t = 0; t < o_.refine_steps; ++t) s = LsStep(g, s);
    // The refined scale is rounded to FP16, but the error of a short row is a jumpy
    // function of the scale: when s sits near a rounding midpoint a last-bit change of the
    // inputs would pick the other FP16 neighbour and change the row's error by percents.
    // So the nearest FP16 value and its FP16 neighbours within `fp16_neighbors` are all
    // scored, and the best kept (ties: the nearest, then the lower).
    const float nearest = ClampHalf(s);
    GridResult best{nearest, GridError(g, nearest), -1};
    for (int k = 1; k <= o_.fp16_neighbors; ++k) {
      for (int sign : {-1, 1}) {
        const float c = NeighbourHalf(nearest, sign * k);
        if (c == nearest) continue;
        const double e = GridError(g, c);
        if (e < best.error) best = {c, e, -1};
      }
    }
    for (int i = 0; i < num_seeds; ++i) {
      const double e = GridError(g, seeds[i]);
      if (e < best.error) best = {seeds[i], e, -1};
    }
    return best;
  }

  // Uniform symmetric (3/4/8 bit) and SEQ 2 bit: clip-ratio search over
  // s = r * max|W| / top_level, r from 1 down to clip_min_ratio, then refinement.
  GridResult FitClipGrid(const Grid& g, const float* seeds, int num_seeds) const {
    const int points = std::max(1, o_.clip_grid_points);
    const float base = (maxabs_ > 0 ? maxabs_ : 1.0f) / g.top();
    float best_s = base;
    double best_e = 0;
    int best_p = 0;
    for (int p = 0; p < points; ++p) {
      const double r = points == 1 ? 1.0 : 1.0 - (1.0 - o_.clip_min_ratio) * p / (points - 1);
      const float s = base * static_cast<float>(r);
      const double e = GridError(g, s);
      if (p == 0 || Switch(e, best_e)) {
        best_s = s;
        best_e = e;
        best_p = p;
      }
    }
    GridResult out = RefineAndSelect(g, best_s, seeds, num_seeds);
    out.point = static_cast<int16_t>(best_p);
    return out;
  }

  // Ternary (SEQ-style): threshold search Delta = r * max|W|; for the assignment
  // q = sign(W) [|W| > Delta] the weighted LS alpha is sum t |W| q^2 / sum t q^2 and the
  // error alpha^2 sum t q^2 - 2 alpha sum t |W| q^2 + sum t W^2. Then refinement with the
  // nearest assignment (threshold alpha / 2).
  GridResult FitTernary() const {
    const int points = std::max(1, o_.ternary_grid_points);
    const float fallback = maxabs_ > 0 ? maxabs_ : 1.0f;
    float best_s = fallback;
    double best_e = 0;
    int best_p = 0;
    for (int p = 0; p < points; ++p) {
      const double r = points == 1 ? o_.ternary_min_ratio
                                   : o_.ternary_min_ratio + (o_.ternary_max_ratio -
                                                             o_.ternary_min_ratio) *
                                                                p / (points - 1);
      const V thr = Splat(maxabs_ * static_cast<float>(r));
      V num = Splat(0.0f), den = Splat(0.0f);
      const V zero = Splat(0.0f);
      for (int64_t v = 0; v < n8_; ++v) {
        const VI sel = ax_.p[v] > thr;
        num += sel ? t_.p[v] * ax_.p[v] : zero;
        den += sel ? t_.p[v] : zero;
      }
      const double n = HSum(num), d = HSum(den);
      const float s = d > 0 && n > 0 ? static_cast<float>(n / d) : fallback;
      const double sd = s;
      const double e = sd * sd * d - 2.0 * sd * n + sxx_;
      if (p == 0 || Switch(e, best_e)) {
        best_s = s;
        best_e = e;
        best_p = p;
      }
    }
    GridResult out = RefineAndSelect(kTernary, best_s, nullptr, 0);
    out.point = static_cast<int16_t>(best_p);
    return out;
  }

  // Elastic binarization (BiT): What = alpha * sign(W - beta) + beta. Start from the
  // weighted mean and mean absolute deviation, then alternate: signs given beta, then the
  // closed-form weighted LS (alpha, beta) for fixed signs:
  //   [Sw  Sq] [alpha]   [Sxq]   Sw = sum t, Sq = sum t q, Sx = sum t W, Sxq = sum t W q
  //   [Sq  Sw] [beta ] = [Sx ]   (q^2 = 1 so sum t q^2 = Sw)
  // When all signs agree (det = Sw^2 - Sq^2 ~ 0) the best is one level: alpha 0, beta Sx/Sw.
  void FitBinary(float* alpha_out, float* beta_out, double* error) const {
    V vw = Splat(0.0f), vx = Splat(0.0f);
    for (int64_t v = 0; v < n8_; ++v) {
      vw += t_.p[v];
      vx += t_.p[v] * x_.p[v];
    }
    const double sw = std::max(HSum(vw), 1e-30), sx = HSum(vx);
    double beta = sx / sw;
    V dev = Splat(0.0f);
    {
      const V B = Splat(static_cast<float>(beta));
      for (int64_t v = 0; v < n8_; ++v) dev += t_.p[v] * Abs(x_.p[v] - B);
    }
    double alpha = HSum(dev) / sw;
    const V one = Splat(1.0f), minus_one = Splat(-1.0f);
    for (int t = 0; t < o_.binarize_steps; ++t) {
      const V B = Splat(static_cast<float>(beta));
      V vq = Splat(0.0f), vxq = Splat(0.0f);
      for (int64_t v = 0; v < n8_; ++v) {
        const V q = x_.p[v] >= B ? one : minus_one;
        vq += t_.p[v] * q;
        vxq += (t_.p[v] * x_.p[v]) * q;
      }
      const double sq = HSum(vq), sxq = HSum(vxq);
      const double det = sw * sw - sq * sq;
      if (det > sw * sw * 1e-6) {
        alpha = std::max((sxq * sw - sx * sq) / det, 0.0);
        beta = (sx * sw - sxq * sq) / det;
      } else {
        alpha = 0.0;
        beta = sx / sw;
      }
    }
    const float a = RoundToHalf(static_cast<float>(std::min(std::max(alpha, 0.0), 65504.0)));
    const float b = RoundToHalf(static_cast<float>(std::min(std::max(beta, -65504.0), 65504.0)));
    const V A = Splat(a), B = Splat(b);
    V acc = Splat(0.0f);
    for (int64_t v = 0; v < n8_; ++v) {
      const V d = ((x_.p[v] >= B ? one : minus_one) * A + B) - x_.p[v];
      acc += t_.p[v] * (d * d);
    }
    *alpha_out = a;
    *beta_out = b;
    *error = HSum(acc);
  }

 private:
  const int64_t cols_, n8_;
  const QuantizerOptions& o_;
  VecBuffer x_, ax_, t_, ns_;
  bool valid_ = false;
  double sxx_ = 0;
  float maxabs_ = 0;
};

}  // namespace

// Ties are broken towards the lower flat index: a deterministic rule, unlike a library
// top-k whose order may change with the CPU's vector width.
std::vector<int32_t> SelectSalient(const UnitView& w, const float* s, int64_t k) {
  std::vector<int32_t> out;
  if (k <= 0) return out;
  const int64_t m = w.rows, c = w.cols;
  std::vector<float> score(m * c);
  for (int64_t i = 0; i < m; ++i) {
    const float* row = w.data + i * w.stride;
    for (int64_t j = 0; j < c; ++j) score[i * c + j] = std::fabs(row[j]) * s[j];
  }
  std::vector<float> sorted = score;
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<float>());
  const float threshold = sorted[k - 1];
  int64_t above = 0;
  for (float v : score) above += v > threshold;
  int64_t ties = k - above;
  out.reserve(k);
  for (int64_t i = 0; i < m * c; ++i) {
    if (score[i] > threshold || (score[i] == threshold && ties-- > 0)) {
      out.push_back(static_cast<int32_t>(i));
    }
  }
  return out;
}

float RoundToHalf(float x) { return static_cast<float>(c10::Half(x)); }
uint16_t HalfBits(float x) { return c10::Half(x).x; }
float FromHalfBits(uint16_t h) { return static_cast<float>(c10::Half(h, c10::Half::from_bits())); }

UnitFit FitUnitKernel(const UnitView& w, const float* act_scale, absl::Span<const Action> actions,
                      const QuantizerOptions& o) {
  const int64_t m = w.rows, c = w.cols, n = m * c;
  UnitFit out;
  out.rows = m;
  out.cols = c;
  const int64_t k = SalientCount(n, o.salient_fraction);

  // Salient protection: INT8, symmetric, per-unit FP16 scale.
  SalientSet& sal = out.salient;
  sal.index = SelectSalient(w, act_scale, k);
  std::vector<float> sal_values(k, 0.0f);
  float sal_max = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t f = sal.index[i];
    sal_max = std::max(sal_max, std::fabs(w.data[(f / c) * w.stride + f % c]));
  }
  if (k > 0) sal.scale = RoundToHalf(sal_max / 127.0f);
  sal.codes.assign(k, 0);
  double salient_err = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t f = sal.index[i];
    const float x = w.data[(f / c) * w.stride + f % c];
    if (sal.scale > 0) {
      const float q = std::min(std::max(std::nearbyint(x / sal.scale), -127.0f), 127.0f);
      sal.codes[i] = static_cast<int8_t>(q);
      sal_values[i] = q * sal.scale;
    }
    const double d = static_cast<double>(x - sal_values[i]);
    const double sj = act_scale[f % c];
    salient_err += d * d * sj * sj;
  }

  // Which operators to run: the requested ones plus their seeding chain (quantizer.h).
  bool need[kNumActions] = {};
  for (Action a : actions) need[ActionIndex(a)] = true;
  if (need[ActionIndex(Action::k8)]) need[ActionIndex(Action::k4)] = true;
  if (need[ActionIndex(Action::k4)]) need[ActionIndex(Action::k3)] = true;
  if (need[ActionIndex(Action::k3)]) {
    need[ActionIndex(Action::k2)] = true;
    need[ActionIndex(Action::k1_58)] = true;
  }

  const int64_t n8 = (c + kLanes - 1) / kLanes;
  VecBuffer s2(n8);
  {
    float* p = reinterpret_cast<float*>(s2.p);
    for (int64_t j = 0; j < n8 * kLanes; ++j) p[j] = j < c ? act_scale[j] * act_scale[j] : 0.0f;
  }
  double den = 0.0, err16 = 0.0;
  for (int64_t i = 0; i < m; ++i) {
    const float* row = w.data + i * w.stride;
    for (int64_t j = 0; j < c; ++j) {
      const double x = row[j], sj = act_scale[j];
      den += x * x * (sj * sj);
      const double d = x - static_cast<double>(RoundToHalf(row[j]));
      err16 += d * d * (sj * sj);
    }
  }

  std::array<std::vector<float>, kNumActions> scales, offsets;
  std::array<std::vector<int16_t>, kNumActions> points;
  std::array<double, kNumActions> row_err_sum{};
  for (int a = 1; a < kNumActions; ++a) {
    if (!need[a]) continue;
    scales[a].resize(m);
    points[a].assign(m, -1);
  }
  if (need[ActionIndex(Action::k1)]) offsets[ActionIndex(Action::k1)].resize(m);

  RowFitter rf(c, o);
  std::vector<int32_t> row_salient;
  size_t sp = 0;
  const int i1 = ActionIndex(Action::k1), i2 = ActionIndex(Action::k2),
            it = ActionIndex(Action::k1_58), i3 = ActionIndex(Action::k3),
            i4 = ActionIndex(Action::k4), i8 = ActionIndex(Action::k8);
  for (int64_t i = 0; i < m; ++i) {
    row_salient.clear();
    while (sp < sal.index.size() && sal.index[sp] < (i + 1) * c) {
      row_salient.push_back(static_cast<int32_t>(sal.index[sp++] - i * c));
    }
    rf.Load(w.data + i * w.stride, s2.p, row_salient.data(),
            static_cast<int64_t>(row_salient.size()));
    const double valid = rf.valid() ? 1.0 : 0.0;
    auto keep = [&](int a, const GridResult& r) {
      scales[a][i] = r.scale;
      points[a][i] = r.point;
      row_err_sum[a] += valid * r.error;
    };
    if (need[i1]) {
      double e = 0;
      rf.FitBinary(&scales[i1][i], &offsets[i1][i], &e);
      row_err_sum[i1] += valid * e;
    }
    if (need[i2]) keep(i2, rf.FitClipGrid(kSeq2, nullptr, 0));
    if (need[it]) keep(it, rf.FitTernary());
    // Seeds are FP16 values like every stored scale (exact unless they fall below the
    // normal FP16 range, where the orderings of quantizer.h are not promised).
    if (need[i3]) {
      const float seeds[2] = {ClampHalf(scales[i2][i] * 0.5f), scales[it][i]};
      keep(i3, rf.FitClipGrid(UniformGrid(3), seeds, 2));
    }
    if (need[i4]) {
      const float seed = ClampHalf(scales[i3][i] / 2.0f);
      keep(i4, rf.FitClipGrid(UniformGrid(4), &seed, 1));
    }
    if (need[i8]) {
      const float seed = ClampHalf(scales[i4][i] / 16.0f);
      keep(i8, rf.FitClipGrid(UniformGrid(8), &seed, 1));
    }
  }

  auto unit_error = [&](double rows_err) { return den > 0 ? (rows_err + salient_err) / den : 0.0; };
  for (Action a : actions) {
    const int ai = ActionIndex(a);
    ActionFit f;
    f.action = a;
    f.effective_bits = UnitEffectiveBits(m, c, k, a);
    if (a == Action::k16) {
      f.error = den > 0 ? err16 / den : 0.0;
    } else {
      f.scales = scales[ai];
      f.offsets = offsets[ai];
      f.grid_point = points[ai];
      f.error = unit_error(row_err_sum[ai]);
    }
    out.fits.push_back(std::move(f));
  }
  return out;
}

namespace {

Grid GridOf(Action a) {
  switch (a) {
    case Action::k8:
      return UniformGrid(8);
    case Action::k4:
      return UniformGrid(4);
    case Action::k3:
      return UniformGrid(3);
    case Action::k2:
      return kSeq2;
    default:
      return kTernary;
  }
}

// Runs `body(row_vectors, n8, row)` over every row of the unit copied into an aligned,
// zero-padded buffer; body writes its results back into the buffer's first cols floats.
template <typename Body>
void ForEachRow(const UnitView& w, Body body) {
  const int64_t n8 = (w.cols + kLanes - 1) / kLanes;
  VecBuffer buf(n8);
  for (int64_t i = 0; i < w.rows; ++i) {
    std::memset(buf.p, 0, n8 * sizeof(V));
    std::memcpy(buf.p, w.data + i * w.stride, w.cols * sizeof(float));
    body(buf.p, n8, i);
  }
}

}  // namespace

void DequantizeKernel(const UnitView& w, Action a, const float* scales, const float* offsets,
                      const SalientSet& salient, float* out, int64_t out_stride) {
  const int64_t c = w.cols;
  if (a == Action::k16) {
    for (int64_t i = 0; i < w.rows; ++i) {
      const float* src = w.data + i * w.stride;
      float* dst = out + i * out_stride;
      for (int64_t j = 0; j < c; ++j) dst[j] = RoundToHalf(src[j]);
    }
    return;
  }
  if (a == Action::k1) {
    const V one = Splat(1.0f), minus_one = Splat(-1.0f);
    ForEachRow(w, [&](V* x, int64_t n8, int64_t i) {
      const V A = Splat(scales[i]), B = Splat(offsets[i]);
      for (int64_t v = 0; v < n8; ++v) x[v] = (x[v] >= B ? one : minus_one) * A + B;
      std::memcpy(out + i * out_stride, x, c * sizeof(float));
    });
  } else {
    const Grid g = GridOf(a);
    ForEachRow(w, [&](V* x, int64_t n8, int64_t i) {
      const V S = Splat(scales[i]);
      for (int64_t v = 0; v < n8; ++v) x[v] = Level(g, Code(g, x[v], S)) * S;
      std::memcpy(out + i * out_stride, x, c * sizeof(float));
    });
  }
  for (int64_t i = 0; i < salient.count(); ++i) {
    const int64_t f = salient.index[i];
    out[(f / c) * out_stride + f % c] = static_cast<float>(salient.codes[i]) * salient.scale;
  }
}

void CodesKernel(const UnitView& w, Action a, const float* scales, const float* offsets,
                 int8_t* out) {
  const int64_t c = w.cols;
  if (a == Action::k16) return;
  ForEachRow(w, [&](V* x, int64_t n8, int64_t i) {
    if (a == Action::k1) {
      const V B = Splat(offsets[i]), one = Splat(1.0f), minus_one = Splat(-1.0f);
      for (int64_t v = 0; v < n8; ++v) x[v] = x[v] >= B ? one : minus_one;
    } else {
      const Grid g = GridOf(a);
      const V S = Splat(scales[i]);
      for (int64_t v = 0; v < n8; ++v) x[v] = Code(g, x[v], S);
    }
    const float* q = reinterpret_cast<const float*>(x);
    for (int64_t j = 0; j < c; ++j) out[i * c + j] = static_cast<int8_t>(q[j]);
  });
}

}  // namespace windquant::quant
