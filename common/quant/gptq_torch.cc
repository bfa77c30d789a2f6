#include "common/quant/gptq_torch.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstdint>
#include <vector>

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

}  // namespace

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
