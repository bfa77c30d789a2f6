// Built with -ffp-contract=off (CMakeLists.txt): `w - e * u` must stay a rounded product
// then a rounded difference, as in the one-column-at-a-time definition and its test.
#include "common/quant/gptq.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/quant/fit_kernels.h"
#include "common/quant/gptq_kernels.h"
#include "common/quant/gptq_torch.h"
#include "common/quant/hessians.h"

namespace windquant::quant {
namespace {

// The lane operations of fit_kernels_vec.inc on one float (same IEEE operations).
float RoundEven(float x) {
  const float magic = 12582912.0f;  // 1.5 * 2^23
  const float r = (x + magic) - magic;
  uint32_t rb, xb;
  std::memcpy(&rb, &r, 4);
  std::memcpy(&xb, &x, 4);
  rb |= xb & 0x80000000u;
  float out;
  std::memcpy(&out, &rb, 4);
  return out;
}
float Floor(float x) {
  const float r = RoundEven(x);
  return r > x ? r - 1.0f : r;
}
float GridValue(float x, float s, float qmin, float qmax, bool half) {
  float q = x / s;
  q = q < qmax ? q : qmax;
  q = q > qmin ? q : qmin;
  return half ? (Floor(q) + 0.5f) * s : RoundEven(q) * s;
}

const char* KindName(int k) {
  static const char* kNames[kNumInputKinds] = {"q/k/v input", "o input", "gate/up input",
                                               "down input"};
  return kNames[k];
}

// Where each row's salient entries of one unit start in its (row-major, ascending)
// salient index list. A unit at 16 bits has none: its FP16 values are stored whole
// (no INT8 entries are counted for it, and DequantizeKernel writes none).
void RowStarts(const ColumnUnit& cu, int64_t r0, int64_t r1, std::vector<int64_t>* begin,
               std::vector<int64_t>* end) {
  const std::vector<int32_t>& idx = cu.salient->index;
  for (int64_t r = r0; r < r1; ++r) {
    if (cu.action == plan::Action::k16) {
      (*begin)[r - r0] = (*end)[r - r0] = 0;
      continue;
    }
    (*begin)[r - r0] = std::lower_bound(idx.begin(), idx.end(), r * cu.cols) - idx.begin();
    (*end)[r - r0] = std::lower_bound(idx.begin(), idx.end(), (r + 1) * cu.cols) - idx.begin();
  }
}

// Rows [r0, r1) of the linear (see CompensateLinear). Within a block every row
// quantizes column j and carries its error into the block's later columns; the block's
// errors then go into the columns after it in one register-blocked pass (`trailing`).
// Per entry the terms arrive in column order either way.
void CompensateRows(const std::vector<ColumnUnit>& units, const std::vector<int32_t>& unit_of,
                    const PackedUpper& U, int64_t in, float* W, float* F, int64_t r0, int64_t r1,
                    int64_t block, TrailingUpdateFn trailing) {
  const int64_t R = r1 - r0;
  std::vector<float> err(R * block);
  std::vector<int64_t> cur(R), end(R);
  std::vector<const float*> urow(block);
  for (int64_t b0 = 0; b0 < in; b0 += block) {
    const int64_t b1 = std::min(b0 + block, in);
    for (int64_t j = b0; j < b1; ++j) {
      const ColumnUnit& cu = units[unit_of[j]];
      if (j == cu.col_begin) RowStarts(cu, r0, r1, &cur, &end);
      const float* uj = U.RowBase(j);
      const float d = uj[j];
      const int64_t jc = j - cu.col_begin;
      for (int64_t r = r0; r < r1; ++r) {
        float* wr = W + r * in;
        const float x = wr[j];
        if (F != nullptr) F[r * in + j] = x;
        float q;
        const int64_t g = r - r0;
        if (cur[g] < end[g] && cu.salient->index[cur[g]] == r * cu.cols + jc) {
          q = static_cast<float>(cu.salient->codes[cur[g]]) * cu.salient->scale;
          ++cur[g];
        } else {
          q = QuantizeEntry(cu.action, x, cu.scales ? cu.scales[r] : 0.0f,
                            cu.offsets ? cu.offsets[r] : 0.0f);
        }
        wr[j] = q;
        const float e = (x - q) / d;
        err[g * block + (j - b0)] = e;
        for (int64_t k = j + 1; k < b1; ++k) wr[k] = wr[k] - e * uj[k];
      }
    }
    if (b1 == in) break;
    for (int64_t j = b0; j < b1; ++j) urow[j - b0] = U.RowBase(j) + b1;
    trailing(err.data(), block, urow.data(), b1 - b0, W + r0 * in + b1, in, R, in - b1);
  }
}

absl::StatusOr<at::Tensor> FactorOf(at::Tensor h, double damp_fraction, const std::string& what);

}  // namespace

InputKind InputKindOf(model::Matrix m) {
  switch (m) {
    case model::Matrix::kQ:
    case model::Matrix::kK:
    case model::Matrix::kV:
      return InputKind::kQkv;
    case model::Matrix::kO:
      return InputKind::kO;
    case model::Matrix::kGate:
    case model::Matrix::kUp:
      return InputKind::kGateUp;
    default:
      return InputKind::kDown;
  }
}

float QuantizeEntry(plan::Action a, float x, float scale, float offset) {
  switch (a) {
    case plan::Action::k16:
      return RoundToHalf(x);
    case plan::Action::k8:
      return GridValue(x, scale, -128.0f, 127.0f, false);
    case plan::Action::k4:
      return GridValue(x, scale, -8.0f, 7.0f, false);
    case plan::Action::k3:
      return GridValue(x, scale, -4.0f, 3.0f, false);
    case plan::Action::k2:
      return GridValue(x, scale, -2.0f, 1.0f, true);
    case plan::Action::k1_58:
      return GridValue(x, scale, -1.0f, 1.0f, false);
    case plan::Action::k1:
      return (x >= offset ? 1.0f : -1.0f) * scale + offset;
  }
  return x;
}

PackedUpper PackedUpper::Pack(const at::Tensor& u) {
  PackedUpper p;
  p.n_ = u.size(0);
  p.data_ = at::empty({p.n_ * (p.n_ + 1) / 2}, at::kFloat);
  if (u.scalar_type() == at::kDouble && !u.is_contiguous() && u.mT().is_contiguous()) {
    // Column-major float64 (FactorOf): column k holds U[j][k], j <= k. No [n, n] copy.
    const int64_t n = p.n_;
    const double* src = u.mT().data_ptr<double>();
    float* dst = p.data_.data_ptr<float>();
    at::parallel_for(0, n, 64, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        const double* col = src + k * n;
        for (int64_t j = 0; j <= k; ++j)
          dst[j * (2 * n - 1 - j) / 2 + k] = static_cast<float>(col[j]);
      }
    });
    return p;
  }
  const at::Tensor d = u.to(at::kFloat).contiguous();
  const float* src = d.data_ptr<float>();
  float* dst = p.data_.data_ptr<float>();
  for (int64_t j = 0; j < p.n_; ++j) {
    std::memcpy(dst, src + j * p.n_ + j, (p.n_ - j) * sizeof(float));
    dst += p.n_ - j;
  }
  return p;
}

absl::StatusOr<PackedUpper> PackedUpper::FromData(at::Tensor data) {
  const int64_t len = data.numel();
  const auto n =
      static_cast<int64_t>((std::sqrt(8.0 * static_cast<double>(len) + 1.0) - 1.0) / 2.0);
  if (data.dim() != 1 || data.scalar_type() != at::kFloat || n * (n + 1) / 2 != len) {
    return absl::InvalidArgumentError(
        absl::StrCat("packed factor: ", len, " floats are not the packed rows of a square"));
  }
  PackedUpper p;
  p.n_ = n;
  p.data_ = data.contiguous();
  return p;
}

at::Tensor PackedUpper::Dense() const {
  at::Tensor out = at::zeros({n_, n_}, at::kFloat);
  float* dst = out.data_ptr<float>();
  for (int64_t j = 0; j < n_; ++j) {
    std::memcpy(dst + j * n_ + j, RowBase(j) + j, (n_ - j) * sizeof(float));
  }
  return out;
}

void CompensateLinear(const std::vector<ColumnUnit>& units, const at::Tensor& u, at::Tensor* w,
                      at::Tensor* quantized_from, const GptqOptions& o) {
  CompensateLinear(units, PackedUpper::Pack(u), w, quantized_from, o);
}

void CompensateLinear(const std::vector<ColumnUnit>& units, const PackedUpper& u, at::Tensor* w,
                      at::Tensor* quantized_from, const GptqOptions& o) {
  const int64_t rows = w->size(0), in = w->size(1);
  std::vector<int32_t> unit_of(in, 0);
  for (size_t i = 0; i < units.size(); ++i) {
    for (int64_t j = units[i].col_begin; j < units[i].col_begin + units[i].cols; ++j) {
      unit_of[j] = static_cast<int32_t>(i);
    }
  }
  const TrailingUpdateFn trailing = o.trailing != nullptr ? o.trailing : TrailingUpdateForCpu();
  float* W = w->data_ptr<float>();
  float* F = quantized_from != nullptr ? quantized_from->data_ptr<float>() : nullptr;
  const int64_t group = std::max<int64_t>(o.row_group, 1);
  const int64_t block = std::max<int64_t>(o.block_columns, 1);
  const int64_t groups = (rows + group - 1) / group;
  at::parallel_for(0, groups, 1, [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g) {
      CompensateRows(units, unit_of, u, in, W, F, g * group, std::min(rows, (g + 1) * group), block,
                     trailing);
    }
  });
}

std::string FactorSpillDir(const std::string& cache_dir) {
  if (!cache_dir.empty()) return cache_dir;
  std::error_code ec;
  const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  return ec ? std::string("/tmp") : tmp.string();
}

absl::StatusOr<at::Tensor> InverseHessianFactor(const at::Tensor& h, double damp_fraction,
                                                const std::string& what) {
  WQ_ASSIGN_OR_RETURN(const at::Tensor u, FactorOf(h, damp_fraction, what));
  return u.to(at::kFloat).contiguous();
}

namespace {

// The factor as a float64 [in, in] column-major tensor (zeros below the diagonal).
// Computed in place, in one float64 [in, in] buffer (8 bytes * in^2): the Hessian
// itself when it is a float64 tensor this is the only handle to (HessianCollector::
// TakeWidened), else a float64 copy (the caller's handle released once the copy exists).
// H is symmetric, so its row-major buffer read column-major is H again, and ATen's
// out= forms run on it in place: the same LAPACK calls on the same values as
// linalg_cholesky_ex -> cholesky_inverse -> linalg_cholesky_ex(upper) with their copies
// (gptq_test compares the two bit for bit).
absl::StatusOr<at::Tensor> FactorOf(at::Tensor h, double damp_fraction, const std::string& what) {
  if (!h.defined() || h.dim() != 2 || h.size(0) != h.size(1) || h.size(0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": Hessian missing or not square"));
  }
  try {
    const bool own = h.scalar_type() == at::kDouble && h.is_contiguous() && h.use_count() == 1 &&
                     h.storage().use_count() == 1;
    at::Tensor H = own ? std::move(h) : h.to(at::kDouble, /*non_blocking=*/false, /*copy=*/true);
    h = at::Tensor();
    if (!at::isfinite(H).all().item<bool>()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": Hessian not finite"));
    }
    // LAPACK reads the lower triangle of the row-major H; read column-major below, that
    // triangle must be mirrored into the upper one (a product X^T X need not be exactly
    // symmetric).
    const int64_t n = H.size(0);
    double* hp = H.data_ptr<double>();
    at::parallel_for(0, n, 64, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        for (int64_t j = 0; j < i; ++j) hp[j * n + i] = hp[i * n + j];
      }
    });
    // An input that is always 0 (dead channel) has no curvature: treated as GPTQ does
    // (diagonal 1), its weights then only receive error, never pass it on.
    at::Tensor diag = H.diagonal();
    diag.masked_fill_(diag == 0, 1.0);
    const double damp = damp_fraction * diag.mean().item<double>();
    diag.add_(damp);
    diag = at::Tensor();
    at::Tensor a = H.mT();  // column-major: ATen's LAPACK layout, so no copies
    H = at::Tensor();
    at::Tensor info = at::empty({0}, at::kInt);
    at::linalg_cholesky_ex_out(a, info, a, /*upper=*/false);
    if (info.item<int64_t>() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": Hessian not positive definite after dampening"));
    }
    at::cholesky_inverse_out(a, a, /*upper=*/false);
    at::linalg_cholesky_ex_out(a, info, a, /*upper=*/true);
    if (info.item<int64_t>() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": inverse Hessian not positive definite"));
    }
    return a;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
  }
}

}  // namespace

absl::Status GptqFactors::Keep(LayerFactors layer) {
  Entry e;
  // Factors made on a device (gptq_torch.h) stay in its memory, where compensation
  // reads them: a scratch file would be the host round trip they avoid.
  bool on_device = false;
  for (const PackedUpper& p : layer.kinds) {
    on_device = on_device || (p.data().defined() && !p.data().device().is_cpu());
  }
  if (options_.spill_dir.empty() || on_device) {
    e.memory = std::move(layer);
    factors_.push_back(std::move(e));
    return absl::OkStatus();
  }
  if (factors_.empty() || factors_.back().file == nullptr) {
    absl::StatusOr<std::unique_ptr<base::ScratchFile>> file =
        base::ScratchFile::Create(options_.spill_dir);
    if (!file.ok()) return file.status();
    e.file = *std::move(file);
  } else {
    e.file = factors_.back().file;
  }
  for (int k = 0; k < kNumInputKinds; ++k) {
    const PackedUpper& p = layer.kinds[k];
    absl::StatusOr<int64_t> at = e.file->Append(p.data().data_ptr<float>(), p.Bytes());
    if (!at.ok()) return at.status();
    if (k == 0) e.offset = *at;
    e.n[k] = p.n();
  }
  factors_.push_back(std::move(e));
  return absl::OkStatus();
}

absl::StatusOr<LayerFactors> GptqFactors::Layer(int64_t layer) const {
  if (layer < first_layer() || layer >= end_layer()) {
    return absl::OutOfRangeError(absl::StrCat("gptq factors: layer ", layer, " not in [",
                                              first_layer(), ", ", end_layer(), ")"));
  }
  const Entry& e = factors_[layer - first_layer_];
  if (e.file == nullptr) return e.memory;
  LayerFactors out;
  int64_t offset = e.offset;
  for (int k = 0; k < kNumInputKinds; ++k) {
    const int64_t count = e.n[k] * (e.n[k] + 1) / 2;
    at::Tensor data = at::empty({count}, at::kFloat);
    absl::Status read = e.file->Read(offset, count * 4, data.data_ptr<float>());
    if (!read.ok()) {
      return absl::InternalError(
          absl::StrCat("gptq factors of layer ", layer, ": ", read.message()));
    }
    offset += count * 4;
    absl::StatusOr<PackedUpper> p = PackedUpper::FromData(std::move(data));
    if (!p.ok()) return p.status();
    out.kinds[k] = *std::move(p);
  }
  return out;
}

absl::StatusOr<GptqFactors> GptqFactors::Create(StageHessians hessians,
                                                const GptqOptions& options) {
  GptqFactors f;
  f.first_layer_ = hessians.first_layer;
  f.options_ = options;
  // Factors made with torch ops (a Hessian off the CPU, or options.torch_ops): their
  // outcomes stay on the device until one check at the end.
  std::vector<at::Tensor> failures;
  std::vector<std::string> failure_what;
  for (size_t l = 0; l < hessians.layers.size(); ++l) {
    LayerFactors layer;
    for (int k = 0; k < kNumInputKinds; ++k) {
      const std::string what =
          absl::StrCat("layer ", hessians.first_layer + static_cast<int64_t>(l), " ", KindName(k));
      at::Tensor& h = hessians.layers[l][k];
      if (options.torch_ops || (h.defined() && !h.device().is_cpu())) {
        absl::StatusOr<TorchFactor> t =
            InverseHessianFactorTorch(std::move(h), options.damp_fraction, what);
        if (!t.ok()) return t.status();
        layer.kinds[k] = std::move(t->u);
        failures.push_back(std::move(t->failure));
        failure_what.push_back(what);
        continue;
      }
      absl::StatusOr<at::Tensor> u = FactorOf(std::move(h), options.damp_fraction, what);
      if (!u.ok()) return u.status();
      layer.kinds[k] = PackedUpper::Pack(*u);
    }
    WQ_RETURN_IF_ERROR(f.Keep(std::move(layer)));
  }
  WQ_RETURN_IF_ERROR(CheckTorchFactors(failures, failure_what));
  return f;
}

absl::StatusOr<GptqFactors> GptqFactors::FromInputs(const model::LlamaModel& model,
                                                    int64_t first_layer, int64_t end_layer,
                                                    std::vector<at::Tensor> inputs,
                                                    const GptqOptions& options) {
  GptqFactors f;
  f.first_layer_ = first_layer;
  f.options_ = options;
  GptqOptions in_memory = options;
  in_memory.spill_dir.clear();
  for (int64_t layer = first_layer; layer < end_layer; ++layer) {
    absl::StatusOr<StageHessians> h;
    {
      HessianCollector collector(model, layer, layer + 1);
      for (at::Tensor& x : inputs) {
        absl::StatusOr<at::Tensor> out = collector.RunStage(x);
        if (!out.ok()) return out.status();
        x = *std::move(out);
      }
      // On a device the Hessians stay there and are factored there (gptq_torch.h).
      h = collector.TakeWidened(/*on_device=*/!model.device().is_cpu());
    }
    if (!h.ok()) return h.status();
    absl::StatusOr<GptqFactors> one = Create(*std::move(h), in_memory);
    if (!one.ok()) return one.status();
    WQ_RETURN_IF_ERROR(f.Keep(std::move(one->factors_[0].memory)));
  }
  return f;
}

absl::StatusOr<GptqFactors> GptqFactors::Concat(
    const std::vector<std::shared_ptr<const GptqFactors>>& parts) {
  GptqFactors f;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("factors: stage ", i, " has none"));
    }
    if (i == 0) {
      f.first_layer_ = parts[i]->first_layer();
      f.options_ = parts[i]->options();
    } else if (parts[i]->first_layer() != f.end_layer()) {
      return absl::InvalidArgumentError(absl::StrCat("factors: stage ", i, " starts at layer ",
                                                     parts[i]->first_layer(), ", not ",
                                                     f.end_layer()));
    }
    f.factors_.insert(f.factors_.end(), parts[i]->factors_.begin(), parts[i]->factors_.end());
  }
  return f;
}

int64_t GptqFactors::Bytes() const {
  int64_t n = 0;
  for (const Entry& e : factors_) {
    for (int k = 0; k < kNumInputKinds; ++k) {
      n += e.file != nullptr ? e.n[k] * (e.n[k] + 1) / 2 * 4 : e.memory.kinds[k].Bytes();
    }
  }
  return n;
}

int64_t GptqFactors::ResidentBytes() const {
  int64_t n = 0;
  for (const Entry& e : factors_) {
    for (const PackedUpper& p : e.memory.kinds) n += p.Bytes();
  }
  return n;
}

}  // namespace windquant::quant
