#include "common/quant/calibration.h"

#include <c10/core/GradMode.h>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::quant {

absl::StatusOr<at::Tensor> SampleCalibrationWindows(const std::vector<int32_t>& ids, int samples,
                                                    int seq_len, uint64_t seed, int64_t bos_id) {
  const int64_t body = seq_len - 1;
  if (samples <= 0 || body <= 0) {
    return absl::InvalidArgumentError("calibration: samples and seq_len-1 must be positive");
  }
  if (static_cast<int64_t>(ids.size()) < body) {
    return absl::InvalidArgumentError(absl::StrCat("calibration: text has ", ids.size(),
                                                   " tokens, fewer than one window of ", body));
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> start(0, static_cast<int64_t>(ids.size()) - body);
  at::Tensor out = at::empty({samples, seq_len}, at::kLong);
  auto acc = out.accessor<int64_t, 2>();
  for (int s = 0; s < samples; ++s) {
    const int64_t begin = start(rng);
    acc[s][0] = bos_id;
    for (int64_t t = 0; t < body; ++t) acc[s][t + 1] = ids[begin + t];
  }
  return out;
}

Calibrator::Calibrator(const model::LlamaModel& model, int64_t first_layer, int64_t end_layer)
    : model_(model),
      first_layer_(first_layer),
      end_layer_(end_layer),
      torch_reductions_(!model.device().is_cpu()) {
  const int64_t n = end_layer - first_layer;
  sum_abs_.resize(n);
  sum_sq_.resize(n);
  tokens_.assign(n, {});
}

absl::StatusOr<at::Tensor> Calibrator::RunStage(const at::Tensor& hidden) {
  if (first_layer_ < model_.first_layer() || end_layer_ > model_.end_layer()) {
    return absl::InvalidArgumentError(absl::StrCat("calibration: layers [", first_layer_, ", ",
                                                   end_layer_, ") are not in this model's stage"));
  }
  model::LinearInputHook hook = [this](int64_t layer, model::Matrix m, const at::Tensor& input) {
    // k and v read q's input, up reads gate's (LlamaModel's hook contract): their
    // statistics are copies, made in Finish.
    if (m == model::Matrix::kK || m == model::Matrix::kV || m == model::Matrix::kUp) return;
    const int64_t i = layer - first_layer_, j = static_cast<int>(m);
    const at::Tensor flat = input.reshape({-1, input.size(-1)});
    const int64_t tokens = flat.size(0), n = flat.size(1);
    tokens_[i][j] += tokens;
    if (!sum_abs_[i][j].defined()) {
      const at::Device where = torch_reductions_ ? flat.device() : at::Device(at::kCPU);
      sum_abs_[i][j] = at::zeros({n}, at::TensorOptions(where).dtype(at::kDouble));
      sum_sq_[i][j] = at::zeros({n}, at::TensorOptions(where).dtype(at::kDouble));
    }
    if (torch_reductions_) {
      const at::Tensor x = flat.to(at::kDouble);  // |x| and x^2 exact in float64
      sum_abs_[i][j].add_(x.abs().sum(0));
      sum_sq_[i][j].add_(x.square().sum(0));
      return;
    }
    const at::Tensor x = flat.to(at::kCPU, at::kFloat).contiguous();
    double* sa = sum_abs_[i][j].data_ptr<double>();
    double* sq = sum_sq_[i][j].data_ptr<double>();
    const float* p = x.data_ptr<float>();
    for (int64_t t = 0; t < tokens; ++t) {
      const float* row = p + t * n;
      for (int64_t c = 0; c < n; ++c) {
        const double v = row[c];
        sa[c] += std::fabs(v);
        sq[c] += v * v;
      }
    }
  };
  try {
    c10::NoGradGuard no_grad;
    at::Tensor out =
        model_.ForwardLayers(hidden.to(model_.device()), first_layer_, end_layer_, &hook);
    // NaN/Inf anywhere inside the layers reaches the residual stream, so one
    // check of the output (a pass over B*T*H values) covers every statistic.
    if (!at::isfinite(out).all().item<bool>()) {
      return absl::InvalidArgumentError(absl::StrCat("calibration: layers [", first_layer_, ", ",
                                                     end_layer_,
                                                     ") produce NaN or Inf activations"));
    }
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("calibration: ", e.what_without_backtrace()));
  }
}

ActivationStats Calibrator::Finish() const {
  ActivationStats stats;
  stats.first_layer = first_layer_;
  stats.layers.resize(end_layer_ - first_layer_);
  // Which accumulator each matrix's statistics come from (shared inputs).
  auto source = [](int j) {
    switch (static_cast<model::Matrix>(j)) {
      case model::Matrix::kK:
      case model::Matrix::kV:
        return static_cast<int>(model::Matrix::kQ);
      case model::Matrix::kUp:
        return static_cast<int>(model::Matrix::kGate);
      default:
        return j;
    }
  };
  for (size_t i = 0; i < stats.layers.size(); ++i) {
    for (int j = 0; j < model::kNumMatrices; ++j) {
      const int k = source(j);
      LinearInputStats& s = stats.layers[i][j];
      s.tokens = tokens_[i][k];
      if (s.tokens == 0) continue;
      s.mean_abs = (sum_abs_[i][k] / static_cast<double>(s.tokens)).to(at::kCPU, at::kFloat);
      s.mean_sq = (sum_sq_[i][k] / static_cast<double>(s.tokens)).to(at::kCPU, at::kFloat);
    }
  }
  return stats;
}

absl::Status RunCalibrationWindows(
    const model::LlamaModel& model, const at::Tensor& windows, int64_t batch,
    absl::string_view what,
    const std::function<absl::Status(const at::Tensor& hidden)>& run_stage) {
  c10::NoGradGuard no_grad;
  for (int64_t b = 0; b < windows.size(0); b += batch) {
    const at::Tensor ids = windows.slice(0, b, std::min(b + batch, windows.size(0)));
    at::Tensor hidden;
    try {
      hidden = model.Embed(ids.to(model.device()));
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
    }
    WQ_RETURN_IF_ERROR(run_stage(hidden));
  }
  return absl::OkStatus();
}

absl::StatusOr<ActivationStats> CalibrateModel(const model::LlamaModel& model,
                                               const at::Tensor& windows, int64_t batch) {
  Calibrator calibrator(model, model.first_layer(), model.end_layer());
  WQ_RETURN_IF_ERROR(RunCalibrationWindows(
      model, windows, batch, "calibration",
      [&](const at::Tensor& hidden) { return calibrator.RunStage(hidden).status(); }));
  return calibrator.Finish();
}

}  // namespace windquant::quant
