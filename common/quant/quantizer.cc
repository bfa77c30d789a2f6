#include "common/quant/quantizer.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/quant/fit_kernels.h"

namespace windquant::quant {
namespace {

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

UnitView View(const at::Tensor& w) {
  return UnitView{w.data_ptr<float>(), w.stride(0), w.size(0), w.size(1)};
}

// The weight as a row-major view (rows may be strided, columns must be contiguous).
at::Tensor RowMajor(const at::Tensor& w) { return w.stride(1) == 1 ? w : w.contiguous(); }

absl::StatusOr<const ActionFit*> FindFit(const at::Tensor& weight, const UnitFit& fit,
                                         plan::Action a) {
  if (!weight.defined() || weight.dim() != 2 || weight.scalar_type() != at::kFloat ||
      weight.size(0) != fit.rows || weight.size(1) != fit.cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight: must be float32 [", fit.rows, ", ", fit.cols, "] like the fit"));
  }
  const ActionFit* f = fit.Find(a);
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("action ", std::string(plan::ActionName(a)), ": not in the fit"));
  }
  return f;
}

}  // namespace

const ActionFit* UnitFit::Find(plan::Action a) const {
  for (const ActionFit& f : fits) {
    if (f.action == a) return &f;
  }
  return nullptr;
}

double RelativeError(const at::Tensor& weight, const at::Tensor& dequant,
                     const at::Tensor& act_scale) {
  const at::Tensor s2 = act_scale.to(at::kDouble).square().unsqueeze(0);
  const double den = (weight.to(at::kDouble).square() * s2).sum().item<double>();
  if (!(den > 0)) return 0.0;
  at::Tensor d = (weight.to(at::kDouble) - dequant.to(at::kDouble)).square();
  return (d * s2).sum().item<double>() / den;
}

absl::StatusOr<at::Tensor> SalientMask(const at::Tensor& weight, const at::Tensor& act_scale,
                                       double fraction) {
  absl::Status st = CheckInputs(weight, act_scale);
  if (!st.ok()) return st;
  const at::Tensor w = RowMajor(weight);
  const at::Tensor s = act_scale.contiguous();
  const std::vector<int32_t> index =
      SelectSalient(View(w), s.data_ptr<float>(), plan::SalientCount(w.numel(), fraction));
  at::Tensor mask = at::zeros({w.size(0), w.size(1)}, at::kBool);
  bool* m = mask.data_ptr<bool>();
  for (int32_t i : index) m[i] = true;
  return mask;
}

absl::StatusOr<UnitFit> FitUnit(const at::Tensor& weight, const at::Tensor& act_scale,
                                absl::Span<const plan::Action> actions,
                                const QuantizerOptions& options) {
  try {
    absl::Status st = CheckInputs(weight, act_scale);
    if (!st.ok()) return st;
    const at::Tensor w = RowMajor(weight);
    const at::Tensor s = act_scale.contiguous();
    return FitUnitKernel(View(w), s.data_ptr<float>(), actions, options);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("FitUnit: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<at::Tensor> DequantizeUnit(const at::Tensor& weight, const UnitFit& fit,
                                          plan::Action a) {
  absl::StatusOr<const ActionFit*> f = FindFit(weight, fit, a);
  if (!f.ok()) return f.status();
  const at::Tensor w = RowMajor(weight);
  at::Tensor out = at::empty({fit.rows, fit.cols}, at::kFloat);
  DequantizeKernel(View(w), a, (*f)->scales.data(), (*f)->offsets.data(), fit.salient,
                   out.data_ptr<float>(), fit.cols);
  return out;
}

absl::StatusOr<at::Tensor> UnitCodes(const at::Tensor& weight, const UnitFit& fit, plan::Action a) {
  if (a == plan::Action::k16) return absl::InvalidArgumentError("action 16: has no codes");
  absl::StatusOr<const ActionFit*> f = FindFit(weight, fit, a);
  if (!f.ok()) return f.status();
  const at::Tensor w = RowMajor(weight);
  at::Tensor out = at::empty({fit.rows, fit.cols}, at::kChar);
  CodesKernel(View(w), a, (*f)->scales.data(), (*f)->offsets.data(), out.data_ptr<int8_t>());
  return out;
}

}  // namespace windquant::quant
