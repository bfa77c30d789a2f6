#include "common/quant/reference_quantizer.h"

#include <c10/core/GradMode.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace windquant::quant::reference {
namespace {

// Smallest positive FP16 value (subnormal) and the largest finite one: fitted scales are
// clamped into this range before being rounded to FP16.
constexpr double kMinHalf = 5.9604644775390625e-08;
constexpr double kMaxHalf = 65504.0;

at::Tensor RoundToHalf(const at::Tensor& x) { return x.to(at::kHalf).to(at::kFloat); }

at::Tensor HalfScale(const at::Tensor& s) { return RoundToHalf(s.clamp(kMinHalf, kMaxHalf)); }

// Everything the operators share for one unit.
struct UnitContext {
  at::Tensor w;          // [m, c] float32
  at::Tensor wt;         // [m, c] fitting weights: s_j^2 on non-salient entries, 0 on salient
                         // (rows with no weight: 1 on non-salient entries)
  at::Tensor row_valid;  // [m] float 1 where the row has positive s^2 weight, else 0
  at::Tensor maxabs;     // [m] max |W| over non-salient entries
};

// A symmetric level grid: code q in [qmin, qmax], level q (+ 0.5 when `half`).
//   uniform b bit: qmin = -2^(b-1), qmax = 2^(b-1)-1, half = false   (nearest: round)
//   ternary:       qmin = -1, qmax = 1, half = false
//   SEQ 2 bit:     qmin = -2, qmax = 1, half = true (levels +-0.5, +-1.5; nearest: floor)
struct Grid {
  double qmin, qmax;
  bool half;
  double top_level() const { return half ? qmax + 0.5 : qmax; }
};

// Nearest code for each entry under per-row scale (s [m] > 0): the grid is evenly spaced,
// so rounding (or flooring for the half-offset grid) then clamping is the nearest level.
at::Tensor Assign(const UnitContext& u, const Grid& g, const at::Tensor& s) {
  at::Tensor q = u.w / s.unsqueeze(1);
  if (g.half) {
    q.floor_();
  } else {
    q.round_();
  }
  return q.clamp_(g.qmin, g.qmax);
}

at::Tensor Levels(const Grid& g, const at::Tensor& q) { return g.half ? q + 0.5 : q; }

// Per-row weighted squared error sum_j wt_ij (W_ij - s_i * l_ij)^2.
at::Tensor RowError(const UnitContext& u, const at::Tensor& s, const at::Tensor& levels) {
  at::Tensor d = levels * s.unsqueeze(1);
  d.sub_(u.w);
  d.mul_(d).mul_(u.wt);
  return d.sum(1);
}

// Closed-form weighted least-squares scale for fixed levels: s = sum wt W l / sum wt l^2.
// Keeps `fallback` where it is undefined or not positive.
at::Tensor LsScale(const UnitContext& u, const at::Tensor& levels, const at::Tensor& fallback) {
  at::Tensor wl = u.wt * levels;
  at::Tensor num = (wl * u.w).sum(1);
  at::Tensor den = (wl * levels).sum(1);
  at::Tensor ok = (den > 0).logical_and(num > 0);
  return at::where(ok, num / den.clamp_min(1e-30), fallback);
}

struct GridFit {
  at::Tensor scale;      // [m] FP16 values
  at::Tensor codes;      // [m, c] float codes
  at::Tensor row_error;  // [m] weighted error over non-salient entries
};

// Alternating refinement then FP16 rounding, then the per-row best of the rounded fit and
// the `seeds` (FP16-exact scales that reproduce a coarser grid's levels on this grid).
// Each refinement step cannot increase the error: the LS scale is optimal for fixed codes,
// nearest assignment is optimal for a fixed scale.
GridFit RefineAndSelect(const UnitContext& u, const Grid& g, at::Tensor s, int steps,
                        const std::vector<at::Tensor>& seeds) {
  for (int t = 0; t < steps; ++t) {
    at::Tensor q = Assign(u, g, s);
    s = LsScale(u, Levels(g, q), s);
  }
  std::vector<at::Tensor> cands = {HalfScale(s)};
  for (const at::Tensor& seed : seeds) cands.push_back(seed);
  GridFit best;
  for (size_t i = 0; i < cands.size(); ++i) {
    at::Tensor q = Assign(u, g, cands[i]);
    at::Tensor err = RowError(u, cands[i], Levels(g, q));
    if (i == 0) {
      best = {cands[i], q, err};
      continue;
    }
    at::Tensor better = err < best.row_error;  // ties keep the earlier candidate
    best.scale = at::where(better, cands[i], best.scale);
    best.codes = at::where(better.unsqueeze(1), q, best.codes);
    best.row_error = at::where(better, err, best.row_error);
  }
  return best;
}

// Keeps, per row, the scale with the smaller error.
void KeepBetter(at::Tensor& best_s, at::Tensor& best_e, const at::Tensor& s, const at::Tensor& e) {
  at::Tensor better = e < best_e;
  best_s = at::where(better, s, best_s);
  best_e = at::where(better, e, best_e);
}

// Uniform symmetric (3/4/8 bit, LSQ-style) and SEQ 2 bit: clip-ratio search over
// s = r * max|W| / top_level, r from 1 down to clip_min_ratio, then alternating refinement.
GridFit FitClipGrid(const UnitContext& u, const Grid& g, const QuantizerOptions& o,
                    const std::vector<at::Tensor>& seeds) {
  const int points = std::max(1, o.clip_grid_points);
  at::Tensor base = at::where(u.maxabs > 0, u.maxabs, at::ones_like(u.maxabs)) / g.top_level();
  at::Tensor best_s, best_e;
  for (int p = 0; p < points; ++p) {
    const double r = points == 1 ? 1.0 : 1.0 - (1.0 - o.clip_min_ratio) * p / (points - 1);
    at::Tensor s = base * r;
    at::Tensor e = RowError(u, s, Levels(g, Assign(u, g, s)));
    if (p == 0) {
      best_s = s;
      best_e = e;
    } else {
      KeepBetter(best_s, best_e, s, e);
    }
  }
  return RefineAndSelect(u, g, best_s, o.refine_steps, seeds);
}

// Ternary (SEQ-style): threshold search Delta = r * max|W|; given the assignment
// q = sign(W) [|W| > Delta] the weighted LS alpha is sum wt |W| q^2 / sum wt q^2.
// Then alternating refinement with nearest assignment (threshold alpha/2).
GridFit FitTernary(const UnitContext& u, const QuantizerOptions& o) {
  const Grid g{-1, 1, false};
  const int points = std::max(1, o.ternary_grid_points);
  at::Tensor absw = u.w.abs();
  at::Tensor wabs = u.wt * absw;
  at::Tensor fallback = at::where(u.maxabs > 0, u.maxabs, at::ones_like(u.maxabs));
  at::Tensor best_s, best_e;
  for (int p = 0; p < points; ++p) {
    const double r =
        points == 1
            ? o.ternary_min_ratio
            : o.ternary_min_ratio + (o.ternary_max_ratio - o.ternary_min_ratio) * p / (points - 1);
    at::Tensor sel = (absw > (u.maxabs * r).unsqueeze(1)).to(at::kFloat);
    at::Tensor num = (wabs * sel).sum(1);
    at::Tensor den = (u.wt * sel).sum(1);
    at::Tensor s = at::where((den > 0).logical_and(num > 0), num / den.clamp_min(1e-30), fallback);
    at::Tensor e = RowError(u, s, sel * u.w.sign());
    if (p == 0) {
      best_s = s;
      best_e = e;
    } else {
      KeepBetter(best_s, best_e, s, e);
    }
  }
  return RefineAndSelect(u, g, best_s, o.refine_steps, {});
}

struct BinaryFit {
  at::Tensor alpha, beta;  // [m] FP16 values
  at::Tensor codes;        // [m, c] float {-1, 1}
  at::Tensor row_error;
};

// Elastic binarization (BiT): What = alpha * sign(W - beta) + beta. Start from the weighted
// mean and mean absolute deviation, then alternate: signs given beta (nearest of beta+-alpha
// for alpha >= 0), then the closed-form weighted LS (alpha, beta) for fixed signs:
//   [Sw  Sq] [alpha]   [Sxq]      Sw = sum wt, Sq = sum wt q, Sx = sum wt W, Sxq = sum wt W q
//   [Sq  Sw] [beta ] = [Sx ]      (q^2 = 1 so sum wt q^2 = Sw)
// When all signs agree (det = Sw^2 - Sq^2 ~ 0) the best is a single level: alpha=0, beta=Sx/Sw.
BinaryFit FitBinary(const UnitContext& u, const QuantizerOptions& o) {
  at::Tensor sw = u.wt.sum(1).clamp_min(1e-30);
  at::Tensor sx = (u.wt * u.w).sum(1);
  at::Tensor beta = sx / sw;
  at::Tensor alpha = (u.wt * (u.w - beta.unsqueeze(1)).abs()).sum(1) / sw;
  auto signs = [&](const at::Tensor& b) {
    return at::where(u.w >= b.unsqueeze(1), at::ones_like(u.w), -at::ones_like(u.w));
  };
  for (int t = 0; t < o.binarize_steps; ++t) {
    at::Tensor q = signs(beta);
    at::Tensor sq = (u.wt * q).sum(1);
    at::Tensor sxq = (u.wt * u.w * q).sum(1);
    at::Tensor det = sw * sw - sq * sq;
    at::Tensor ok = det > sw * sw * 1e-6;
    at::Tensor safe_det = at::where(ok, det, at::ones_like(det));
    alpha = at::where(ok, (sxq * sw - sx * sq) / safe_det, at::zeros_like(alpha)).clamp_min(0);
    beta = at::where(ok, (sx * sw - sxq * sq) / safe_det, sx / sw);
  }
  BinaryFit f;
  f.alpha = RoundToHalf(alpha.clamp(0, kMaxHalf));
  f.beta = RoundToHalf(beta.clamp(-kMaxHalf, kMaxHalf));
  f.codes = signs(f.beta);
  at::Tensor d = f.codes * f.alpha.unsqueeze(1) + f.beta.unsqueeze(1) - u.w;
  f.row_error = (d * d * u.wt).sum(1);
  return f;
}

absl::Status CheckInputs(const at::Tensor& w, const at::Tensor& s) {
  if (!w.defined() || w.dim() != 2 || w.scalar_type() != at::kFloat) {
    return absl::InvalidArgumentError("weight: must be a 2-D float32 tensor [rows, cols]");
  }
  if (!s.defined() || s.dim() != 1 || s.scalar_type() != at::kFloat || s.size(0) != w.size(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("act_scale: must be a 1-D float32 tensor of size cols = ", w.size(1)));
  }
  if (!at::isfinite(w).all().item<bool>()) {
    return absl::InvalidArgumentError("weight: contains NaN or Inf");
  }
  if (!at::isfinite(s).all().item<bool>() || (s < 0).any().item<bool>()) {
    return absl::InvalidArgumentError("act_scale: must be finite and >= 0");
  }
  return absl::OkStatus();
}

at::Tensor SalientMaskUnchecked(const at::Tensor& w, const at::Tensor& s, int64_t k,
                                at::Tensor* index) {
  at::Tensor flat_mask = at::zeros({w.numel()}, w.options().dtype(at::kBool));
  if (k == 0) {
    *index = at::empty({0}, w.options().dtype(at::kLong));
  } else {
    at::Tensor score = (w.abs() * s.unsqueeze(0)).reshape({-1});
    *index = std::get<0>(std::get<1>(at::topk(score, k)).sort());
    flat_mask.index_fill_(0, *index, true);
  }
  return flat_mask.view(w.sizes());
}

// Salient INT8 values: symmetric, per-unit scale FP16(max|W_salient| / 127).
ReferenceSalientSet MakeSalient(const at::Tensor& w, const at::Tensor& s, int64_t k,
                                at::Tensor* values) {
  ReferenceSalientSet out;
  out.count = k;
  out.mask = SalientMaskUnchecked(w, s, k, &out.index);
  at::Tensor v = w.reshape({-1}).index_select(0, out.index);
  if (k > 0) {
    out.scale = RoundToHalf(v.abs().max() / 127.0f).item<float>();
  }
  if (out.scale > 0) {
    at::Tensor q = (v / out.scale).round_().clamp_(-127, 127);
    out.codes = q.to(at::kChar);
    *values = q * out.scale;
  } else {
    out.codes = at::zeros({k}, w.options().dtype(at::kChar));
    *values = at::zeros({k}, w.options());
  }
  return out;
}

double ErrorDenominator(const at::Tensor& w, const at::Tensor& s) {
  return (w.to(at::kDouble).square() * s.to(at::kDouble).square().unsqueeze(0))
      .sum()
      .item<double>();
}

}  // namespace

const ReferenceActionFit* ReferenceUnitFit::Find(plan::Action a) const {
  for (const ReferenceActionFit& f : fits) {
    if (f.action == a) return &f;
  }
  return nullptr;
}

double ReferenceRelativeError(const at::Tensor& weight, const at::Tensor& dequant,
                              const at::Tensor& act_scale) {
  const double den = ErrorDenominator(weight, act_scale);
  if (!(den > 0)) return 0.0;
  at::Tensor d = (weight.to(at::kDouble) - dequant.to(at::kDouble)).square();
  return (d * act_scale.to(at::kDouble).square().unsqueeze(0)).sum().item<double>() / den;
}

absl::StatusOr<at::Tensor> ReferenceSalientMask(const at::Tensor& weight,
                                                const at::Tensor& act_scale, double fraction) {
  try {
    absl::Status st = CheckInputs(weight, act_scale);
    if (!st.ok()) return st;
    at::Tensor index;
    return SalientMaskUnchecked(weight.contiguous(), act_scale.contiguous(),
                                plan::SalientCount(weight.numel(), fraction), &index);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("ReferenceSalientMask: ", e.what_without_backtrace()));
  }
}

namespace {

using ActionSet = std::array<bool, plan::kNumActions>;

// Which operators to run: the requested ones plus their seeding chain (quantizer.h).
ActionSet NeededActions(absl::Span<const plan::Action> actions) {
  ActionSet need = {};
  for (plan::Action a : actions) need[plan::ActionIndex(a)] = true;
  if (need[plan::ActionIndex(plan::Action::k8)]) need[plan::ActionIndex(plan::Action::k4)] = true;
  if (need[plan::ActionIndex(plan::Action::k4)]) need[plan::ActionIndex(plan::Action::k3)] = true;
  if (need[plan::ActionIndex(plan::Action::k3)]) {
    need[plan::ActionIndex(plan::Action::k2)] = true;
    need[plan::ActionIndex(plan::Action::k1_58)] = true;
  }
  return need;
}

// The fitting weights of w's non-salient entries (salient_mask: true where salient).
UnitContext MakeUnitContext(const at::Tensor& w, const at::Tensor& s,
                            const at::Tensor& salient_mask) {
  UnitContext u;
  u.w = w;
  at::Tensor nonsal = salient_mask.logical_not().to(at::kFloat);
  at::Tensor wt = nonsal * s.square().unsqueeze(0);
  at::Tensor row_w = wt.sum(1);
  u.row_valid = (row_w > 0).to(at::kFloat);
  u.wt = at::where((row_w > 0).unsqueeze(1), wt, nonsal);
  u.maxabs = (w.abs() * nonsal).amax(1);
  return u;
}

// The activation-weighted squared error of the salient INT8 values (0 without any).
double SalientError(const at::Tensor& w, const at::Tensor& s, const ReferenceSalientSet& salient,
                    const at::Tensor& salient_values) {
  if (salient.count <= 0) return 0.0;
  return ((w.reshape({-1}).index_select(0, salient.index) - salient_values)
              .to(at::kDouble)
              .square() *
          s.to(at::kDouble).square().repeat({w.size(0)}).index_select(0, salient.index))
      .sum()
      .item<double>();
}

// Completes the operators' fits of one unit: the salient values go back into each
// dequantized matrix, and the error is the unit's relative error (the valid rows' errors
// plus the salient error, over ErrorDenominator).
struct FitCollector {
  int64_t m, c, k;
  at::Tensor salient_index;
  at::Tensor salient_values;
  at::Tensor row_valid;
  double den;
  double salient_err;
  std::map<plan::Action, ReferenceActionFit> done;

  double UnitError(const at::Tensor& row_error) const {
    if (!(den > 0)) return 0.0;
    return ((row_error * row_valid).to(at::kDouble).sum().item<double>() + salient_err) / den;
  }
  void Finish(plan::Action a, at::Tensor op_dequant, at::Tensor codes, at::Tensor scales,
              at::Tensor offsets, const at::Tensor& row_error) {
    ReferenceActionFit f;
    f.action = a;
    if (k > 0) op_dequant.view({-1}).index_put_({salient_index}, salient_values);
    f.dequant = op_dequant;
    f.codes = codes.to(at::kChar);
    f.scales = scales;
    f.offsets = offsets;
    f.error = UnitError(row_error);
    f.effective_bits = plan::UnitEffectiveBits(m, c, k, a);
    done[a] = std::move(f);
  }
  void FinishGrid(plan::Action a, const Grid& g, const GridFit& gf) {
    Finish(a, Levels(g, gf.codes) * gf.scale.unsqueeze(1), gf.codes, gf.scale, at::Tensor(),
           gf.row_error);
  }
};

// The uniform grids 3 <- 4 <- 8 bits, 3 seeded by the 2-bit and ternary scales and each
// next one by the previous scales.
void FitUniformChain(const UnitContext& u, const QuantizerOptions& options, const ActionSet& need,
                     FitCollector* fits) {
  std::vector<at::Tensor> seeds;
  if (need[plan::ActionIndex(plan::Action::k3)]) {
    seeds = {fits->done[plan::Action::k2].scales * 0.5, fits->done[plan::Action::k1_58].scales};
  }
  const int uniform_bits[] = {3, 4, 8};
  const plan::Action uniform_actions[] = {plan::Action::k3, plan::Action::k4, plan::Action::k8};
  int prev_bits = 0;
  for (int i = 0; i < 3; ++i) {
    const plan::Action a = uniform_actions[i];
    if (!need[plan::ActionIndex(a)]) break;  // the chain 3 <- 4 <- 8 is closed downwards
    const int b = uniform_bits[i];
    if (prev_bits > 0)
      seeds = {fits->done[uniform_actions[i - 1]].scales / double(1 << (b - prev_bits))};
    const Grid g{-std::ldexp(1.0, b - 1), std::ldexp(1.0, b - 1) - 1, false};
    fits->FinishGrid(a, g, FitClipGrid(u, g, options, seeds));
    prev_bits = b;
  }
}

}  // namespace

absl::StatusOr<ReferenceUnitFit> ReferenceFitUnit(const at::Tensor& weight,
                                                  const at::Tensor& act_scale,
                                                  absl::Span<const plan::Action> actions,
                                                  const QuantizerOptions& options) {
  try {
    absl::Status st = CheckInputs(weight, act_scale);
    if (!st.ok()) return st;
    c10::NoGradGuard no_grad;
    const at::Tensor w = weight.contiguous();
    const at::Tensor s = act_scale.contiguous();
    const int64_t m = w.size(0), c = w.size(1);
    ReferenceUnitFit out;
    out.rows = m;
    out.cols = c;
    const int64_t k = plan::SalientCount(m * c, options.salient_fraction);
    at::Tensor salient_values;
    out.salient = MakeSalient(w, s, k, &salient_values);
    const ActionSet need = NeededActions(actions);
    const UnitContext u = MakeUnitContext(w, s, out.salient.mask);
    FitCollector fits{m,
                      c,
                      k,
                      out.salient.index,
                      salient_values,
                      u.row_valid,
                      ErrorDenominator(w, s),
                      SalientError(w, s, out.salient, salient_values),
                      /*done=*/{}};

    const Grid kSeq2{-2, 1, true}, kTern{-1, 1, false};
    if (need[plan::ActionIndex(plan::Action::k1)]) {
      BinaryFit b = FitBinary(u, options);
      fits.Finish(plan::Action::k1, b.codes * b.alpha.unsqueeze(1) + b.beta.unsqueeze(1), b.codes,
                  b.alpha, b.beta, b.row_error);
    }
    if (need[plan::ActionIndex(plan::Action::k2)])
      fits.FinishGrid(plan::Action::k2, kSeq2, FitClipGrid(u, kSeq2, options, {}));
    if (need[plan::ActionIndex(plan::Action::k1_58)])
      fits.FinishGrid(plan::Action::k1_58, kTern, FitTernary(u, options));
    FitUniformChain(u, options, need, &fits);
    if (need[plan::ActionIndex(plan::Action::k16)]) {
      ReferenceActionFit f;
      f.action = plan::Action::k16;
      f.dequant = RoundToHalf(w);
      f.error = ReferenceRelativeError(w, f.dequant, s);
      f.effective_bits = plan::UnitEffectiveBits(m, c, k, plan::Action::k16);
      fits.done[plan::Action::k16] = std::move(f);
    }
    for (plan::Action a : actions) out.fits.push_back(fits.done[a]);
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("ReferenceFitUnit: ", e.what_without_backtrace()));
  }
}

at::Tensor ReferenceDequantize(const at::Tensor& weight, plan::Action a,
                               const std::vector<float>& scales, const std::vector<float>& offsets,
                               const SalientSet& salient) {
  const at::Tensor w = weight.to(at::kFloat).contiguous();
  if (a == plan::Action::k16) return RoundToHalf(w);
  const int64_t m = w.size(0);
  const at::Tensor s = at::tensor(scales).reshape({m, 1});
  at::Tensor out;
  if (a == plan::Action::k1) {
    const at::Tensor beta = at::tensor(offsets).reshape({m, 1});
    const at::Tensor q = at::where(w >= beta, at::ones_like(w), -at::ones_like(w));
    out = q * s + beta;
  } else {
    const double bits = a == plan::Action::k8   ? 8
                        : a == plan::Action::k4 ? 4
                        : a == plan::Action::k3 ? 3
                                                : 2;
    double lo = -std::ldexp(1.0, static_cast<int>(bits) - 1), hi = -lo - 1;
    if (a == plan::Action::k1_58) lo = -1, hi = 1;
    at::Tensor q = w / s;
    q = a == plan::Action::k2 ? q.floor() : q.round();
    q = q.clamp(lo, hi);
    out = (a == plan::Action::k2 ? q + 0.5 : q) * s;
  }
  if (salient.count() > 0) {
    const at::Tensor index =
        at::tensor(std::vector<int64_t>(salient.index.begin(), salient.index.end()));
    const at::Tensor values =
        at::tensor(std::vector<float>(salient.codes.begin(), salient.codes.end())) * salient.scale;
    out.view({-1}).index_put_({index}, values);
  }
  return out;
}

}  // namespace windquant::quant::reference
