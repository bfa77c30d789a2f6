#include "common/quant/quantized_stage.h"

#include <c10/core/GradMode.h>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/quant/fit_kernels.h"

namespace windquant::quant {

absl::StatusOr<std::shared_ptr<const PlanLinears>> PlanLinears::Create(
    std::shared_ptr<const StageFits> fits, std::shared_ptr<const std::vector<int>> actions,
    at::ScalarType dtype) {
  if (fits == nullptr || actions == nullptr) {
    return absl::InvalidArgumentError("plan: no fits or no actions");
  }
  WQ_RETURN_IF_ERROR(fits->CheckPlan(*actions));
  return std::shared_ptr<const PlanLinears>(
      new PlanLinears(std::move(fits), std::move(actions), dtype));
}

PlanLinears::PlanLinears(std::shared_ptr<const StageFits> fits,
                         std::shared_ptr<const std::vector<int>> actions, at::ScalarType dtype)
    : fits_(std::move(fits)), actions_(std::move(actions)), dtype_(dtype) {
  if (fits_->compensation() != nullptr) {
    codes_.reset(new LayerCodes[fits_->end_layer() - fits_->first_layer()]);
  }
}

// The level of value v of a unit's action in row r (the inverse of QuantizeEntry for a
// value it produced; Decode checks that it gives v back).
namespace {
int8_t Level(plan::Action a, float v, float scale, float offset) {
  if (a == plan::Action::k1) return v >= offset ? 1 : -1;
  if (scale == 0.0f) return 0;
  const float q = std::nearbyint(a == plan::Action::k2 ? v / scale - 0.5f : v / scale);
  return static_cast<int8_t>(q < -128.0f ? -128.0f : (q > 127.0f ? 127.0f : q));
}
float Value(plan::Action a, int8_t level, float scale, float offset) {
  const float q = static_cast<float>(level);
  if (a == plan::Action::k1) return q * scale + offset;
  if (a == plan::Action::k2) return (q + 0.5f) * scale;
  return q * scale;
}
}  // namespace

void PlanLinears::Encode(int64_t layer, const std::array<at::Tensor, model::kNumMatrices>& w,
                         LayerCodes* codes) const {
  const std::vector<plan::Unit>& units = fits_->table().units;
  for (size_t i = 0; i < units.size(); ++i) {
    const plan::Unit& u = units[i];
    if (u.layer != layer) continue;
    const int a = (*actions_)[u.id];
    const int64_t in = w[u.matrix].size(1);
    const float* base = w[u.matrix].data_ptr<float>() + u.col_begin;
    if (a == 0) {
      std::vector<uint16_t> h(u.rows * u.cols);
      for (int64_t r = 0; r < u.rows; ++r) {
        for (int64_t c = 0; c < u.cols; ++c) h[r * u.cols + c] = HalfBits(base[r * in + c]);
      }
      codes->halves.push_back(std::move(h));
      codes->levels.emplace_back();
      continue;
    }
    const std::vector<float> scales = fits_->Scales(i, a), offsets = fits_->Offsets(i, a);
    std::vector<int8_t> l(u.rows * u.cols);
    for (int64_t r = 0; r < u.rows; ++r) {
      const float off = offsets.empty() ? 0.0f : offsets[r];
      for (int64_t c = 0; c < u.cols; ++c) {
        l[r * u.cols + c] = Level(plan::kAllActions[a], base[r * in + c], scales[r], off);
      }
    }
    codes->levels.push_back(std::move(l));
    codes->halves.emplace_back();
  }
}

void PlanLinears::Decode(int64_t layer, const LayerCodes& codes,
                         std::array<at::Tensor, model::kNumMatrices>* w, int only) const {
  const std::vector<plan::Unit>& units = fits_->table().units;
  size_t k = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    const plan::Unit& u = units[i];
    if (u.layer != layer) continue;
    if (only >= 0 && u.matrix != only) {
      ++k;
      continue;
    }
    const int a = (*actions_)[u.id];
    const int64_t in = (*w)[u.matrix].size(1);
    float* base = (*w)[u.matrix].data_ptr<float>() + u.col_begin;
    if (a == 0) {
      const std::vector<uint16_t>& h = codes.halves[k++];
      for (int64_t r = 0; r < u.rows; ++r) {
        for (int64_t c = 0; c < u.cols; ++c) base[r * in + c] = FromHalfBits(h[r * u.cols + c]);
      }
    } else {
      const std::vector<int8_t>& l = codes.levels[k++];
      const std::vector<float> scales = fits_->Scales(i, a), offsets = fits_->Offsets(i, a);
      for (int64_t r = 0; r < u.rows; ++r) {
        const float off = offsets.empty() ? 0.0f : offsets[r];
        for (int64_t c = 0; c < u.cols; ++c) {
          base[r * in + c] = Value(plan::kAllActions[a], l[r * u.cols + c], scales[r], off);
        }
      }
    }
    const SalientSet& sal = fits_->params(i).salient;
    for (int64_t s = 0; s < sal.count(); ++s) {
      const int32_t f = sal.index[s];
      base[(f / u.cols) * in + f % u.cols] = static_cast<float>(sal.codes[s]) * sal.scale;
    }
  }
}

std::array<at::Tensor, model::kNumMatrices> PlanLinears::Linears(
    int64_t layer, const model::LayerWeights& stored) const {
  c10::NoGradGuard no_grad;
  std::array<at::Tensor, model::kNumMatrices> out;
  for (int m = 0; m < model::kNumMatrices; ++m) {
    // A private FP32 copy on the CPU (also when stored FP32): overwritten in place.
    out[m] = stored.linear[m]
                 .to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true)
                 .contiguous();
  }
  if (codes_ != nullptr) {
    LayerCodes& codes = codes_[layer - fits_->first_layer()];
    bool computed = false;
    std::call_once(codes.once, [&] {
      fits_->ApplyToLayer(layer, *actions_, &out);
      Encode(layer, out, &codes);
      computed = true;
      // The codes must give the weights back bit for bit (one matrix at a time, so the
      // check costs one matrix's copy); if not, this layer is recomputed every time.
      for (int m = 0; m < model::kNumMatrices && codes.exact; ++m) {
        std::array<at::Tensor, model::kNumMatrices> check;
        check[m] = at::empty_like(out[m]);
        Decode(layer, codes, &check, m);
        codes.exact = at::equal(check[m], out[m]);
      }
      if (!codes.exact) {
        codes.levels.clear();
        codes.halves.clear();
      }
    });
    if (!computed) {
      if (codes.exact) {
        Decode(layer, codes, &out);
      } else {
        fits_->ApplyToLayer(layer, *actions_, &out);
      }
    }
  } else {
    fits_->ApplyToLayer(layer, *actions_, &out);
  }
  // To the compute dtype and the stored weights' device in one copy (none for float32
  // on the CPU).
  for (int m = 0; m < model::kNumMatrices; ++m) {
    if (stored.linear[m].device() != out[m].device() || out[m].scalar_type() != dtype_) {
      out[m] = out[m].to(stored.linear[m].device(), dtype_);
    }
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const model::LlamaModel>> ApplyPlan(
    const model::LlamaModel& model, std::shared_ptr<const StageFits> fits,
    std::shared_ptr<const std::vector<int>> actions) {
  if (fits == nullptr) return absl::InvalidArgumentError("plan: no fits");
  if (fits->first_layer() != model.first_layer() || fits->end_layer() != model.end_layer()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan: fits of layers [", fits->first_layer(), ", ", fits->end_layer(),
        ") for a model of layers [", model.first_layer(), ", ", model.end_layer(), ")"));
  }
  WQ_ASSIGN_OR_RETURN(std::shared_ptr<const PlanLinears> linears,
                      PlanLinears::Create(std::move(fits), std::move(actions), model.dtype()));
  return model.WithLinears(std::move(linears));
}

absl::StatusOr<std::shared_ptr<const QuantizedStage>> QuantizedStage::Create(
    std::shared_ptr<const model::LlamaModel> model, std::shared_ptr<const StageFits> fits) {
  if (model == nullptr || fits == nullptr) {
    return absl::InvalidArgumentError("quantized stage: no model or no fits");
  }
  if (fits->first_layer() != model->first_layer() || fits->end_layer() != model->end_layer()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quantized stage: fits of layers [", fits->first_layer(), ", ", fits->end_layer(),
        ") for weights of layers [", model->first_layer(), ", ", model->end_layer(), ")"));
  }
  return std::shared_ptr<const QuantizedStage>(
      new QuantizedStage(std::move(model), std::move(fits)));
}

absl::StatusOr<std::shared_ptr<const model::LlamaModel>> QuantizedStage::PlanModel(
    std::shared_ptr<const std::vector<int>> actions) const {
  return ApplyPlan(*model_, fits_, std::move(actions));
}

}  // namespace windquant::quant
