#include "common/quant/plan_codes.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/plan/plan.h"
#include "common/plan/unit_table.h"

namespace windquant::quant {

// A matrix's plan on the host, made once per plan and matrix from the fits; only what a
// forward needs reaches the device (Upload).
struct LayerCodes::HostPlan {
  int64_t rows = 0, cols = 0;
  std::vector<Run> runs;
  at::Tensor scales;       // float32 [rows, units]: s of the unit's action (0 at 16 bits)
  at::Tensor steps;        // float32 [rows, units]: what a code is multiplied by
  at::Tensor offsets;      // float32 [rows, units] (see Matrix); undefined without 1 bit
  at::Tensor grid;         // float32 [4, units]: qmin, qmax, 2 bits (floor), 1 bit
  bool any_floor = false;  // a unit at 2 bits
  std::vector<int64_t> salient_index;
  std::vector<float> salient_values;
  std::vector<std::pair<int64_t, int64_t>> half_blocks;
};

namespace {

enum GridRow { kQmin = 0, kQmax, kFloor, kBinary, kGridRows };

// The code range of an action (fit_kernels_vec.inc's grids); {0, 0} at 16 bits.
std::pair<float, float> CodeRange(plan::Action a) {
  switch (a) {
    case plan::Action::k8:
      return {-128.0f, 127.0f};
    case plan::Action::k4:
      return {-8.0f, 7.0f};
    case plan::Action::k3:
      return {-4.0f, 3.0f};
    case plan::Action::k2:
      return {-2.0f, 1.0f};
    case plan::Action::k1_58:
    case plan::Action::k1:
      return {-1.0f, 1.0f};
    case plan::Action::k16:
      break;
  }
  return {0.0f, 0.0f};
}

// The columns of a run as [rows, units, width] (a view: writes reach `t`).
at::Tensor RunView(const at::Tensor& t, int64_t col_begin, int64_t units, int64_t width) {
  return t.slice(1, col_begin, col_begin + units * width).view({t.size(0), units, width});
}

// A per-unit row of `t` ([*, units]) for a run's units as [1, units, 1] (or [rows, units, 1]).
at::Tensor PerUnit(const at::Tensor& t, int64_t unit_begin, int64_t units) {
  if (t.dim() == 1) return t.slice(0, unit_begin, unit_begin + units).view({1, units, 1});
  return t.slice(1, unit_begin, unit_begin + units).unsqueeze(2);
}

// Rows per block when codes are made: the temporaries (a few float32 copies of a block)
// stay ~16 MB each, whatever the matrix.
int64_t BlockRows(int64_t rows, int64_t cols) {
  constexpr int64_t kBlockEntries = int64_t{1} << 22;
  return std::max<int64_t>(1, std::min(rows, kBlockEntries / std::max<int64_t>(cols, 1)));
}

at::Tensor ToDevice(const std::vector<int64_t>& v, at::Device device) {
  return at::tensor(v, at::kLong).to(device);
}

}  // namespace

LayerCodes::HostPlan LayerCodes::PlanOf(const StageFits& fits, const std::vector<int>& actions,
                                        int64_t layer, int m, int64_t rows, int64_t cols) {
  const std::vector<plan::Unit>& units = fits.table().units;
  std::vector<size_t> mine;
  bool binary = false;
  const auto [begin, end] = fits.LayerUnits(layer);
  for (size_t i = begin; i < end; ++i) {
    if (units[i].matrix != m) continue;
    mine.push_back(i);
    binary |= plan::kAllActions[actions[units[i].id]] == plan::Action::k1;
  }
  const int64_t n = static_cast<int64_t>(mine.size());
  HostPlan p;
  p.rows = rows;
  p.cols = cols;
  p.scales = at::zeros({rows, n}, at::kFloat);
  p.steps = at::zeros({rows, n}, at::kFloat);
  if (binary) p.offsets = at::full({rows, n}, -0.0f, at::kFloat);
  p.grid = at::zeros({kGridRows, n}, at::kFloat);
  auto scales = p.scales.accessor<float, 2>();
  auto steps = p.steps.accessor<float, 2>();
  auto grid = p.grid.accessor<float, 2>();
  int64_t next_col = 0;
  for (int64_t k = 0; k < n; ++k) {
    const plan::Unit& u = units[mine[k]];
    TORCH_CHECK(u.col_begin == next_col && u.rows == rows,
                absl::StrCat("plan codes: ", plan::UnitName(u), " does not tile its matrix"));
    next_col += u.cols;
    if (p.runs.empty() || p.runs.back().width != u.cols)
      p.runs.push_back({u.col_begin, k, 0, u.cols});
    ++p.runs.back().units;
    const int a = actions[u.id];
    const plan::Action action = plan::kAllActions[a];
    if (action == plan::Action::k16) {
      if (!p.half_blocks.empty() &&
          p.half_blocks.back().first + p.half_blocks.back().second == u.col_begin) {
        p.half_blocks.back().second += u.cols;
      } else {
        p.half_blocks.push_back({u.col_begin, u.cols});
      }
      continue;
    }
    const auto [qmin, qmax] = CodeRange(action);
    grid[kQmin][k] = qmin;
    grid[kQmax][k] = qmax;
    grid[kFloor][k] = action == plan::Action::k2 ? 1.0f : 0.0f;
    p.any_floor |= action == plan::Action::k2;
    grid[kBinary][k] = action == plan::Action::k1 ? 1.0f : 0.0f;
    const std::vector<float> s = fits.Scales(mine[k], a), beta = fits.Offsets(mine[k], a);
    for (int64_t r = 0; r < rows; ++r) {
      scales[r][k] = s[r];
      steps[r][k] = action == plan::Action::k2 ? s[r] * 0.5f : s[r];  // exact: s is FP16
    }
    if (action == plan::Action::k1) {
      auto offsets = p.offsets.accessor<float, 2>();
      for (int64_t r = 0; r < rows; ++r) offsets[r][k] = beta[r];
    }
    const SalientSet& sal = fits.params(mine[k]).salient;
    for (int64_t e = 0; e < sal.count(); ++e) {
      const int64_t f = sal.index[e];
      p.salient_index.push_back((f / u.cols) * cols + u.col_begin + f % u.cols);
      p.salient_values.push_back(static_cast<float>(sal.codes[e]) * sal.scale);
    }
  }
  TORCH_CHECK(next_col == cols, "plan codes: the units of layer ", layer, " matrix ", m, " cover ",
              next_col, " of ", cols, " columns");
  return p;
}

LayerCodes::Matrix LayerCodes::Upload(const HostPlan& p, const at::Tensor& x, at::Device device) {
  Matrix out;
  out.rows = p.rows;
  out.cols = p.cols;
  out.runs = p.runs;
  out.codes = at::empty({p.rows, p.cols}, at::TensorOptions().dtype(at::kChar).device(device));
  out.steps = p.steps.to(device);
  if (p.offsets.defined()) out.offsets = p.offsets.to(device);
  if (!p.salient_index.empty()) {
    out.salient_index = ToDevice(p.salient_index, device);
    out.salient_values = at::tensor(p.salient_values, at::kFloat).to(device);
  }
  out.half_blocks = p.half_blocks;
  for (const auto& [begin, width] : p.half_blocks) {
    out.halves.push_back(x.slice(1, begin, begin + width).to(at::kHalf).contiguous());
  }
  return out;
}

void LayerCodes::EncodeFromWeights(const HostPlan& p, const at::Tensor& x, Matrix* out) {
  const at::Tensor grid = p.grid.to(x.device());
  // Where s is 0 the kernels take x / 0 (+-inf, or NaN for +-0) to qmax or qmin (their
  // Min / Max, a < b ? a : b, send NaN to qmax) and write code * 0. Dividing by the
  // smallest normal float instead gives a code of the same sign (0 for +-0, which decodes
  // to +0 as qmax does), so the decoded zeros are the kernels', sign included, and the
  // clamp sees no NaN.
  at::Tensor scales = p.scales.to(x.device());
  scales = scales.masked_fill(scales == 0, std::numeric_limits<float>::min());
  const int64_t block = BlockRows(x.size(0), x.size(1));
  for (int64_t r0 = 0; r0 < x.size(0); r0 += block) {
    const int64_t r1 = std::min(x.size(0), r0 + block);
    const at::Tensor xb = x.slice(0, r0, r1).to(at::kFloat), sb = scales.slice(0, r0, r1);
    for (const Run& run : p.runs) {
      const at::Tensor xr = RunView(xb, run.col_begin, run.units, run.width);
      const at::Tensor s = PerUnit(sb, run.unit_begin, run.units);
      const at::Tensor qmin = PerUnit(grid[kQmin], run.unit_begin, run.units);
      const at::Tensor qmax = PerUnit(grid[kQmax], run.unit_begin, run.units);
      const at::Tensor floor = PerUnit(grid[kFloor], run.unit_begin, run.units).ne(0);
      at::Tensor t = xr / s;
      t.clamp_(qmin, qmax);
      at::Tensor q = p.any_floor ? at::where(floor, t.floor() * 2 + 1, t.round()) : t.round();
      if (out->offsets.defined()) {
        const at::Tensor binary = PerUnit(grid[kBinary], run.unit_begin, run.units).ne(0);
        const at::Tensor beta = PerUnit(out->offsets.slice(0, r0, r1), run.unit_begin, run.units);
        q = at::where(binary, (xr >= beta).to(at::kFloat) * 2 - 1, q);
      }
      RunView(out->codes.slice(0, r0, r1), run.col_begin, run.units, run.width).copy_(q);
    }
  }
}

void LayerCodes::EncodeFromValues(const HostPlan& p, const at::Tensor& v, Matrix* out) {
  const at::Tensor scales = p.scales.to(v.device()), grid = p.grid.to(v.device());
  const int64_t block = BlockRows(v.size(0), v.size(1));
  for (int64_t r0 = 0; r0 < v.size(0); r0 += block) {
    const int64_t r1 = std::min(v.size(0), r0 + block);
    const at::Tensor vb = v.slice(0, r0, r1), sb = scales.slice(0, r0, r1);
    for (const Run& run : p.runs) {
      const at::Tensor vr = RunView(vb, run.col_begin, run.units, run.width);
      const at::Tensor s = PerUnit(sb, run.unit_begin, run.units);
      const at::Tensor qmin = PerUnit(grid[kQmin], run.unit_begin, run.units);
      const at::Tensor qmax = PerUnit(grid[kQmax], run.unit_begin, run.units);
      const at::Tensor floor = PerUnit(grid[kFloor], run.unit_begin, run.units);
      // The level whose value is v: round(v / s) (round(v / s - 0.5) at 2 bits); where s
      // is 0 the values are zeros, and the kernels' qmin (x < 0) or qmax gives the sign.
      at::Tensor q = (vr / s - floor * 0.5f).round().clamp(-128, 127);
      q = at::where(s == 0, at::where(vr.signbit(), qmin, qmax), q);
      if (p.any_floor) q = at::where(floor.ne(0), (q * 2 + 1).clamp(-128, 127), q);
      if (out->offsets.defined()) {
        const at::Tensor binary = PerUnit(grid[kBinary], run.unit_begin, run.units).ne(0);
        const at::Tensor beta = PerUnit(out->offsets.slice(0, r0, r1), run.unit_begin, run.units);
        q = at::where(binary, (vr >= beta).to(at::kFloat) * 2 - 1, q);
      }
      RunView(out->codes.slice(0, r0, r1), run.col_begin, run.units, run.width).copy_(q);
    }
  }
}

LayerCodes LayerCodes::FromWeights(const StageFits& fits, const std::vector<int>& actions,
                                   int64_t layer,
                                   const std::array<at::Tensor, model::kNumMatrices>& weights) {
  c10::NoGradGuard no_grad;
  LayerCodes out;
  for (int m = 0; m < model::kNumMatrices; ++m) {
    const at::Tensor x = weights[m].contiguous();  // widened a block of rows at a time
    const HostPlan p = PlanOf(fits, actions, layer, m, x.size(0), x.size(1));
    out.matrices_[m] = Upload(p, x, x.device());
    EncodeFromWeights(p, x, &out.matrices_[m]);
  }
  return out;
}

LayerCodes LayerCodes::FromValues(const StageFits& fits, const std::vector<int>& actions,
                                  int64_t layer,
                                  const std::array<at::Tensor, model::kNumMatrices>& values,
                                  at::Device device, at::ScalarType dtype) {
  c10::NoGradGuard no_grad;
  LayerCodes out;
  for (int m = 0; m < model::kNumMatrices; ++m) {
    const at::Tensor v = values[m].to(device, at::kFloat).contiguous();
    const HostPlan p = PlanOf(fits, actions, layer, m, v.size(0), v.size(1));
    Matrix& mat = out.matrices_[m];
    mat = Upload(p, v, device);
    EncodeFromValues(p, v, &mat);
    if (!at::equal(DecodeMatrix(mat, at::kFloat), v)) {
      mat = Matrix{};
      mat.rows = v.size(0);
      mat.cols = v.size(1);
      mat.dense = v.to(dtype);
    }
  }
  return out;
}

at::Tensor LayerCodes::DecodeMatrix(const Matrix& m, at::ScalarType dtype) {
  if (m.dense.defined()) return m.dense;
  // Widened in one op, then scaled in place: no float32 temporary besides the result.
  at::Tensor w = m.codes.to(at::kFloat);
  for (const Run& run : m.runs) {
    at::Tensor wr = RunView(w, run.col_begin, run.units, run.width);
    wr.mul_(PerUnit(m.steps, run.unit_begin, run.units));
    // A separate op: q * alpha + beta rounds twice, as the kernels (no FMA).
    if (m.offsets.defined()) wr.add_(PerUnit(m.offsets, run.unit_begin, run.units));
  }
  if (m.salient_index.defined()) w.view(-1).index_copy_(0, m.salient_index, m.salient_values);
  for (size_t k = 0; k < m.halves.size(); ++k) {
    const auto& [begin, width] = m.half_blocks[k];
    w.slice(1, begin, begin + width).copy_(m.halves[k]);
  }
  return dtype == at::kFloat ? w : w.to(dtype);
}

std::array<at::Tensor, model::kNumMatrices> LayerCodes::Decode(at::ScalarType dtype) const {
  c10::NoGradGuard no_grad;
  std::array<at::Tensor, model::kNumMatrices> out;
  for (int m = 0; m < model::kNumMatrices; ++m) out[m] = DecodeMatrix(matrices_[m], dtype);
  return out;
}

int64_t LayerCodes::Bytes() const {
  int64_t n = 0;
  for (const Matrix& m : matrices_) {
    std::vector<const at::Tensor*> held = {&m.codes,         &m.steps,          &m.offsets,
                                           &m.salient_index, &m.salient_values, &m.dense};
    for (const at::Tensor& h : m.halves) held.push_back(&h);
    for (const at::Tensor* t : held) {
      if (t->defined()) n += t->numel() * static_cast<int64_t>(t->element_size());
    }
  }
  return n;
}

}  // namespace windquant::quant
