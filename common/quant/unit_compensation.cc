#include "common/quant/unit_compensation.h"

#include <ATen/Parallel.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/plan/action.h"

namespace windquant::quant {
namespace {

// tr(A H A^T) in float64 for A [rows, c] float32 and H [c, c] float64.
double HessianNorm(const at::Tensor& a, const at::Tensor& h) {
  const at::Tensor ad = a.to(at::kDouble);
  return (ad.mm(h) * ad).sum().item<double>();
}

}  // namespace

at::Tensor DampedUnitBlock(const at::Tensor& h, int64_t col_begin, int64_t cols,
                           double damp_fraction) {
  at::Tensor diag_all = h.diagonal().to(at::kDouble).clone();
  diag_all.masked_fill_(diag_all == 0, 1.0);
  const double damp = damp_fraction * diag_all.mean().item<double>();
  at::Tensor block = h.slice(0, col_begin, col_begin + cols)
                         .slice(1, col_begin, col_begin + cols)
                         .to(at::kDouble)
                         .clone();
  at::Tensor diag = block.diagonal();
  diag.masked_fill_(diag == 0, 1.0);
  diag.add_(damp);
  return block;
}

absl::StatusOr<double> CompensatedUnitError(const at::Tensor& w, const at::Tensor& block,
                                            const ColumnUnit& unit, const std::string& what) {
  const int64_t cols = w.size(1);
  // The block is dampened already: the factor adds nothing (damp_fraction 0, no zero
  // diagonal left).
  WQ_ASSIGN_OR_RETURN(const at::Tensor factor, InverseHessianFactor(block, 0.0, what));
  at::Tensor q = w.to(at::kFloat).contiguous().clone();
  ColumnUnit cu = unit;
  cu.col_begin = 0;
  cu.cols = cols;
  CompensateLinear({cu}, factor, &q, nullptr);
  const at::Tensor d = w.to(at::kFloat) - q;
  const double den = HessianNorm(w, block);
  return den > 0 ? HessianNorm(d, block) / den : 0.0;
}

namespace {

// The compensated errors of units [begin, end) of one linear (all in `w` [rows, in]).
absl::Status LinearErrors(const StageFits& fits, size_t begin, size_t end, const at::Tensor& w,
                          const at::Tensor& h, double damp_fraction, const std::string& name,
                          std::vector<plan::Unit>* units) {
  std::vector<absl::Status> status(end - begin);
  at::parallel_for(
      static_cast<int64_t>(begin), static_cast<int64_t>(end), 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          plan::Unit& u = (*units)[i];
          const at::Tensor cols = w.slice(1, u.col_begin, u.col_begin + u.cols);
          const at::Tensor block = DampedUnitBlock(h, u.col_begin, u.cols, damp_fraction);
          const SalientSet& salient = fits.params(i).salient;
          const std::string what = absl::StrCat(name, " unit ", u.chunk);
          for (int a = 0; a < plan::kNumActions; ++a) {
            const std::vector<float> scales = fits.Scales(i, a);
            const std::vector<float> offsets = fits.Offsets(i, a);
            ColumnUnit cu{0,
                          u.cols,
                          plan::kAllActions[a],
                          scales.empty() ? nullptr : scales.data(),
                          offsets.empty() ? nullptr : offsets.data(),
                          &salient};
            absl::StatusOr<double> err = CompensatedUnitError(cols, block, cu, what);
            if (!err.ok()) {
              status[i - begin] = err.status();
              break;
            }
            u.error[a] = *err;
          }
        }
      });
  for (const absl::Status& st : status) WQ_RETURN_IF_ERROR(st);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StageFits> WithCompensatedUnitErrors(const StageFits& fits,
                                                    const model::LlamaWeights& weights,
                                                    const StageHessians& hessians,
                                                    double damp_fraction) {
  plan::UnitTable table = fits.table();
  const int64_t first = table.first_layer, end = table.end_layer;
  if (weights.first_layer > first ||
      weights.first_layer + static_cast<int64_t>(weights.layers.size()) < end ||
      hessians.first_layer > first ||
      hessians.first_layer + static_cast<int64_t>(hessians.layers.size()) < end) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights or Hessians do not cover layers [", first, ", ", end, ")"));
  }
  try {
    size_t i = 0;
    while (i < table.units.size()) {
      const plan::Unit& u0 = table.units[i];
      size_t j = i;
      while (j < table.units.size() && table.units[j].layer == u0.layer &&
             table.units[j].matrix == u0.matrix) {
        ++j;
      }
      const auto m = static_cast<model::Matrix>(u0.matrix);
      const std::string name = model::LinearTensorName(u0.layer, m);
      const at::Tensor& h =
          hessians.layers[u0.layer - hessians.first_layer][static_cast<int>(InputKindOf(m))];
      const at::Tensor& stored = weights.layers[u0.layer - weights.first_layer].linear[u0.matrix];
      if (!h.defined() || !stored.defined() || h.dim() != 2 || h.size(0) != stored.size(1)) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": calibration Hessian missing or of another width"));
      }
      const at::Tensor w = stored.to(at::kCPU, at::kFloat).contiguous();
      WQ_RETURN_IF_ERROR(
          LinearErrors(fits, i, j, w, h.to(at::kCPU), damp_fraction, name, &table.units));
      i = j;
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("compensated unit errors: ", e.what_without_backtrace()));
  }
  std::vector<StageFits::UnitParams> params;
  params.reserve(table.units.size());
  for (size_t i = 0; i < table.units.size(); ++i) params.push_back(fits.params(i));
  return StageFits::Create(std::move(table), std::move(params));
}

}  // namespace windquant::quant
