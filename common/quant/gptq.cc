// Built with -ffp-contract=off (CMakeLists.txt): `w - e * u` must stay a rounded product
// then a rounded difference, as in the one-column-at-a-time definition and its test.
#include "common/quant/gptq.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/quant/fit_kernels.h"

namespace windquant::quant {
namespace {

constexpr int64_t kTile = 64;  // columns of the trailing update held in registers

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
// salient index list.
void RowStarts(const ColumnUnit& cu, int64_t r0, int64_t r1, std::vector<int64_t>* begin,
               std::vector<int64_t>* end) {
  const std::vector<int32_t>& idx = cu.salient->index;
  for (int64_t r = r0; r < r1; ++r) {
    (*begin)[r - r0] = std::lower_bound(idx.begin(), idx.end(), r * cu.cols) - idx.begin();
    (*end)[r - r0] = std::lower_bound(idx.begin(), idx.end(), (r + 1) * cu.cols) - idx.begin();
  }
}

// Rows [r0, r1) of the linear (see CompensateLinear).
void CompensateRows(const std::vector<ColumnUnit>& units, const std::vector<int32_t>& unit_of,
                    const float* U, int64_t in, float* W, float* F, int64_t r0, int64_t r1,
                    int64_t block) {
  const int64_t R = r1 - r0;
  std::vector<float> err(R * block);
  std::vector<int64_t> cur(R), end(R);
  for (int64_t b0 = 0; b0 < in; b0 += block) {
    const int64_t b1 = std::min(b0 + block, in);
    for (int64_t j = b0; j < b1; ++j) {
      const ColumnUnit& cu = units[unit_of[j]];
      if (j == cu.col_begin) RowStarts(cu, r0, r1, &cur, &end);
      const float* uj = U + j * in;
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
    // The block's errors into the later columns, in column order per entry.
    for (int64_t r = r0; r < r1; ++r) {
      float* wr = W + r * in;
      const float* er = err.data() + (r - r0) * block;
      for (int64_t k0 = b1; k0 < in; k0 += kTile) {
        const int64_t n = std::min(kTile, in - k0);
        float acc[kTile];
        std::memcpy(acc, wr + k0, n * sizeof(float));
        for (int64_t j = b0; j < b1; ++j) {
          const float e = er[j - b0];
          const float* uj = U + j * in + k0;
          if (n == kTile) {
            for (int64_t t = 0; t < kTile; ++t) acc[t] = acc[t] - e * uj[t];
          } else {
            for (int64_t t = 0; t < n; ++t) acc[t] = acc[t] - e * uj[t];
          }
        }
        std::memcpy(wr + k0, acc, n * sizeof(float));
      }
    }
  }
}

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

float QuantizeEntry(Action a, float x, float scale, float offset) {
  switch (a) {
    case Action::k16:
      return RoundToHalf(x);
    case Action::k8:
      return GridValue(x, scale, -128.0f, 127.0f, false);
    case Action::k4:
      return GridValue(x, scale, -8.0f, 7.0f, false);
    case Action::k3:
      return GridValue(x, scale, -4.0f, 3.0f, false);
    case Action::k2:
      return GridValue(x, scale, -2.0f, 1.0f, true);
    case Action::k1_58:
      return GridValue(x, scale, -1.0f, 1.0f, false);
    case Action::k1:
      return (x >= offset ? 1.0f : -1.0f) * scale + offset;
  }
  return x;
}

void CompensateLinear(const std::vector<ColumnUnit>& units, const at::Tensor& u, at::Tensor* w,
                      at::Tensor* quantized_from, const GptqOptions& o) {
  const int64_t rows = w->size(0), in = w->size(1);
  std::vector<int32_t> unit_of(in, 0);
  for (size_t i = 0; i < units.size(); ++i) {
    for (int64_t j = units[i].col_begin; j < units[i].col_begin + units[i].cols; ++j) {
      unit_of[j] = static_cast<int32_t>(i);
    }
  }
  const float* U = u.data_ptr<float>();
  float* W = w->data_ptr<float>();
  float* F = quantized_from != nullptr ? quantized_from->data_ptr<float>() : nullptr;
  const int64_t group = std::max<int64_t>(o.row_group, 1);
  const int64_t block = std::max<int64_t>(o.block_columns, 1);
  const int64_t groups = (rows + group - 1) / group;
  at::parallel_for(0, groups, 1, [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g) {
      CompensateRows(units, unit_of, U, in, W, F, g * group, std::min(rows, (g + 1) * group),
                     block);
    }
  });
}

absl::StatusOr<at::Tensor> InverseHessianFactor(const at::Tensor& h, double damp_fraction,
                                                const std::string& what) {
  if (!h.defined() || h.dim() != 2 || h.size(0) != h.size(1) || h.size(0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": Hessian missing or not square"));
  }
  try {
    at::Tensor H = h.to(at::kDouble).clone();
    if (!at::isfinite(H).all().item<bool>()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": Hessian not finite"));
    }
    // An input that is always 0 (dead channel) has no curvature: treated as GPTQ does
    // (diagonal 1), its weights then only receive error, never pass it on.
    at::Tensor diag = H.diagonal();
    diag.masked_fill_(diag == 0, 1.0);
    const double damp = damp_fraction * diag.mean().item<double>();
    diag.add_(damp);
    auto [lower, info] = at::linalg_cholesky_ex(H);
    if (info.item<int64_t>() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": Hessian not positive definite after dampening"));
    }
    const at::Tensor inverse = at::cholesky_inverse(lower);
    auto [upper, info2] = at::linalg_cholesky_ex(inverse, /*upper=*/true);
    if (info2.item<int64_t>() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": inverse Hessian not positive definite"));
    }
    return upper.to(at::kFloat).contiguous();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
  }
}

absl::StatusOr<GptqFactors> GptqFactors::Create(const StageHessians& hessians,
                                                const GptqOptions& options) {
  GptqFactors f;
  f.first_layer_ = hessians.first_layer;
  f.options_ = options;
  f.factors_.resize(hessians.layers.size());
  for (size_t l = 0; l < hessians.layers.size(); ++l) {
    for (int k = 0; k < kNumInputKinds; ++k) {
      const std::string what =
          absl::StrCat("layer ", hessians.first_layer + static_cast<int64_t>(l), " ", KindName(k));
      absl::StatusOr<at::Tensor> u =
          InverseHessianFactor(hessians.layers[l][k], options.damp_fraction, what);
      if (!u.ok()) return u.status();
      f.factors_[l][k] = *std::move(u);
    }
  }
  return f;
}

int64_t GptqFactors::Bytes() const {
  int64_t n = 0;
  for (const auto& layer : factors_) {
    for (const at::Tensor& t : layer) n += t.defined() ? t.numel() * 4 : 0;
  }
  return n;
}

}  // namespace windquant::quant
