#include "common/quant/hessians.h"

#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/quant/calibration.h"

namespace windquant::quant {

HessianCollector::HessianCollector(const model::LlamaModel& model, int64_t first_layer,
                                   int64_t end_layer)
    : model_(model), first_layer_(first_layer), end_layer_(end_layer) {
  sums_.resize(end_layer - first_layer);
}

absl::StatusOr<at::Tensor> HessianCollector::RunStage(const at::Tensor& hidden) {
  if (first_layer_ < model_.first_layer() || end_layer_ > model_.end_layer()) {
    return absl::InvalidArgumentError(absl::StrCat("hessians: layers [", first_layer_, ", ",
                                                   end_layer_, ") are not in this model's stage"));
  }
  int64_t tokens = 0;
  model::LinearInputHook hook = [&](int64_t layer, model::Matrix m, const at::Tensor& input) {
    // k, v and up read the input of q and gate (LlamaModel's hook contract).
    if (m == model::Matrix::kK || m == model::Matrix::kV || m == model::Matrix::kUp) return;
    // Summed where the activations are (a GPU's float64 GEMM), handed to the host once.
    const at::Tensor x = input.reshape({-1, input.size(-1)}).to(at::kDouble).contiguous();
    at::Tensor& sum = sums_[layer - first_layer_][static_cast<int>(InputKindOf(m))];
    if (!sum.defined()) sum = at::zeros({x.size(1), x.size(1)}, x.options());
    sum.addmm_(x.t(), x);
    tokens = x.size(0);
  };
  try {
    c10::NoGradGuard no_grad;
    at::Tensor out =
        model_.ForwardLayers(hidden.to(model_.device()), first_layer_, end_layer_, &hook);
    tokens_ += tokens;
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("hessians: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<StageHessians> HessianCollector::Finish() const {
  if (tokens_ == 0) return absl::FailedPreconditionError("hessians: no calibration tokens seen");
  StageHessians h;
  h.first_layer = first_layer_;
  h.tokens = tokens_;
  h.layers.resize(sums_.size());
  for (size_t l = 0; l < sums_.size(); ++l) {
    for (int k = 0; k < kNumInputKinds; ++k) {
      if (!sums_[l][k].defined()) continue;
      h.layers[l][k] =
          (sums_[l][k] * (2.0 / static_cast<double>(tokens_))).to(at::kCPU, at::kFloat);
    }
  }
  return h;
}

absl::StatusOr<StageHessians> HessianCollector::TakeWidened(bool on_device) {
  if (tokens_ == 0) return absl::FailedPreconditionError("hessians: no calibration tokens seen");
  StageHessians h;
  h.first_layer = first_layer_;
  h.tokens = tokens_;
  h.layers = std::move(sums_);
  sums_.assign(h.layers.size(), {});
  const double scale = 2.0 / static_cast<double>(tokens_);
  for (auto& layer : h.layers) {
    for (at::Tensor& t : layer) {
      if (!t.defined()) continue;
      if (!t.device().is_cpu() && on_device) {
        // The same two roundings as below, with device ops (no host sync).
        try {
          t.mul_(scale);
          t.copy_(t.to(at::kFloat));
        } catch (const c10::Error& e) {
          return absl::InternalError(absl::StrCat("hessians: ", e.what_without_backtrace()));
        }
        continue;
      }
      if (!t.device().is_cpu()) t = t.to(at::kCPU);  // the device's memory freed as it goes
      // (sum * scale).to(kFloat), widened back: the same two roundings, in place.
      double* p = t.data_ptr<double>();
      at::parallel_for(0, t.numel(), 1 << 16, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          p[i] = static_cast<double>(static_cast<float>(p[i] * scale));
      });
    }
  }
  tokens_ = 0;
  return h;
}

absl::StatusOr<StageHessians> CollectModelHessians(const model::LlamaModel& model,
                                                   const at::Tensor& windows, int64_t batch) {
  HessianCollector collector(model, model.first_layer(), model.end_layer());
  WQ_RETURN_IF_ERROR(RunCalibrationWindows(
      model, windows, batch, "hessians",
      [&](const at::Tensor& hidden) { return collector.RunStage(hidden).status(); }));
  return collector.Finish();
}

}  // namespace windquant::quant
