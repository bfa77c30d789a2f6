#include "common/quant/gptq_torch.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace windquant::quant {
namespace {

struct Grid {
  float qmin = 0, qmax = 0;
  bool half = false;
};

Grid GridOf(plan::Action a) {
  switch (a) {
    case plan::Action::k8:
      return {-128.0f, 127.0f, false};
    case plan::Action::k4:
      return {-8.0f, 7.0f, false};
    case plan::Action::k3:
      return {-4.0f, 3.0f, false};
    case plan::Action::k2:
      return {-2.0f, 1.0f, true};
    case plan::Action::k1_58:
      return {-1.0f, 1.0f, false};
    default:
      return {};
  }
}

// The per-unit inputs of QuantizeEntry on the device: scales and offsets [units, rows]
// (zeros where a unit has none), and the salient values in the transposed layout
// ([in * rows]: a mask and the INT8 value times the set's scale).
struct DeviceUnits {
  at::Tensor scales, offsets, salient_mask, salient_value;
  std::vector<bool> has_salient;
};

DeviceUnits Upload(const std::vector<ColumnUnit>& units, int64_t rows, int64_t in,
                   at::Device device) {
  const auto n = static_cast<int64_t>(units.size());
  at::Tensor scales = at::zeros({n, rows}, at::kFloat), offsets = at::zeros({n, rows}, at::kFloat);
  std::vector<int64_t> index;
  std::vector<float> value;
  DeviceUnits out;
  out.has_salient.assign(units.size(), false);
  for (int64_t i = 0; i < n; ++i) {
    const ColumnUnit& cu = units[i];
    if (cu.scales != nullptr) std::copy(cu.scales, cu.scales + rows, scales[i].data_ptr<float>());
    if (cu.offsets != nullptr) {
      std::copy(cu.offsets, cu.offsets + rows, offsets[i].data_ptr<float>());
    }
    // A unit at 16 bits stores its FP16 values whole: no salient entries (gptq.cc).
    if (cu.action == plan::Action::k16 || cu.salient == nullptr) continue;
    for (int64_t t = 0; t < cu.salient->count(); ++t) {
      const int64_t flat = cu.salient->index[t], r = flat / cu.cols, c = flat % cu.cols;
      index.push_back((cu.col_begin + c) * rows + r);
      value.push_back(static_cast<float>(cu.salient->codes[t]) * cu.salient->scale);
    }
    out.has_salient[i] = cu.salient->count() > 0;
  }
  out.scales = scales.to(device);
  out.offsets = offsets.to(device);
  out.salient_mask = at::zeros({in * rows}, at::TensorOptions(device).dtype(at::kBool));
  out.salient_value = at::zeros({in * rows}, at::TensorOptions(device).dtype(at::kFloat));
  if (!index.empty()) {
    const at::Tensor idx = at::tensor(index, at::TensorOptions().dtype(at::kLong)).to(device);
    out.salient_mask.index_put_({idx}, true);
    out.salient_value.index_put_({idx}, at::tensor(value).to(device));
  }
  out.salient_mask = out.salient_mask.view({in, rows});
  out.salient_value = out.salient_value.view({in, rows});
  return out;
}

// QuantizeEntry over a column (x [rows]) of a unit with action a.
at::Tensor QuantizeColumn(plan::Action a, const at::Tensor& x, const at::Tensor& s,
                          const at::Tensor& o) {
  if (a == plan::Action::k16) return x.to(at::kHalf).to(at::kFloat);
  if (a == plan::Action::k1) {
    return at::where(x >= o, 1.0f, -1.0f).mul_(s).add_(o);
  }
  const Grid g = GridOf(a);
  const at::Tensor q = (x / s).clamp_(g.qmin, g.qmax);
  const at::Tensor v = g.half ? q.floor().add_(0.5f).mul_(s) : q.round().mul_(s);
  // A zero scale: the CPU's clamp sends x / 0 (inf, or NaN for x = 0) to qmin or qmax,
  // so the value is a zero with the sign of x < 0.
  return at::where(s == 0, at::where(x < 0, -0.0f, 0.0f), v);
}

// Packed positions per chunk of PackUpper (bounds its index temporaries, ~100 bytes per
// position: 100 MB).
constexpr int64_t kPackChunk = int64_t{1} << 20;

// The upper triangle of U [n, n] as PackedUpper's rows (float32), where U[j][k] is
// element k * n + j of `flat` (U's transpose, row-major, as the in-place factorisation
// leaves it). Each packed position p finds its row j (the largest j whose row start
// S(j) = j (2n + 1 - j) / 2 is <= p: the floor of the quadratic's root) and its column
// k = j + p - S(j) on the device. The root is exact at a row start (the discriminant is
// the square (2n + 1 - 2j)^2) and elsewhere at least ~1/(4n) from an integer, against a
// float64 error of ~1e-16 (2n + 1): the two corrections by one are a guard only.
at::Tensor PackUpper(const at::Tensor& flat, int64_t n) {
  const int64_t total = n * (n + 1) / 2;
  at::Tensor packed = at::empty({total}, flat.options().dtype(at::kFloat));
  const at::TensorOptions longs = flat.options().dtype(at::kLong);
  const double c = 2.0 * static_cast<double>(n) + 1.0;
  auto row_start = [n](const at::Tensor& j) {  // S(j), exact in int64
    return j.neg().add_(2 * n + 1).mul_(j).div_(2, "floor");
  };
  for (int64_t p0 = 0; p0 < total; p0 += kPackChunk) {
    const int64_t len = std::min(kPackChunk, total - p0);
    const at::Tensor p = at::arange(p0, p0 + len, longs);
    at::Tensor j = p.to(at::kDouble).mul_(-8.0).add_(c * c).sqrt_().neg_().add_(c).mul_(0.5);
    j = j.floor_().to(at::kLong);
    j = at::where(row_start(j) > p, j - 1, j);
    j = at::where(row_start(j + 1) <= p, j + 1, j);
    const at::Tensor k = p - row_start(j) + j;
    packed.narrow(0, p0, len).copy_(flat.index_select(0, k * n + j));
  }
  return packed;
}

}  // namespace

absl::StatusOr<TorchFactor> InverseHessianFactorTorch(at::Tensor h, double damp_fraction,
                                                      const std::string& what) {
  if (!h.defined() || h.dim() != 2 || h.size(0) != h.size(1) || h.size(0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": Hessian missing or not square"));
  }
  try {
    c10::NoGradGuard no_grad;
    const bool own = h.scalar_type() == at::kDouble && h.is_contiguous() && h.use_count() == 1 &&
                     h.storage().use_count() == 1;
    at::Tensor H = own ? std::move(h)
                       : h.to(h.options().dtype(at::kDouble), /*non_blocking=*/false,
                              /*copy=*/true, at::MemoryFormat::Contiguous);
    h = at::Tensor();
    const int64_t n = H.size(0);
    const at::Tensor not_finite = at::isfinite(H).all().logical_not_();
    // Dead inputs (a zero diagonal entry) as the CPU path: diagonal 1, then the damping.
    at::Tensor diag = H.diagonal();
    diag.masked_fill_(diag == 0, 1.0);
    diag.add_(diag.mean().mul_(damp_fraction));
    diag = at::Tensor();
    // In H's memory: read column-major (ATen's LAPACK layout, no copy) H is a = H^T, and
    // a's upper triangle is H's lower one, the triangle the CPU path factors. a = U^T U
    // leaves L = U^T, lower, in H read row-major.
    at::Tensor a = H.mT();
    at::Tensor info = at::empty({0}, H.options().dtype(at::kInt));
    at::linalg_cholesky_ex_out(a, info, a, /*upper=*/true);
    at::Tensor inverse_l = at::eye(n, H.options());
    at::linalg_solve_triangular_out(inverse_l, H, inverse_l, /*upper=*/false);
    at::mm_out(H, inverse_l.mT(), inverse_l);  // (H + damp I)^-1 = L^-T L^-1
    inverse_l = at::Tensor();
    // Its upper factor, in place again (a's upper triangle: the inverse's lower one, equal
    // to its upper one but for the GEMM's roundings): U = a, i.e. U[j][k] = H[k][j].
    at::Tensor info_inverse = at::empty({0}, H.options().dtype(at::kInt));
    at::linalg_cholesky_ex_out(a, info_inverse, a, /*upper=*/true);
    a = at::Tensor();
    absl::StatusOr<PackedUpper> u = PackedUpper::FromData(PackUpper(H.view({-1}), n));
    if (!u.ok()) return absl::InternalError(absl::StrCat(what, ": ", u.status().message()));
    TorchFactor out;
    out.u = *std::move(u);
    auto code = [&](FactorFailure f) {  // a device scalar: filled there, no copy
      return at::scalar_tensor(static_cast<int64_t>(f), H.options().dtype(at::kLong));
    };
    out.failure = at::where(
        not_finite, code(FactorFailure::kNotFinite),
        at::where(info.ne(0), code(FactorFailure::kNotPositiveDefinite),
                  at::where(info_inverse.ne(0), code(FactorFailure::kInverseNotPositiveDefinite),
                            code(FactorFailure::kNone))));
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
  }
}

absl::Status CheckTorchFactors(const std::vector<at::Tensor>& failures,
                               const std::vector<std::string>& what) {
  if (failures.empty()) return absl::OkStatus();
  at::Tensor host;
  try {
    host = at::stack(failures).to(at::kCPU, at::kLong).contiguous();  // the one copy
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("gptq factors: ", e.what_without_backtrace()));
  }
  const int64_t* code = host.data_ptr<int64_t>();
  for (size_t i = 0; i < failures.size(); ++i) {
    const std::string& name = i < what.size() ? what[i] : std::string("factor");
    switch (static_cast<FactorFailure>(code[i])) {
      case FactorFailure::kNone:
        continue;
      case FactorFailure::kNotFinite:
        return absl::InvalidArgumentError(absl::StrCat(name, ": Hessian not finite"));
      case FactorFailure::kNotPositiveDefinite:
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": Hessian not positive definite after dampening"));
      case FactorFailure::kInverseNotPositiveDefinite:
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": inverse Hessian not positive definite"));
    }
    return absl::InternalError(absl::StrCat(name, ": unknown factorisation outcome ", code[i]));
  }
  return absl::OkStatus();
}

void CompensateLinearTorch(const std::vector<ColumnUnit>& units, const PackedUpper& u,
                           at::Tensor* w, at::Tensor* quantized_from, const GptqOptions& o) {
  c10::NoGradGuard no_grad;
  const int64_t rows = w->size(0), in = w->size(1);
  const at::Device device = w->device();
  const at::TensorOptions f32 = at::TensorOptions(device).dtype(at::kFloat);
  std::vector<int32_t> unit_of(in, 0);
  for (size_t i = 0; i < units.size(); ++i) {
    for (int64_t j = units[i].col_begin; j < units[i].col_begin + units[i].cols; ++j) {
      unit_of[j] = static_cast<int32_t>(i);
    }
  }
  const DeviceUnits du = Upload(units, rows, in, device);
  const at::Tensor packed = u.data().to(device);
  at::Tensor wt = w->t().contiguous();  // [in, rows]: column j is row j
  at::Tensor ft = quantized_from != nullptr ? at::empty({in, rows}, f32) : at::Tensor();
  const int64_t block = std::max<int64_t>(o.block_columns, 1);
  at::Tensor err = at::empty({std::min(block, in), rows}, f32);
  for (int64_t b0 = 0; b0 < in; b0 += block) {
    const int64_t b1 = std::min(b0 + block, in), bl = b1 - b0;
    // Rows [b0, b1) of U from column b0 on (zeros below the diagonal).
    at::Tensor ub = at::zeros({bl, in - b0}, f32);
    for (int64_t j = b0; j < b1; ++j) {
      const int64_t base = j * (2 * in - 1 - j) / 2;
      ub[j - b0].narrow(0, j - b0, in - j).copy_(packed.narrow(0, base + j, in - j));
    }
    for (int64_t j = b0; j < b1; ++j) {
      const int i = unit_of[j];
      const at::Tensor x = wt[j];
      if (ft.defined()) ft[j].copy_(x);
      at::Tensor q = QuantizeColumn(units[i].action, x, du.scales[i], du.offsets[i]);
      if (du.has_salient[i]) q = at::where(du.salient_mask[j], du.salient_value[j], q);
      const at::Tensor e = (x - q).div_(ub[j - b0][j - b0]);
      x.copy_(q);
      err[j - b0].copy_(e);
      if (j + 1 < b1) {
        const at::Tensor uj = ub[j - b0].narrow(0, j + 1 - b0, b1 - j - 1);
        wt.narrow(0, j + 1, b1 - j - 1).sub_(at::outer(uj, e));
      }
    }
    if (b1 < in) {
      wt.narrow(0, b1, in - b1)
          .addmm_(ub.narrow(1, bl, in - b1).t(), err.narrow(0, 0, bl), /*beta=*/1, /*alpha=*/-1);
    }
  }
  w->copy_(wt.t());
  if (quantized_from != nullptr) quantized_from->copy_(ft.t());
}

}  // namespace windquant::quant
